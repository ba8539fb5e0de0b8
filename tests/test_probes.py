"""GPU monitoring (NVML) against a fake pynvml, its n/a path on CPU, and the
memory timeline."""
import mmap
import sys
import time
import types

import torch

from gnnperf import report
from gnnperf.measure.runner import measure_variant
from gnnperf.measure.probes import GpuMonitor, MemoryTimeline
from gnnperf.variants import TrainConfig
from gnnperf.variants import get_variant


def fake_nvml(util=(30, 90), memory_mib=(1000, 3000), power_w=(100, 300), clock=1410,
              broken=()):
    """A stand-in for pynvml whose readings cycle through the given values."""
    calls = {"n": 0, "init": 0, "shutdown": 0}

    def cycle(values):
        calls["n"] += 1
        return values[calls["n"] % len(values)]

    def maybe_broken(name, value):
        if name in broken:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        return value

    nvml = types.SimpleNamespace(
        NVML_CLOCK_SM=1, calls=calls,
        nvmlInit=lambda: calls.__setitem__("init", calls["init"] + 1),
        nvmlShutdown=lambda: calls.__setitem__("shutdown", calls["shutdown"] + 1),
        nvmlDeviceGetHandleByIndex=lambda index: f"gpu{index}",
        nvmlDeviceGetUtilizationRates=lambda h: types.SimpleNamespace(
            gpu=maybe_broken("util", cycle(util))),
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(
            used=maybe_broken("memory", cycle(memory_mib) * 2 ** 20)),
        nvmlDeviceGetPowerUsage=lambda h: maybe_broken("power", cycle(power_w) * 1000),
        nvmlDeviceGetClockInfo=lambda h, kind: maybe_broken("clock", clock))
    return nvml


def test_monitor_samples_only_while_active_and_summarises():
    nvml = fake_nvml()
    monitor = GpuMonitor(nvml, "gpu0", interval_s=0.002)
    try:
        time.sleep(0.05)
        assert monitor.samples["gpu_util_pct"] == []  # not active yet: nothing sampled
        with monitor.active():
            deadline = time.monotonic() + 5
            while len(monitor.samples["gpu_util_pct"]) < 10 and time.monotonic() < deadline:
                time.sleep(0.01)
        time.sleep(0.05)  # a sample in flight may land
        taken = len(monitor.samples["gpu_util_pct"])
        time.sleep(0.1)
        assert len(monitor.samples["gpu_util_pct"]) == taken >= 10  # stopped with the context
        summary = monitor.summary()
    finally:
        monitor.close()
    assert set(summary) == {"gpu_util_pct", "gpu_memory_used_mib", "gpu_power_w",
                            "gpu_sm_clock_mhz"}
    assert summary["gpu_util_pct"]["max"] == 90 and 30 <= summary["gpu_util_pct"]["mean"] <= 90
    assert summary["gpu_memory_used_mib"]["max"] == 3000
    assert summary["gpu_power_w"]["max"] == 300  # milliwatts converted
    assert summary["gpu_sm_clock_mhz"] == {"mean": 1410, "max": 1410, "samples": taken}
    assert nvml.calls["shutdown"] == 1


def test_a_metric_the_gpu_does_not_report_is_absent_not_zero():
    monitor = GpuMonitor(fake_nvml(broken=("power",)), "gpu0")
    try:
        monitor.sample_once()
        monitor.sample_once()
    finally:
        monitor.close()
    assert "gpu_power_w" not in monitor.summary()
    assert monitor.summary()["gpu_util_pct"]["samples"] == 2


def test_no_monitor_without_cuda_or_nvml(monkeypatch):
    assert GpuMonitor.for_device(torch.device("cpu")) == (None, "not a CUDA run")
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monitor, reason = GpuMonitor.for_device(torch.device("cuda"))
    assert monitor is None and "nvidia-ml-py not installed" in reason

    def no_driver():
        raise RuntimeError("NVML Shared Library Not Found")
    monkeypatch.setitem(sys.modules, "pynvml", types.SimpleNamespace(nvmlInit=no_driver))
    monitor, reason = GpuMonitor.for_device(torch.device("cuda"))
    assert monitor is None and reason.startswith("NVML unavailable")


