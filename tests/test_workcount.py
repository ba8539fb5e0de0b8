"""Exact work metrics, the A/B gate's decision rule and exact gate, the
sensitivity study's patch and bookkeeping, and the callgrind parser."""
from __future__ import annotations

import math
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gnnperf.data import load_dataset
from gnnperf.variants import TrainingRun
from gnnperf.workcount import (
    EXACT_FIELDS,
    compare_exact,
    count_ops,
    measure_work,
    prepare_step,
    work_metrics,
)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import ab_gate  # noqa: E402
import callgrind_step  # noqa: E402
import sensitivity  # noqa: E402

# One extra tensor operation in every training step, for a patched copy.
EXTRA_OP_PATCH = '''

# ---- test patch: one extra tensor operation per step ----
_test_original_step = TrainingRun.step


def _test_step_with_extra_op(self, batch):
    loss = _test_original_step(self, batch)
    loss.add(1.0)
    return loss


TrainingRun.step = _test_step_with_extra_op
'''


@pytest.fixture(scope="module")
def small_graph():
    return load_dataset("synthetic-10k")


@pytest.mark.parametrize("variant", ["baseline", "sampled"])
def test_work_metrics_are_exactly_repeatable(small_graph, variant):
    first = work_metrics(variant, small_graph)
    second = work_metrics(variant, small_graph)
    assert first.exact() == second.exact()
    assert first.op_counts == second.op_counts
    assert first.aten_ops > 50 and first.flops > 0 and first.profiled_ops > first.aten_ops
    assert 0 < first.peak_bytes <= first.bytes_allocated
    assert first.threads == 1
    assert first.compiled_graphs is None and first.recompiles is None


def test_one_extra_op_changes_the_metrics(small_graph, monkeypatch):
    before = work_metrics("baseline", small_graph)
    original = TrainingRun.step

    def step_with_extra_op(self, batch):
        loss = original(self, batch)
        loss.add(1.0)  # one more ATen call, and a 4-byte allocation
        return loss

    monkeypatch.setattr(TrainingRun, "step", step_with_extra_op)
    after = work_metrics("baseline", small_graph)
    assert after.aten_ops == before.aten_ops + 1
    assert after.op_counts["aten.add"] == before.op_counts["aten.add"] + 1
    changed = {name for name, _, _ in compare_exact(before.exact(), after.exact())}
    assert "aten_ops" in changed and "bytes_allocated" in changed
    assert set(changed) <= set(EXACT_FIELDS)


def test_op_counter_counts_one_call_per_op():
    x = torch.ones(3)
    counts = count_ops(lambda: (x + 1).mul(2).sum())
    assert counts == {"aten.add": 1, "aten.mul": 1, "aten.sum": 1}


def test_measure_work_of_a_compiled_variant_has_no_recompiles(small_graph):
    pytest.importorskip("torch._inductor")
    work = measure_work(prepare_step("compiled", small_graph))
    assert work.compiled_graphs >= 1
    assert work.graph_breaks == 0 and work.recompiles == 0


