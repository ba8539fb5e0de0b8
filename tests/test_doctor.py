"""gnnperf doctor on CPU: a broken figure makes it exit 1, the variant
check's n/a rules and the asv judge's (its run on CPU, the comparison cut
to the baseline, is a step of tools/gpu_check.sh's first call in
tests/test_gpu_check.py)."""
import dataclasses
import sys

import torch

from gnnperf.cli import main
from gnnperf.doctor import FAIL, PASS, Doctor, variant_figures
from gnnperf.measure.runner import measure_variant as real_measure_variant  # before any patching
from gnnperf.variants import get_variant

CUDA_ONLY = {"timing is synchronised", "padded sampler syncs at most 3 for 2 hops",
             "offload copies each batch on a side stream", "NVML monitor samples the GPU",
             "ddp on NCCL", "asv CUDA benchmarks give numbers"}


# The doctor on CPU (what runs passes, the CUDA-only checks are skipped and
# named): tests/test_gpu_check.py, a step of the first call.


def test_a_broken_peak_figure_fails_the_doctor(monkeypatch, capsys):
    import gnnperf.measure.runner
    monkeypatch.setattr(gnnperf.measure.runner, "measure_cpu_peak", lambda fn: (fn(), 0)[1])
    monkeypatch.setattr(Doctor, "checks", lambda self: iter([self.environment,
                                                               self.peak_memory]))
    assert main(["doctor", "--device", "cpu"]) == 1
    out = capsys.readouterr().out
    assert "FAIL    peak memory (CPU profiler memory events): 0.0 MiB seen" in out
    assert "1 failed" in out


def test_variant_figures_catch_zeros_and_missing_cuda_peaks(cora_dataset):
    from gnnperf.measure.runner import measure_variant
    from gnnperf.variants import TrainConfig
    result = measure_variant(get_variant("baseline"), cora_dataset, TrainConfig(epochs=4), "cpu", 2)
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


def test_the_shared_training_stands_in_for_the_real_call_only(reuse_trained, cora_dataset):
    # What the doctor and CLI tests get from conftest's shortcut is what the
    # real measure_variant gives for that call (deterministic on CPU), and a
    # call it was not made for trains for real.
    from conftest import TRAINED_EPOCHS, TRAINED_WARMUP
    import gnnperf.measure.runner
    from gnnperf.variants import TrainConfig
    config = TrainConfig(epochs=TRAINED_EPOCHS)
    sampled = get_variant("sampled")
    shortcut = gnnperf.measure.runner.measure_variant(sampled, cora_dataset, config, "cpu",
                                                      TRAINED_WARMUP)
    assert reuse_trained.hits == ["sampled"]  # answered from the shared training
    real = real_measure_variant(sampled, cora_dataset, config, "cpu", TRAINED_WARMUP)
    assert shortcut.losses == real.losses and shortcut.test_acc == real.test_acc
    other = gnnperf.measure.runner.measure_variant(sampled, cora_dataset, TrainConfig(epochs=4),
                                                   "cpu", 2)
    assert reuse_trained.hits == ["sampled"]  # trained for real
    assert len(other.losses) == 4 and other.losses == real.losses[:4]


def test_without_a_cpp_compiler_the_compile_checks_are_skipped_with_the_fix(monkeypatch):
    # compiled's n/a rule is one definition: the doctor's variant check and
    # its compile check both skip, naming the fix, and neither fails.
    from gnnperf.doctor import SKIP
    import gnnperf.variants
    monkeypatch.setattr("gnnperf.variants.compiled.cpp_compiler", lambda: None)
    monkeypatch.setattr(gnnperf.variants, "standard_variants", lambda: ["compiled"])
    doctor = Doctor(torch.device("cpu"))
    trained = doctor.variants()
    assert [(c.name, c.status) for c in trained] == [("train compiled", SKIP)]
    compile_check = doctor.compile_once()
    assert compile_check.status == SKIP
    for check in (*trained, compile_check):
        assert "install g++" in check.reason