def test_cpu_run_reports_monitoring_as_na_and_a_timeline_off_the_clock(cora_dataset, monkeypatch):
    # The timeline's probes (a /proc write and read per step, a visible share
    # of the fastest Cora step) run in the warm-up epochs only, never inside the
    # clock of a steady epoch.
    from gnnperf.measure import runner as measure
    epochs = []  # per epoch: whether its steps were probed
    real_epoch = measure._run_epoch

    def run_epoch(run, counter, measure_peak=None, timeline=None, after_step=None):
        epochs.append(timeline is not None)
        return real_epoch(run, counter, measure_peak, timeline, after_step)
    monkeypatch.setattr(measure, "_run_epoch", run_epoch)
    result = measure_variant(get_variant("sampled"), cora_dataset, TrainConfig(epochs=5), "cpu", 2)
    assert epochs == [True, True, False, False, False]  # 2 warm-up, 3 timed
    assert result.gpu_monitor is None and result.gpu_monitor_note == "not a CUDA run"
    rss = result.memory_timeline["rss_bytes"]
    peaks = result.memory_timeline["step_peak_bytes"]
    assert len(rss) == len(peaks) == result.warmup_epochs * result.steps_per_epoch
    assert all(value > 50 * 2 ** 20 for value in rss)  # torch and Cora are resident
    assert all(peak >= after for peak, after in zip(peaks, rss))
    assert result.memory_timeline["allocated_bytes"] is None  # CUDA figures: n/a, not 0
    row = report.comparison_rows([result])[0]
    assert row["gpu_util_pct"] is None and row["gpu_power_w"] is None
    table = report.format_table([result])
    row = next(line for line in table.splitlines() if line.startswith("sampled"))
    assert row.rstrip().endswith("n/a                    n/a")


def test_timeline_and_summary_charts(cora_dataset, tmp_path):
    results = [measure_variant(get_variant(v), cora_dataset, TrainConfig(epochs=4), "cpu", 2)
               for v in ("baseline", "sampled")]
    assert report.plot_timeline(results, tmp_path / "t.png") == 2
    assert report.plot(results, tmp_path / "p.png") == 2
    for name in ("t.png", "p.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_timeline_sees_a_step_peak_that_is_freed_again():
    timeline = MemoryTimeline("cpu")
    try:
        timeline.before_step()
        # 64 MiB of fresh pages, touched, then unmapped. Not a torch tensor:
        # glibc may serve that from a free, already resident heap chunk an
        # earlier test left (CI saw no rise once), and RSS would not move.
        fresh = mmap.mmap(-1, 64 * 2 ** 20)
        torch.frombuffer(fresh, dtype=torch.uint8).fill_(1)
        fresh.close()
        timeline.after_step()
        timeline.before_step()
        timeline.after_step()  # a step that allocates nothing
        start = time.perf_counter()
        for _ in range(500):
            timeline.before_step()
            timeline.after_step()
        per_step = (time.perf_counter() - start) / 500
    finally:
        timeline.close()
    first_peak, quiet_peak = timeline.step_peak_bytes[:2]
    assert first_peak - timeline.rss_bytes[0] > 50 * 2 ** 20  # seen, though freed by the end
    assert quiet_peak - timeline.rss_bytes[1] < 8 * 2 ** 20  # reset before the next step
    per_read = per_step
    # Not a speed target: a guard that the per-step probe stays a cheap pread
    # (a subprocess or a /proc scan would be far slower).
    assert per_read < 1e-3


def test_too_few_samples_or_too_short_a_window_make_the_figures_na(monkeypatch):
    # NVML's utilisation is a share of its own sample period: a handful of
    # samples over milliseconds of epochs is no figure, and says why.
    import gnnperf.measure.probes
    monitor = GpuMonitor(fake_nvml(), "gpu0", interval_s=0.002)
    try:
        with monitor.active():
            time.sleep(0.02)
        figures, note = monitor.figures()
        assert figures is None and "raise --epochs" in note
        assert monitor.summary()  # the raw samples are there, just too few
        monkeypatch.setattr(gnnperf.measure.probes, "MIN_WINDOW_S", 0.2)
        with monitor.active():
            deadline = time.monotonic() + 5
            while (monitor.window_s < 0.25 or len(monitor.samples["gpu_util_pct"]) < 10) \
                    and time.monotonic() < deadline:
                time.sleep(0.01)
        figures, note = monitor.figures()
    finally:
        monitor.close()
    assert note == "" and figures["window_s"] >= 0.2
    assert figures["gpu_util_pct"]["samples"] >= 10


def test_nvml_is_shut_down_when_the_gpu_has_no_handle(monkeypatch):
    nvml = fake_nvml()

    def no_such_gpu(*args):
        raise RuntimeError("NVML_ERROR_NOT_FOUND")
    nvml.nvmlDeviceGetHandleByIndex = nvml.nvmlDeviceGetHandleByUUID = no_such_gpu
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda index: types.SimpleNamespace(uuid="0000"))
    monitor, reason = GpuMonitor.for_device(torch.device("cuda:0"))
    assert monitor is None and "no handle for cuda:0" in reason
    assert nvml.calls["init"] == nvml.calls["shutdown"] == 1