# --------------------------------------------------------------------- exact gate
def _gate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "tools" / "ab_gate.py"), *args],
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def tree_copies(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("trees")
    same = sensitivity.copy_tree(ROOT, tmp / "same")
    extra = sensitivity.copy_tree(ROOT, tmp / "extra")
    with open(extra / "gnnperf" / "variants" / "__init__.py", "a") as registry:
        registry.write(EXTRA_OP_PATCH)
    return same, extra


def test_exact_gate_passes_an_unchanged_tree_and_fails_one_extra_op(tree_copies):
    same, extra = tree_copies
    common = ["--no-time", "--variants", "baseline", "--datasets", "synthetic-10k",
              "--base-dir", str(same)]
    unchanged = _gate(*common, "--head-dir", str(ROOT))
    assert unchanged.returncode == 0, unchanged.stdout + unchanged.stderr
    assert "work gate: passed" in unchanged.stdout and "CHANGED" not in unchanged.stdout

    changed = _gate(*common, "--head-dir", str(extra))
    assert changed.returncode == 1, changed.stdout + changed.stderr
    assert "work gate: FAILED" in changed.stdout
    assert "aten.add" in changed.stdout  # names the operator that changed


def test_time_gate_runs_end_to_end(tree_copies):
    same, _ = tree_copies
    # A huge threshold: this checks the plumbing, not the machine's noise.
    result = _gate("--no-work", "--variants", "baseline", "--datasets", "synthetic-10k",
                   "--base-dir", str(same), "--processes", "3", "--rounds", "3",
                   "--threshold", "0.5", "--quiet")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "baseline@synthetic-10k" in result.stdout and "time gate: passed" in result.stdout


def test_gate_exports_a_git_ref(tmp_path):
    tree = ab_gate.export_ref("HEAD", tmp_path / "base")
    assert (tree / "gnnperf" / "variants" / "__init__.py").is_file()
    with pytest.raises(ab_gate.GateError):
        ab_gate.export_ref("no-such-ref-xyz", tmp_path / "bad")


# --------------------------------------------------------------------- decision rule
def _samples(effect: float, noise: float = 0.08, pairs: int = 3, rounds: int = 60,
             seed: int = 0) -> ab_gate.TimeSamples:
    rng = random.Random(seed)
    a = [[0.01 * math.exp(rng.gauss(0, noise)) for _ in range(rounds)] for _ in range(pairs)]
    b = [[0.01 * (1 + effect) * math.exp(rng.gauss(0, noise)) for _ in range(rounds)]
         for _ in range(pairs)]
    return ab_gate.TimeSamples("baseline@test", 1, "cpu", a, b)


@pytest.mark.parametrize("effect, verdict", [(0.0, "same"), (0.2, "REGRESSION"),
                                             (-0.2, "improvement"), (0.02, "same")])
def test_decide(effect, verdict):
    v = ab_gate.decide(_samples(effect), threshold=0.03, alpha=0.01)
    assert v.verdict == verdict
    assert v.ci_low <= v.ratio <= v.ci_high
    assert abs(v.ratio - (1 + effect)) < 0.03


def test_decide_needs_significance_as_well_as_size():
    # A big but hopelessly noisy difference is not a regression.
    v = ab_gate.decide(_samples(0.1, noise=1.0, rounds=5), threshold=0.03, alpha=0.01)
    assert v.p_slower > 0.01 and v.verdict == "same"


def test_one_slow_process_is_noise_not_a_regression():
    # Pair 3's head process runs 15% slow in every round (a process-level
    # offset such as memory layout): consistent rounds, but one replicate.
    samples = _samples(0.0, noise=0.05, pairs=3, rounds=60)
    samples.b[2] = [t * 1.15 for t in samples.b[2]]
    v = ab_gate.decide(samples, threshold=0.03, alpha=0.01)
    assert v.ratio > 1.03 and v.verdict == "same"


def test_judge_and_table():
    assert ab_gate.judge(1.06, 0.001, 0.999, 0.05, 0.01) == "REGRESSION"
    assert ab_gate.judge(1.04, 0.001, 0.999, 0.05, 0.01) == "same"
    assert ab_gate.judge(1.06, 0.02, 0.98, 0.05, 0.01) == "same"
    table = ab_gate.format_time([ab_gate.decide(_samples(0.2), 0.03, 0.01)], 0.03, 0.01)
    assert "REGRESSION" in table and "ratio" in table and "spread" in table


def test_compare_work_reports_new_benchmarks():
    base = [None, {"exact": {"aten_ops": 1}, "op_counts": {"aten.add": 1}}]
    head = [{"exact": {"aten_ops": 1}, "op_counts": {}},
            {"exact": {"aten_ops": 2}, "op_counts": {"aten.add": 2}}]
    rows = ab_gate.compare_work(["new@g", "old@g"], base, head)
    assert rows[0]["new"] and not rows[0]["same"]
    assert rows[1] == {"case": "old@g", "metric": "aten_ops", "base": 1, "head": 2,
                       "same": False}
    assert rows[2]["op_diff"] == {"aten.add": (1, 2)}
    table = ab_gate.format_work(rows)
    assert "new" in table and "CHANGED" in table and "aten.add 1->2" in table


# --------------------------------------------------------------------- sensitivity study
def test_slowdown_patch_touches_only_the_copy_and_one_variant(tmp_path):
    tree = sensitivity.copy_tree(ROOT, tmp_path / "copy")
    original = (ROOT / sensitivity.PATCHED_FILE).read_text()
    patch = sensitivity.inject_slowdown(tree, "baseline", 0.2)
    assert (ROOT / sensitivity.PATCHED_FILE).read_text() == original
    assert (tree / sensitivity.PATCHED_FILE).read_text() == original + patch
    probe = (
        "import torch\n"
        "from gnnperf.data import load_dataset\n"
        "from gnnperf.variants import get_variant, TrainConfig\n"
        "data = load_dataset('synthetic-10k')\n"
        "runs = {v: get_variant(v).build(data, TrainConfig(), torch.device('cpu'))\n"
        "        for v in ('baseline', 'amp')}\n"
        "print(runs['baseline'].step.__name__, getattr(runs['amp'].step, '__name__', ''))\n")
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path,
                         env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["slow_step", "step"]


def test_sensitivity_rates():
    def trial(s, ratio, p):
        rec = {"ratio": ratio, "p_slower": p, "p_faster": 1 - p}
        return {"slowdown": s, "cpu": rec, "wall": rec}

    trials = ([trial(0.0, 1.01, 0.2)] * 9 + [trial(0.0, 1.04, 0.001)]
              + [trial(0.05, 1.05, 0.001)] * 10 + [trial(0.2, 1.2, 0.001)] * 10)
    rows = sensitivity.evaluate(trials, [0.03, 0.045], 0.01, clocks=("cpu",))
    assert rows[0][0.0] == (1, 10) and rows[1][0.0] == (0, 10)
    assert rows[1][0.05] == (10, 10)
    assert sensitivity.smallest_clean(rows[0]) is None
    assert sensitivity.smallest_clean(rows[1]) == 0.05
    assert "| cpu | 4.5% |" in sensitivity.format_table(trials, rows)


def test_callgrind_total_parser():
    assert callgrind_step.parse_total("events: Ir\nsummary: 1234\n") == 1234
    assert callgrind_step.parse_total("events: Ir\ntotals: 99\n") == 99
    with pytest.raises(ValueError):
        callgrind_step.parse_total("events: Ir\n")
