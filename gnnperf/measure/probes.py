"""What nvidia-smi shows, sampled while a variant trains: GPU utilisation,
memory used, power and SM clock from NVIDIA's NVML (the ``nvidia-ml-py``
package, imported as ``pynvml``), in a background thread during the timed
epochs; and the memory after every training step (CUDA allocated bytes and
per-step peak, or the process RSS on CPU) for the memory-over-iterations
chart."""
from __future__ import annotations

import os
import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import torch

# 20 samples a second: a few NVML calls per sample, a negligible share of a
# core, while a short epoch still gets a sample.
DEFAULT_INTERVAL_S = 0.05
# NVML's utilisation is the share of its own sample period (1/6 s to 1 s,
# by GPU) in which a kernel ran, so samples over less than a second of
# timed epochs repeat one or two driver readings: fewer than this many
# samples, or a shorter window, and the figures are n/a with that reason.
MIN_SAMPLES = 10
MIN_WINDOW_S = 1.0
METRICS = ("gpu_util_pct", "gpu_memory_used_mib", "gpu_power_w", "gpu_sm_clock_mhz")


def _nvml_module() -> Any | None:
    try:
        import pynvml  # nvidia-ml-py
    except ImportError:
        return None
    return pynvml


class GpuMonitor:
    r"""Samples one GPU through NVML in a daemon thread while :meth:`active`.

    Args:
        nvml: The ``pynvml`` module (or a stand-in with the same functions).
        handle: The NVML device handle.
        interval_s (float): Seconds between samples.

    Use :meth:`for_device` to get one for a torch device: :obj:`None` and a
    reason on CPU, without ``nvidia-ml-py`` or without a driver, so every
    figure is n/a rather than 0.
    """

    def __init__(self, nvml: Any, handle: Any, interval_s: float = DEFAULT_INTERVAL_S) -> None:
        self.nvml, self.handle, self.interval_s = nvml, handle, interval_s
        self.samples: dict[str, list[float]] = {name: [] for name in METRICS}
        self._window_done = 0.0  # seconds of finished active periods
        self._active_since: float | None = None
        self._active = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gnnperf-nvml", daemon=True)
        self._thread.start()

    @classmethod
    def for_device(cls, device: torch.device, interval_s: float = DEFAULT_INTERVAL_S
                   ) -> tuple["GpuMonitor | None", str]:
        """A monitor of :obj:`device`'s GPU and "", or :obj:`None` and why not."""
        if device.type != "cuda":
            return None, "not a CUDA run"
        nvml = _nvml_module()
        if nvml is None:
            return None, "nvidia-ml-py not installed (pip install 'gnnperf[gpu]')"
        try:
            nvml.nvmlInit()
        except Exception as exc:  # NVMLError: no driver, no permission
            return None, f"NVML unavailable ({type(exc).__name__}: {exc})"
        try:
            index = device.index if device.index is not None else torch.cuda.current_device()
            # NVML counts every GPU, CUDA only the visible ones: match by UUID.
            uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
            handle = (nvml.nvmlDeviceGetHandleByUUID(f"GPU-{uuid}") if uuid is not None
                      else nvml.nvmlDeviceGetHandleByIndex(index))
        except Exception as exc:  # no handle for this GPU: release NVML again
            try:
                nvml.nvmlShutdown()
            except Exception:
                pass
            return None, f"NVML has no handle for {device} ({type(exc).__name__}: {exc})"
        return cls(nvml, handle, interval_s), ""

    def sample_once(self) -> None:
        """Reads every metric once (the thread calls this; tests may too)."""
        nvml, handle = self.nvml, self.handle
        readings = {}
        for name, read in (
                ("gpu_util_pct", lambda: nvml.nvmlDeviceGetUtilizationRates(handle).gpu),
                ("gpu_memory_used_mib", lambda: nvml.nvmlDeviceGetMemoryInfo(handle).used / 2**20),
                ("gpu_power_w", lambda: nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0),  # mW
                ("gpu_sm_clock_mhz", lambda: nvml.nvmlDeviceGetClockInfo(handle,
                                                                         nvml.NVML_CLOCK_SM))):
            try:
                readings[name] = float(read())
            except Exception:  # a metric this GPU does not report stays absent
                continue
        for name, value in readings.items():
            self.samples[name].append(value)

    def _loop(self) -> None:
        while not self._stop.is_set():
            if self._active.wait(timeout=0.2) and not self._stop.is_set():
                self.sample_once()
                self._stop.wait(self.interval_s)

    def active(self) -> "_Active":
        """Context in which the thread samples (the timed epochs)."""
        return _Active(self)

    def close(self) -> None:
        self._stop.set()
        self._active.set()
        self._thread.join(timeout=2)
        try:
            self.nvml.nvmlShutdown()
        except Exception:
            pass

    def summary(self) -> dict[str, dict[str, float]]:
        """Mean and max per metric over the samples taken (metrics never read
        are left out: n/a, not 0), whatever their number: :meth:`figures`
        is what a report shows."""
        return {name: {"mean": statistics.fmean(values), "max": max(values),
                       "samples": len(values)}
                for name, values in self.samples.items() if values}

    @property
    def window_s(self) -> float:
        """Seconds spent active so far (the timed epochs), the current one included."""
        since = self._active_since
        return self._window_done + (time.perf_counter() - since if since is not None else 0.0)

    def figures(self) -> tuple[dict | None, str]:
        """The summary and "" when at least :data:`MIN_SAMPLES` samples over
        :data:`MIN_WINDOW_S` seconds were taken; else :obj:`None` and why."""
        taken = max((len(values) for values in self.samples.values()), default=0)
        if taken < MIN_SAMPLES or self.window_s < MIN_WINDOW_S:
            return None, (f"NVML sampled {taken} times over {self.window_s:.2f} s of timed "
                          f"epochs; at least {MIN_SAMPLES} samples over {MIN_WINDOW_S:g} s are "
                          f"needed (NVML's utilisation is a share of its own 1/6-1 s sample "
                          f"period): raise --epochs")
        # A metric read fewer times (one that failed now and then) is left out.
        kept = {name: figures for name, figures in self.summary().items()
                if figures["samples"] >= MIN_SAMPLES}
        return {**kept, "window_s": self.window_s}, ""


