"""gnnperf doctor on CPU: what runs passes, the CUDA-only checks are skipped
and named, and a broken figure makes it exit 1."""
import dataclasses
import json

import pytest
import torch

from gnnperf.cli import main
from gnnperf.doctor import FAIL, PASS, SKIP, Doctor, variant_figures
from gnnperf.measure import measure_variant as real_measure_variant  # before any patching
from gnnperf.variants import standard_variants

CUDA_ONLY = {"timing is synchronised", "padded sampler syncs at most 3 for 2 hops",
             "offload copies each batch on a side stream", "NVML monitor samples the GPU",
             "ddp on NCCL, 2 GPUs", "asv CUDA benchmarks give numbers"}


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU pattern")
def test_doctor_on_cpu_passes_and_skips_the_cuda_checks(tmp_path, capsys, monkeypatch,
                                                        reuse_trained):
    # The doctor's own trainings at the shared fixture's epochs, so they come
    # from conftest's one training of the registry (its code path unchanged).
    import gnnperf.doctor
    from conftest import TRAINED_EPOCHS
    monkeypatch.setattr(gnnperf.doctor, "EPOCHS", TRAINED_EPOCHS)
    monkeypatch.setattr(gnnperf.doctor, "AMP_EPOCHS", TRAINED_EPOCHS)
    out = tmp_path / "doctor.json"
    assert main(["doctor", "--device", "cpu", "--json", str(out)]) == 0
    assert set(standard_variants()) <= set(reuse_trained.hits)
    printed = capsys.readouterr().out
    report = json.loads(out.read_text())
    status = {check["name"]: check["status"] for check in report["checks"]}
    assert report["passed"] is True and report["device"] == "cpu"
    assert {name for name, s in status.items() if s == SKIP} == CUDA_ONLY
    assert all(check["reason"].startswith("CUDA only") for check in report["checks"]
               if check["status"] == SKIP)
    assert {f"train {v}" for v in standard_variants()} <= {n for n, s in status.items()
                                                            if s == PASS}
    for name in ("environment", "amp dtype and loss curve", "amp fp16 with GradScaler trains",
                 "sampler invariants on cpu",
                 "compile: no graph breaks, one graph",
                 "peak memory (CPU profiler memory events)"):
        assert status[name] == PASS, name
    assert "CUDA peak n/a" in printed and "SKIPPED timing is synchronised" in printed


def test_a_broken_peak_figure_fails_the_doctor(monkeypatch, capsys):
    import gnnperf.measure
    monkeypatch.setattr(gnnperf.measure, "measure_cpu_peak", lambda fn: (fn(), 0)[1])
    monkeypatch.setattr(Doctor, "checks", lambda self: iter([self.environment,
                                                               self.peak_memory]))
    assert main(["doctor", "--device", "cpu"]) == 1
    out = capsys.readouterr().out
    assert "FAIL    peak memory (CPU profiler memory events): 0.0 MiB seen" in out
    assert "1 failed" in out


def test_variant_figures_catch_zeros_and_missing_cuda_peaks(cora):
    from gnnperf.measure import measure_variant
    from gnnperf.variants import TrainConfig
    result = measure_variant("baseline", cora, TrainConfig(epochs=4), "cpu", 2)
    assert variant_figures(result, torch.device("cpu")).status == PASS
    on_fake_cuda = dataclasses.replace(result, device="cuda:0", cuda_peak_bytes=None)
    check = variant_figures(on_fake_cuda, torch.device("cuda"))
    assert check.status == FAIL and "CUDA peak None on CUDA" in check.reason
    zero_cpu = dataclasses.replace(result, cuda_peak_bytes=0)
    assert "must be n/a" in variant_figures(zero_cpu, torch.device("cpu")).reason
    zero_peak = dataclasses.replace(result, step_peak_bytes=0)
    assert variant_figures(zero_peak, torch.device("cpu")).status == FAIL
    flat = dataclasses.replace(result, losses=[1.0, 1.0])
    assert "did not fall" in variant_figures(flat, torch.device("cpu")).reason


def test_the_shared_training_stands_in_for_the_real_call_only(reuse_trained, cora):
    # What the doctor and CLI tests get from conftest's shortcut is what the
    # real measure_variant gives for that call (deterministic on CPU), and a
    # call it was not made for trains for real.
    from conftest import TRAINED_EPOCHS, TRAINED_WARMUP
    import gnnperf.measure
    from gnnperf.variants import TrainConfig
    config = TrainConfig(epochs=TRAINED_EPOCHS)
    shortcut = gnnperf.measure.measure_variant("sampled", cora, config, "cpu", TRAINED_WARMUP)
    assert reuse_trained.hits == ["sampled"]  # answered from the shared training
    real = real_measure_variant("sampled", cora, config, "cpu", TRAINED_WARMUP)
    assert shortcut.losses == real.losses and shortcut.test_acc == real.test_acc
    other = gnnperf.measure.measure_variant("sampled", cora, TrainConfig(epochs=4), "cpu", 2)
    assert reuse_trained.hits == ["sampled"]  # trained for real
    assert len(other.losses) == 4 and other.losses == real.losses[:4]
