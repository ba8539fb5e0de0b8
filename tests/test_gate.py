"""The regression workflow through its public names: ``gnnperf gate`` (exact
work gate, time gate, Markdown), environment arms, the decision rule, the
injected faults, the sensitivity bookkeeping and ``gnnperf bisect`` on a
throw-away repository."""
from __future__ import annotations

import contextlib
import io
import json
import math
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gnnperf import gate
from gnnperf.gate import faults
from gnnperf.measure.case import Case
from gnnperf.cli import main
from gnnperf.gate.sensitivity import evaluate, format_table, smallest_clean

ROOT = Path(__file__).resolve().parents[1]
SMALL = "synthetic-10k"  # 2,000 nodes: a step of about a millisecond


def _gnnperf(*args: str) -> subprocess.CompletedProcess:
    """``gnnperf ARGS`` in this process, from the checkout's top (as a user
    runs it there), its exit status and output as a finished process's: the
    gate's arms are processes of their own either way, and this one skips an
    interpreter start per command."""
    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(args))
    finally:
        os.chdir(here)
    return subprocess.CompletedProcess(["gnnperf", *args], code, out.getvalue(), err.getvalue())


@pytest.fixture(scope="module")
def tree_copies(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("trees")
    same = gate.copy_tree(ROOT, tmp / "same")
    extra = gate.copy_tree(ROOT, tmp / "extra")
    faults.inject(extra, "extra-op")
    return same, extra


# --------------------------------------------------------------------- gate command
@pytest.mark.e2e  # two gates between trees, as a user runs them from the checkout's top
def test_exact_gate_passes_an_unchanged_tree_and_fails_one_extra_op(tree_copies, tmp_path):
    same, extra = tree_copies
    common = ["gate", "--no-time", "--variants", "baseline", "--datasets", SMALL,
              "--base-dir", str(same)]
    unchanged = _gnnperf(*common)
    assert unchanged.returncode == 0, unchanged.stdout + unchanged.stderr
    assert "work gate: passed" in unchanged.stdout and "CHANGED" not in unchanged.stdout

    summary = tmp_path / "summary.md"
    changed = _gnnperf(*common, "--head-dir", str(extra), "--markdown", str(summary))
    assert changed.returncode == 1, changed.stdout + changed.stderr
    assert "work gate: FAILED" in changed.stdout
    assert "aten.add" in changed.stdout  # names the operator that changed
    table = summary.read_text()
    assert "### gnnperf gate: FAILED" in table
    row = next(line for line in table.splitlines() if line.startswith(f"| baseline@{SMALL}"))
    assert "**changed**: aten_ops" in row and "`aten.add`" in row


def test_environment_arms_run_one_tree_under_two_interpreters(tmp_path):
    # Another venv would hold other releases; a wrapper stands in for it here.
    wrapper = tmp_path / "venv-b" / "bin" / "python"
    wrapper.parent.mkdir(parents=True)
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    wrapper.chmod(0o755)
    out = tmp_path / "env.json"
    result = _gnnperf("gate", "--no-time", "--variants", "baseline", "--datasets", SMALL,
                      "--base-python", str(wrapper), "--json", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    arms = json.loads(out.read_text())["arms"]
    assert arms["base"]["tree"] == arms["head"]["tree"] == str(ROOT)
    assert arms["base"]["interpreter"] == str(wrapper)
    assert arms["head"]["interpreter"] == sys.executable


@pytest.fixture(scope="module")
def installed_gnnperf(tmp_path_factory) -> Path:
    """gnnperf as pip installs it from its wheel: a site folder holding the
    package alone, no checkout, no benchmarks/."""
    tmp = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--no-build-isolation", "-w", str(tmp / "dist"), str(ROOT)], check=True)
    wheel = next((tmp / "dist").glob("gnnperf-*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--target", str(tmp / "site"), str(wheel)], check=True)
    return tmp / "site"


@pytest.mark.e2e
def test_environment_arms_run_a_pip_installed_gnnperf_from_anywhere(installed_gnnperf,
                                                                    tmp_path):
    wrapper = tmp_path / "venv-b" / "bin" / "python"
    wrapper.parent.mkdir(parents=True)
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    wrapper.chmod(0o755)
    cwd = tmp_path / "elsewhere"  # no checkout
    cwd.mkdir()
    out = tmp_path / "env.json"
    env = dict(os.environ, PYTHONPATH=str(installed_gnnperf))
    result = subprocess.run(
        [sys.executable, "-m", "gnnperf", "gate", "--no-time", "--variants", "baseline",
         "--datasets", SMALL, "--base-python", str(wrapper), "--json", str(out)],
        cwd=cwd, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    arms = json.loads(out.read_text())["arms"]
    assert arms["base"]["tree"] == arms["head"]["tree"] != str(ROOT)
    assert arms["base"]["interpreter"] == str(wrapper)
    import gnnperf
    import torch
    import torch_geometric
    for arm in ("base", "head"):  # each arm's versions, in the JSON and the text
        assert arms[arm]["gnnperf"] == gnnperf.__version__
        assert arms[arm]["torch"] == torch.__version__
        assert arms[arm]["torch_geometric"] == torch_geometric.__version__
    assert f"torch_geometric {torch_geometric.__version__}" in result.stdout
    assert f"gnnperf {gnnperf.__version__}" in result.stdout


def test_the_head_tree_is_the_gnnperf_checkout_you_stand_in_or_the_installed_one(
        tmp_path, monkeypatch):
    from gnnperf.gate.compare import default_head_dir
    other = tmp_path / "other-project"
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    (other / "gnnperf").mkdir()  # a folder of the same name, not gnnperf's checkout
    envs = ("a/bin/python", "b/bin/python")
    for where, expected in [(ROOT / "gnnperf" / "gate", str(ROOT)), (other, None),
                            (tmp_path, None)]:
        monkeypatch.chdir(where)
        assert default_head_dir(None, None, *envs) == expected, where
    from gnnperf.errors import GnnperfError
    with pytest.raises(GnnperfError, match="not inside a git checkout"):
        default_head_dir("HEAD~1", None, *envs)  # trees need git: one line


def _one_line_errors(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("gnnperf:")]


def test_gate_usage_errors_are_one_line(tmp_path, capsys):
    # In-process through main(): each is refused before any arm starts.
    for args, text in [(["--base", "no-such-ref-xyz"], "git archive no-such-ref-xyz failed"),
                       (["--base-python", str(tmp_path / "nope")], "interpreter"),
                       (["--processes", "2"], "--processes >= 3")]:
        code = main(["gate", "--no-time", "--variants", "baseline", "--head-dir", str(ROOT),
                     *args])
        errors = _one_line_errors(capsys)
        assert code == 2 and len(errors) == 1 and text in errors[0], errors


def test_gate_exports_a_git_ref(tmp_path):
    tree = gate.export_ref("HEAD", tmp_path / "base", ROOT)
    assert (tree / "gnnperf" / "variants" / "__init__.py").is_file()


# --------------------------------------------------------------------- decision rule
def _samples(effect: float, noise: float = 0.08, pairs: int = 3, rounds: int = 60,
             seed: int = 0) -> gate.TimeSamples:
    rng = random.Random(seed)
    a = [[0.01 * math.exp(rng.gauss(0, noise)) for _ in range(rounds)] for _ in range(pairs)]
    b = [[0.01 * (1 + effect) * math.exp(rng.gauss(0, noise)) for _ in range(rounds)]
         for _ in range(pairs)]
    return gate.TimeSamples("baseline@test", 1, "cpu", a, b)


# +2% against a 3% threshold on 3 pairs: its interval reaches past 1.03, so
# the pairs cannot rule out a regression; +1% stays inside.
@pytest.mark.parametrize("effect, verdict", [(0.0, "same"), (0.2, "REGRESSION"),
                                             (-0.2, "improvement"), (0.01, "same"),
                                             (0.02, "inconclusive")])
def test_decide(effect, verdict):
    v = gate.decide(_samples(effect), threshold=0.03, alpha=0.01)
    assert v.verdict == verdict
    assert v.ci_low <= v.ratio <= v.ci_high
    assert abs(v.ratio - (1 + effect)) < 0.03


def test_decide_needs_significance_as_well_as_size():
    # A big but hopelessly noisy difference is not a regression; nor is it
    # "same": its interval reaches past the threshold.
    v = gate.decide(_samples(0.1, noise=1.0, rounds=5), threshold=0.03, alpha=0.01)
    assert v.p_slower > 0.01 and v.verdict == "inconclusive"
    assert v.ci_high > 1.03


def test_one_slow_process_is_noise_not_a_regression():
    # Pair 3's head process runs 15% slow in every round (a process-level
    # offset such as memory layout): consistent rounds, but one replicate.
    samples = _samples(0.0, noise=0.05, pairs=3, rounds=60)
    samples.b[2] = [t * 1.15 for t in samples.b[2]]
    v = gate.decide(samples, threshold=0.03, alpha=0.01)
    assert v.ratio > 1.03 and v.verdict == "inconclusive" and v.p_slower >= 0.01


def test_judge_and_tables():
    assert gate.judge(1.06, 0.001, 0.999, 0.05, 0.01) == "REGRESSION"
    assert gate.judge(1.04, 0.001, 0.999, 0.05, 0.01) == "same"
    assert gate.judge(1.06, 0.02, 0.98, 0.05, 0.01) == "same"
    verdict = gate.decide(_samples(0.2), 0.03, 0.01)
    table = gate.format_time([verdict], 0.03, 0.01)
    assert "REGRESSION" in table and "ratio" in table and "spread" in table
    from dataclasses import asdict
    report = {"cases": ["baseline@test", "sampled@test"], "failed": True,
              "arms": {"base": "main", "head": "."},
              "settings": {"threshold": 0.03, "alpha": 0.01, "processes": 3, "rounds": 60,
                           "clock": "cpu"},
              "time": {"verdicts": [asdict(verdict)]}}
    md = gate.markdown(report).splitlines()
    row = next(line for line in md if line.startswith("| baseline@test"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[5] == "3" and cells[6] == "**REGRESSION**" and cells[7] == "off"
    assert float(cells[3].split()[0]) == pytest.approx(verdict.ratio, abs=1e-3)
    assert "not timed" in next(line for line in md if line.startswith("| sampled@test"))


def test_compare_work_reports_new_benchmarks():
    base = [None, {"exact": {"aten_ops": 1}, "op_counts": {"aten.add": 1}}]
    head = [{"exact": {"aten_ops": 1}, "op_counts": {}},
            {"exact": {"aten_ops": 2}, "op_counts": {"aten.add": 2}}]
    rows = gate.compare_work(["new@g", "old@g"], base, head)
    assert rows[0]["new"] and not rows[0]["same"]
    assert rows[1] == {"case": "old@g", "metric": "aten_ops", "base": 1, "head": 2,
                       "same": False}
    assert rows[2]["op_diff"] == {"aten.add": (1, 2)}
    table = gate.format_work(rows)
    assert "new" in table and "CHANGED" in table and "aten.add 1->2" in table


# --------------------------------------------------------------------- faults, sensitivity
def test_a_fault_touches_only_the_copy_and_one_variant(tmp_path):
    tree = gate.copy_tree(ROOT, tmp_path / "copy")
    original = (ROOT / faults.PATCHED_FILE).read_text()
    patch = faults.inject(tree, "slowdown", "baseline", 0.2)
    assert (ROOT / faults.PATCHED_FILE).read_text() == original
    assert (tree / faults.PATCHED_FILE).read_text() == original + patch
    probe = (
        "import torch\n"
        "from gnnperf.data import load_dataset\n"
        "from gnnperf.variants import get_variant, TrainConfig\n"
        f"data = load_dataset({SMALL!r}).graph\n"
        "runs = {v: get_variant(v).build(data, TrainConfig(), torch.device('cpu'))\n"
        "        for v in ('baseline', 'amp')}\n"
        "print(runs['baseline'].step.__name__, getattr(runs['amp'].step, '__name__', ''))\n")
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path,
                         env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["faulty_step", "step"]
    with pytest.raises(ValueError):
        faults.fault_patch("slowdown", "baseline", 0.0)


def test_a_busy_wait_fault_replaces_the_one_before_it(tmp_path):
    """tools/scratch_history.py's commits: each carries one busy-wait fault,
    its own size, the one before it cut off."""
    registry = tmp_path / faults.PATCHED_FILE
    registry.parent.mkdir(parents=True)
    original = (ROOT / faults.PATCHED_FILE).read_text()
    registry.write_text(original)
    assert not faults.remove(tmp_path)
    faults.inject(tmp_path, "busy-wait", None, 0.01, wait_us=165, note="commit 1")
    assert faults.remove(tmp_path) and registry.read_text() == original
    last = faults.inject(tmp_path, "busy-wait", None, 0.0, note="commit 2")
    assert registry.read_text() == original + last and "# commit 2\n" in last
    for bad in ({"amount": -0.01}, {"wait_us": -1.0}):
        with pytest.raises(ValueError):
            faults.fault_patch("busy-wait", **bad)
    with pytest.raises(ValueError):
        faults.fault_patch("slowdown", amount=0.1, wait_us=5.0)  # busy-wait's alone

    class Variant:  # what the patch wraps: a build whose run has a step
        name = "baseline"

        def build(self, data, config, device):
            return type("Run", (), {"step": staticmethod(lambda batch: batch)})()

    namespace = {"Variant": Variant}
    exec(faults.fault_patch("busy-wait", None, 0.0, wait_us=20_000), namespace)
    run = Variant().build(None, None, None)
    start = time.process_time()
    assert run.step(7) == 7
    assert time.process_time() - start >= 0.02  # the fixed part: CPU time, not a sleep


def test_sensitivity_rates():
    def trial(s, ratio, p):
        rec = {"ratio": ratio, "p_slower": p, "p_faster": 1 - p}
        return {"slowdown": s, "cpu": rec, "wall": rec}

    trials = ([trial(0.0, 1.01, 0.2)] * 8 + [trial(0.0, 1.04, 0.001), trial(0.0, 0.95, 0.999)]
              + [trial(0.05, 1.05, 0.001)] * 10 + [trial(0.2, 1.2, 0.001)] * 10)
    rows = evaluate(trials, [0.03, 0.045, 0.06], 0.01, clocks=("cpu",))
    assert rows[0][0.0] == (1, 10) and rows[1][0.0] == (0, 10)
    # An A/A comparison read as an improvement is a wrong verdict as well,
    # and a row with one has no clean size.
    assert rows[0]["aa_wrong"] == (2, 10) and rows[1]["aa_wrong"] == (1, 10)
    assert rows[1][0.05] == (10, 10)
    assert smallest_clean(rows[0]) is None and smallest_clean(rows[1]) is None
    assert rows[2]["aa_wrong"] == (0, 10) and smallest_clean(rows[2]) == 0.2
    table = format_table(trials, rows)
    assert "| cpu | 4.5% | 0.01 | 0/10 | 1/10 |" in table


def test_an_aa_only_study_times_only_the_aa_comparisons(monkeypatch):
    """``--aa-only``: the false-alarm half of a study, no injected copy."""
    from gnnperf.gate import sensitivity
    heads = []

    def fake_time_gate(arms, cases, options, states, log=None, started=None):
        heads.append(arms["head"].tree.name)
        a = [[0.01] * 5 for _ in range(6)]
        return [gate.TimeSamples(cases[0].name, 3, options.clock, a, a, a, a)]

    monkeypatch.setattr(sensitivity, "time_gate", fake_time_gate)
    monkeypatch.setattr(sensitivity, "calibrate", lambda arm, case: 0.01)
    settings = sensitivity.StudySettings(Case("baseline", "cora"), slowdowns=(), trials=3)
    study = sensitivity.run_study(settings, ROOT)
    assert heads == ["A2"] * 3 and {t["slowdown"] for t in study["trials"]} == {0.0}
    rows = evaluate(study["trials"], [0.03], 0.01, clocks=("cpu",))
    assert "| cpu | 3.0% | 0.01 | 0/3 | 0/3 | - |" in format_table(study["trials"], rows)


# --------------------------------------------------------------------- bisect
# The smallest history that still exercises the time search's confirmation:
# BAD (commit 2) against GOOD, the midpoint (commit 1, "same" against GOOD),
# then commit 2 against its parent: 3 gates, where 9 commits took 6. The work
# search on it takes the other branch (commit 1 differs from GOOD).
EXTRA_OP_AT, SLOWDOWN_AT, COMMITS = 1, 2, 2
#: The bound gnnperf.gate.bisection's docstring states: ceil(log2(n)) + 2
#: measurements for n commits after GOOD.
MAX_MEASUREMENTS = math.ceil(math.log2(COMMITS)) + 2


@pytest.fixture(scope="module")
def throwaway_repo(tmp_path_factory):
    """A copy of this tree as a repository: GOOD, then :data:`COMMITS`
    commits, the :data:`EXTRA_OP_AT`-th adding one tensor op per step, the
    :data:`SLOWDOWN_AT`-th making baseline's step 30% slower."""
    from standin import faulted_history
    repo, _ = faulted_history(tmp_path_factory.mktemp("bisect") / "repo",
                              {EXTRA_OP_AT: ("one more op per step", ("extra-op",)),
                               SLOWDOWN_AT: ("baseline 30% slower",
                                             ("slowdown", "baseline", 0.3))}, COMMITS)

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], check=True,
                              capture_output=True, text=True).stdout.strip()

    return repo, git


def test_bisect_by_a_work_metric_finds_the_extra_op(throwaway_repo):
    repo, git = throwaway_repo
    result = _gnnperf("bisect", f"HEAD~{COMMITS}", "HEAD", "--repo", str(repo),
                      "--case", f"baseline@{SMALL}", "--metric", "aten_ops")
    assert result.returncode == 0, result.stdout + result.stderr
    expected = git("rev-parse", f"HEAD~{COMMITS - EXTRA_OP_AT}")
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"first changed commit: {expected[:12]} commit {EXTRA_OP_AT}")
    before, after = (int(x.replace(",", "")) for x in lines[1].split(": ")[1].split(" -> "))
    assert after == before + 1
    runs = int(lines[2].split()[0])
    assert runs <= MAX_MEASUREMENTS == 3


@pytest.mark.e2e
def test_bisect_by_time_finds_the_slow_commit(throwaway_repo, monkeypatch):
    """The time search on the real history, each gate timed: the slow commit
    against its parent (GOOD here), then the confirmation. The search's
    halving over longer histories is the scripted test's below."""
    repo, git = throwaway_repo
    probed, probe = [], gate.arms.probe

    def counted(arm, names=()):
        probed.append(str(arm.tree))
        return probe(arm, names)
    monkeypatch.setattr(gate.arms, "probe", counted)
    case = Case("baseline", SMALL)
    # The gate's adaptive pairs (up to 6): with the other xdist worker busy on
    # the same two cores, 3 pairs' interval can stay wide on a 30% slowdown
    # (a fresh-folder README run read 1.28 unconfirmed at 3 pairs).
    options = gate.GateOptions(processes=3, max_processes=6, rounds=5, threshold=0.1, alpha=0.05)
    good = f"HEAD~{COMMITS - SLOWDOWN_AT + 1}"
    result = gate.bisect(good, "HEAD", case, "time", str(repo), options)
    assert result.commit == git("rev-parse", f"HEAD~{COMMITS - SLOWDOWN_AT}")
    assert result.confirmed and result.after > 1.15 * result.before
    # BAD against GOOD, then the confirmation of the same pair.
    assert [ratio > 1.15 for _, ratio in result.measurements] == [True, True], \
        result.measurements
    assert len(probed) == len(set(probed)) == 2  # each commit probed once


def test_the_time_search_halves_then_confirms_against_the_parent(throwaway_repo, monkeypatch):
    """The search's order of gates on a history where only the last commit is
    slow: BAD against GOOD, the midpoint against GOOD ("same"), the commit
    found against its parent. Scripted verdicts: the gate's own timing is
    the test above's and test_verdicts'."""
    repo, git = throwaway_repo
    chain = [git("rev-parse", f"HEAD~{n}") for n in range(COMMITS, -1, -1)]
    slow = {chain[SLOWDOWN_AT]}
    gates: list[tuple[str, str]] = []

    def scripted(options, arms, cases, log, probes):
        base, head = (str(arms[name].tree.name) for name in ("base", "head"))
        gates.append((base, head))
        regression = any(c[:12] == head for c in slow) and not any(c[:12] == base for c in slow)
        verdict = {"case": cases[0].name, "ratio": 1.3 if regression else 1.0,
                   "p_slower": 0.001 if regression else 0.5,
                   "verdict": "REGRESSION" if regression else "same",
                   "base_median_s": 1e-3, "head_median_s": 1.3e-3 if regression else 1e-3,
                   "pairs": 3}
        return type("Result", (), {"report": {"time": {"verdicts": [verdict]}}})()
    monkeypatch.setattr(gate.bisection, "compare_arms", scripted)
    monkeypatch.setattr(gate.arms, "probe", lambda arm, names=(): gate.ArmProbe(
        str(arm.tree), arm.tree.name, arm.tree.name, False, "3", sys.executable, "2", "2",
        ["baseline"], {name: name for name in names}))
    result = gate.bisect(chain[0], chain[-1], Case("baseline", SMALL), "time", str(repo))
    short = [c[:12] for c in chain]
    assert gates == [(short[0], short[2]), (short[0], short[1]), (short[1], short[2])], gates
    assert result.commit == chain[SLOWDOWN_AT] and result.confirmed
    assert len(result.measurements) == MAX_MEASUREMENTS == 3


def test_bisect_refuses_refs_in_the_wrong_order(throwaway_repo, capsys):
    repo, _ = throwaway_repo
    code = main(["bisect", "HEAD", f"HEAD~{COMMITS}", "--repo", str(repo)])
    errors = _one_line_errors(capsys)
    assert code == 2 and len(errors) == 1 and "is not an ancestor" in errors[0], errors


def test_the_work_gate_measures_each_case_before_building_the_next():
    # Building a case resets Dynamo: a compiled case prepared before another
    # one would recompile inside its own measurement (recompiles 1, not 0).
    # One work worker, as each arm of the gate runs it.
    pytest.importorskip("torch._inductor")
    work = gate.run_work({"head": gate.Arm(ROOT)},
                         [Case("compiled", SMALL), Case("baseline", SMALL)])["head"]
    compiled = work[0]
    assert compiled["variant"] == "compiled" and compiled["compiled_graphs"] >= 1
    assert compiled["recompiles"] == 0
    assert work[1]["variant"] == "baseline" and work[1]["exact"]["aten_ops"] > 0


def test_a_case_survives_its_json_round_trip():
    case = Case("sampled", "cora", (("batch_size", 64), ("fanout", (5, 5))), "cpu", 1, 2)
    assert Case.from_json(case.to_json()) == case
    hash(Case.from_json(case.to_json()))  # usable as a key


def test_sensitivity_usage_errors_are_one_line(tmp_path, capsys):
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{}")
    for args, text in [(["--processes", "2"], "--processes >= 3"),
                       (["--slowdowns", "0"], "--slowdowns must be > 0"),
                       (["--aa-only", "--slowdowns", "0.05"], "--aa-only takes no --slowdowns"),
                       (["--from-json", str(bad_json)], "not a study")]:
        code = main(["sensitivity", *args])
        errors = _one_line_errors(capsys)
        assert code == 2 and len(errors) == 1 and text in errors[0], errors


def test_a_case_names_its_model_unless_it_is_gcn():
    assert Case.parse("sampled@cora") == Case("sampled", "cora")
    sage = Case.parse("sampled@cora@sage")
    assert sage.model == "sage" and sage.config == (("model", "sage"),)
    assert sage.name == "sampled@cora@sage" and Case.parse(sage.name) == sage
    assert Case.from_json(sage.to_json()) == sage
    assert Case.parse("baseline@cora@gcn").name == "baseline@cora"
    assert Case.parse("sampled@cora@GAT") == Case.parse("sampled@cora@gat")  # one spelling
    # A graph file's path may hold an @: the last part is a model only if it reads as one.
    assert Case.parse("baseline@/data/run@2/graph.pt").dataset == "/data/run@2/graph.pt"
    mine = Case.parse("baseline@/data/run@2/graph.pt@mypkg.models:build")
    assert (mine.dataset, mine.model) == ("/data/run@2/graph.pt", "mypkg.models:build")
    with pytest.raises(ValueError, match="variant@dataset@model"):
        Case.parse("baseline@")
    for typo in ("baseline@cora@sgae", "baseline@cora@"):  # not silently a dataset 'cora@sgae'
        with pytest.raises(ValueError, match="is neither a model"):
            Case.parse(typo)


def test_gate_and_bisect_refuse_a_variant_its_model_cannot_run(capsys):
    # (A named variant that runs with one of the models asked for gets the
    # others left out, not an error.)
    for args in (["gate", "--variants", "sparse", "--models", "gat", "--no-time"],
                 ["bisect", "HEAD~1", "HEAD", "--case", "sparse@cora@gat"]):
        assert main(args) == 2
        error, = _one_line_errors(capsys)
        assert "sparse cannot run with model gat" in error and "runs with gcn, sage, gin" in error


def test_default_cases_cross_every_model():
    from gnnperf.measure.case import default_cases
    cases = default_cases(["baseline", "sparse"], ("cora",), ("gcn", "gin"))
    assert [c.name for c in cases] == ["baseline@cora", "sparse@cora", "baseline@cora@gin",
                                       "sparse@cora@gin"]


def test_a_tree_without_the_model_has_the_case_absent(monkeypatch):
    # A base from before the model axis (gnnperf.models without get_model),
    # or one without this model, has a sage case absent (new), not failed.
    import types

    from gnnperf.gate import worker
    assert worker._missing_model(None) is None and worker._missing_model("sage") is None
    assert worker._missing_model("gan").startswith("unknown model 'gan'")
    monkeypatch.setitem(sys.modules, "gnnperf.models", types.ModuleType("gnnperf.models"))
    assert worker._missing_model("sage") == "this tree has no model registry (model sage)"


# ------------------------------------------------------------ independent process pairs
def test_each_process_pair_starts_from_its_own_layout():
    """The t-test takes process pairs as independent replicates. Workers
    forked from one server share its address layout, heap and hash seed, so
    a layout's effect on one arm is the same in every pair and reads as a
    real difference (A/A false alarms). Timing on the default path (warm
    workers), every pair's workers must report a layout of their own: the
    guard fails when pairs stop being independent by construction."""
    aslr = Path("/proc/sys/kernel/randomize_va_space")
    if aslr.is_file() and aslr.read_text().strip() == "0":
        pytest.skip("address-space layout randomisation is off on this machine")
    layouts: list[dict] = []
    arms = {"base": gate.Arm(ROOT), "head": gate.Arm(ROOT)}
    case = Case("baseline", SMALL)
    _, times = gate.run_arms(arms, [case], processes=2, rounds=3, sample_ms=2.0,
                             layouts=layouts)
    assert len(layouts) == 2 and all(len(t) == 3 for t in times[case.name]["base"]["cpu"])
    for arm in arms:
        for key in ("heap", "mmap", "hash"):
            seen = [pair[arm][key] for pair in layouts]
            assert len(set(seen)) == len(seen), (arm, key, seen)


def test_the_sensitivity_study_times_with_the_gates_own_code_path(monkeypatch):
    """A calibration measures the gate users run: each comparison of a trial
    is one call of the gate's own timing (its pairs, layouts, arm order and
    adaptive extra pairs) with the gate's default options."""
    from gnnperf.gate import sensitivity
    from gnnperf.gate.compare import GateOptions
    calls = []

    def fake_time_gate(arms, cases, options, states, log=None, started=None):
        calls.append((arms, cases, options))
        slow = 1.05 if "B50" in str(arms["head"].tree) else 1.0
        rng = random.Random(len(calls))
        a = [[0.01 * math.exp(rng.gauss(0, 0.01)) for _ in range(5)] for _ in range(6)]
        b = [[t * slow for t in rounds] for rounds in a]
        return [gate.TimeSamples(cases[0].name, 3, options.clock, a, b, a, b)]

    monkeypatch.setattr(sensitivity, "time_gate", fake_time_gate)
    monkeypatch.setattr(sensitivity, "calibrate", lambda arm, case: 0.01)
    settings = sensitivity.StudySettings(Case("baseline", "cora"), slowdowns=(0.05,), trials=2,
                                         scratch="copy-input")
    study = sensitivity.run_study(settings, ROOT)
    assert len(calls) == 4 and len(study["trials"]) == 4  # (A/A, +5%) x 2 trials
    defaults = GateOptions()
    for arms, cases, options in calls:
        assert set(arms) == {"base", "head"} and arms["base"].tree != arms["head"].tree
        for name in ("processes", "rounds", "sample_ms", "threshold", "alpha", "clock",
                     "pin_cpus", "budget"):
            assert getattr(options, name) == getattr(defaults, name), name
    by_slowdown = {t["slowdown"]: t for t in study["trials"]}
    assert by_slowdown[0.0]["cpu"]["ratio"] == pytest.approx(1.0)
    assert by_slowdown[0.05]["cpu"]["ratio"] == pytest.approx(1.05)
    assert study["settings"]["scratch"] == "copy-input"


def test_bisect_help_names_every_metric_it_accepts(capsys):
    from gnnperf.gate.bisection import METRICS
    with pytest.raises(SystemExit):
        main(["bisect", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    for metric in METRICS:
        assert metric in help_text