def test_an_na_passes_only_for_a_package_the_variant_declares_and_lacks(monkeypatch):
    # Finding 9: a reason that names an install is not enough. cluster
    # declares pymetis (its Technique.needs_packages): its n/a is a skip
    # where pymetis is missing; sampled declares nothing: its "pip install"
    # n/a fails the check, as does cluster's where pymetis imports.
    import gnnperf.doctor
    import gnnperf.measure.runner
    import gnnperf.variants
    from gnnperf.doctor import SKIP
    from gnnperf.errors import Unavailable
    reasons = {"sampled": "variant sampled: needs foo: pip install foo",
               "cluster": "variant cluster: cluster needs pymetis: pip install 'gnnperf[cluster]'"}

    def unavailable(variant, *args, **kwargs):
        raise Unavailable(reasons[variant.name])
    monkeypatch.setattr(gnnperf.variants, "standard_variants", lambda: list(reasons))
    monkeypatch.setattr(gnnperf.measure.runner, "measure_variant", unavailable)
    for pymetis, cluster in ((False, SKIP), (True, FAIL)):
        monkeypatch.setattr(gnnperf.doctor, "importable", lambda name: name != "pymetis" or pymetis)
        checks = {c.name: c for c in Doctor(torch.device("cpu")).variants()}
        assert checks["train sampled"].status == FAIL
        assert "not a declared n/a here: sampled declares no package it needs" in checks[
            "train sampled"].reason
        assert checks["train cluster"].status == cluster, checks["train cluster"].reason
    assert "it needs pymetis, all importable here" in checks["train cluster"].reason


def test_the_asv_judge_accepts_an_na_only_where_its_benchmark_declares_what_is_missing(
        tmp_path, monkeypatch):
    # asv keeps no reason with an n/a: each is judged by its benchmark and
    # parameters. A cluster pair without pymetis, a pair that cannot combine
    # (sparse with GAT) and the GPU idle figure without NVML are declared;
    # an n/a of sampled is not, whatever is missing.
    import json
    import types

    from gnnperf.doctor import judge_asv_run
    # asv's config has comments (JSON5), as the project's own has.
    (tmp_path / "asv.conf.json").write_text('{\n    // where asv writes\n    "results_dir": '
                                            '"results"\n}')
    (tmp_path / "results" / "gpu").mkdir(parents=True)
    from gnnperf.doctor import asv_config
    with monkeypatch.context() as patch:  # without json5 (asv's), the comment lines dropped
        patch.setitem(sys.modules, "json5", None)
        assert asv_config(tmp_path) == {"results_dir": "results"}
    nan = float("nan")
    commit = "0123456789abcdef"

    def judged(values: list, idle: float, missing: set):
        results = {"version": 2, "commit_hash": commit, "env_name": "env",
                   "result_columns": ["result", "params"], "results": {
            "training.CudaStepMemory.track_cuda_peak_mib": [
                values, [["'cora'"], ["'cluster'", "'sparse'", "'sampled'"], ["'gcn'", "'gat'"]]],
            "training.OffloadGpuIdle.track_gpu_idle_pct": [[idle], [["'cora'"],
                                                                    ["'sampled+offload'"]]]}}
        (tmp_path / "results" / "gpu" / f"{commit[:8]}-env.json").write_text(json.dumps(results))
        return judge_asv_run(types.SimpleNamespace(returncode=0, stdout=""), tmp_path, commit,
                             "cuda", lambda name: name not in missing)
    # product order: (cluster, gcn), (cluster, gat), (sparse, gcn), (sparse, gat), (sampled, ...)
    declared = [nan, nan, 1.0, nan, 2.0, 3.0]
    status, figure, reason = judged(declared, nan, {"pymetis", "pynvml"})
    assert status == PASS and "4 n/a" in figure and "missing pymetis, pynvml" in reason
    status, _, reason = judged(declared, nan, {"pymetis"})  # NVML there, yet no idle figure
    assert status == FAIL and "OffloadGpuIdle.track_gpu_idle_pct(cora, sampled+offload)" in reason
    status, _, reason = judged([nan, nan, 1.0, nan, nan, 3.0], 5.0, {"pymetis", "pynvml"})
    assert status == FAIL and reason == ("training.CudaStepMemory.track_cuda_peak_mib(cora, "
                                         "sampled, gcn) n/a with everything it declares present")