class _Active:
    def __init__(self, monitor: GpuMonitor) -> None:
        self.monitor = monitor

    def __enter__(self) -> None:
        self.monitor._active_since = time.perf_counter()
        self.monitor._active.set()

    def __exit__(self, *exc) -> None:
        monitor = self.monitor
        monitor._active.clear()
        monitor._window_done += time.perf_counter() - monitor._active_since
        monitor._active_since = None


@dataclass
class MemoryTimeline:
    r"""Memory after every step it probes (:func:`~gnnperf.measure.runner.measure_variant`:
    the warm-up epochs', never a timed one), for the chart of memory over
    training iterations.

    On CUDA: :obj:`allocated_bytes` (``memory_allocated`` after the step) and
    :obj:`step_peak_bytes` (``max_memory_allocated`` since a reset just
    before the step); host-side allocator counters, so reading them does not
    wait for the GPU. On CPU (Linux): :obj:`rss_bytes` after the step and
    :obj:`step_peak_bytes`, the resident-set high-water mark during the step
    (``VmHWM``, reset before it by writing 5 to ``/proc/self/clear_refs``,
    read from ``/proc/self/status``: microseconds each). Both
    are process-wide: the dataset, the interpreter and heap memory an
    earlier variant left to glibc are included; the CUDA figures are above
    :obj:`held_bytes`, what the process held before the run was built.
    """
    device: str
    held_bytes: int = 0
    allocated_bytes: list[int] = field(default_factory=list)
    step_peak_bytes: list[int] = field(default_factory=list)
    rss_bytes: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._cuda = self.device.startswith("cuda")
        self._status = self._clear_refs = None
        if not self._cuda:
            try:
                self._status = os.open("/proc/self/status", os.O_RDONLY)
            except OSError:  # not Linux: no timeline on CPU
                return
            try:
                self._clear_refs = os.open("/proc/self/clear_refs", os.O_WRONLY)
            except OSError:  # not permitted: RSS after each step only
                self._clear_refs = None

    def before_step(self) -> None:
        if self._cuda:
            torch.cuda.reset_peak_memory_stats(self.device)
        elif self._clear_refs is not None:
            os.write(self._clear_refs, b"5")  # resets VmHWM to the current RSS

    def after_step(self) -> None:
        if self._cuda:
            held = self.held_bytes
            self.allocated_bytes.append(max(torch.cuda.memory_allocated(self.device) - held, 0))
            self.step_peak_bytes.append(
                max(torch.cuda.max_memory_allocated(self.device) - held, 0))
        elif self._status is not None:
            fields = {}
            for line in os.pread(self._status, 8192, 0).split(b"\n"):
                if line.startswith((b"VmHWM:", b"VmRSS:")):
                    fields[line[:5]] = int(line.split()[1]) * 1024  # kB
            self.rss_bytes.append(fields[b"VmRSS"])
            if self._clear_refs is not None:
                self.step_peak_bytes.append(fields[b"VmHWM"])

    def close(self) -> None:
        for fd in (self._status, self._clear_refs):
            if fd is not None:
                os.close(fd)
        self._status = self._clear_refs = None

    def to_dict(self) -> dict:
        return {"device": self.device, "held_bytes": self.held_bytes,
                "allocated_bytes": self.allocated_bytes or None,
                "step_peak_bytes": self.step_peak_bytes or None,
                "rss_bytes": self.rss_bytes or None}
