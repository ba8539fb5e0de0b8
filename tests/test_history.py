"""``gnnperf history``: change points across asv's results, on known
synthetic series and a hand-made asv results folder; the gaps a failed
benchmark leaves; and ``--confirm``, the gate at an alert's commit, on a
scratch git repository of gnnperf with an injected extra op."""
from __future__ import annotations

import hashlib
import json
import subprocess

import numpy as np
import pytest
import scipy.stats  # noqa: F401

# The detector's library (an extra: test, bench) loads at collection, once
# (about a second on a busy 2-core machine), not inside whichever test
# happens to run first; without it the module skips with its install line.
pytest.importorskip("ruptures", reason="pip install ruptures (gnnperf's bench extra)")

from gnnperf import history
from gnnperf.cli import main
from gnnperf.errors import GnnperfError
from gnnperf.history import HistoryTooShort, find_changes, read_asv_results

NOISE = 0.01  # 1% normal noise: a quiet runner's spread of one asv value


def _noise(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(1.0, NOISE, n)


def test_a_step_is_one_change_at_its_commit_with_its_size():
    values = _noise(40) * np.r_[np.ones(20), np.full(20, 1.08)]
    changes = find_changes(list(values))
    assert len(changes) == 1
    change = changes[0]
    assert change.start == change.end == 20
    assert change.ci_low < 1.08 < change.ci_high
    assert change.ci_low > 1.05 and change.direction == 1


def test_a_ramp_of_ten_one_percent_commits_is_one_change():
    ramp = 1.01 ** np.arange(1, 11)
    values = _noise(40, seed=1) * np.r_[np.ones(15), ramp, np.full(15, ramp[-1])]
    changes = find_changes(list(values))
    assert len(changes) == 1, [(c.start, c.end, c.ratio) for c in changes]
    change = changes[0]
    assert 15 <= change.start <= change.end <= 25
    assert 1.07 < change.ratio < 1.13  # the drift's whole size, not one step of it


def test_a_single_spike_is_not_a_change():
    values = _noise(40, seed=2)
    values[20] *= 3.0  # one preempted run
    values[31] *= 0.6
    assert find_changes(list(values)) == []


def test_an_improvement_is_a_change_but_not_a_regression():
    values = _noise(30, seed=3) * np.r_[np.ones(15), np.full(15, 0.9)]
    changes = find_changes(list(values))
    assert [c.direction for c in changes] == [-1]


def test_too_short_a_history_says_so():
    with pytest.raises(HistoryTooShort, match="needs at least"):
        find_changes([1.0, 1.1, 1.0, 1.2])


@pytest.mark.parametrize("bad", [0.0, -3.0, float("nan")])
def test_a_figure_with_no_log_is_not_judged(bad):
    # A change is a ratio: a percentage that reaches 0 or below (GPU idle,
    # headroom) is named, not a traceback or a nonsense interval.
    values = [10.0] * 12
    values[5] = bad
    with pytest.raises(history.NotJudged, match="not positive finite"):
        find_changes(values)


# ------------------------------------------------------ an asv results folder

BENCH = "training.TrainStep.time_train_step"
WORK = "work_metrics.WorkMetrics.track_aten_ops"
RELATIVE = "training.TrainStepOverReference.track_step_over_reference"
TIME = ["--bench", r"\.time_"]
COLUMNS = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a",
           "stats_ci_99_b", "stats_q_25", "stats_q_75", "stats_number", "stats_repeat",
           "samples", "profile"]


def _write_results(root, commits: list[str], baseline: list[float], sampled: list[float],
                   aten: list[int], dates: list[int] | None = None, machine: str = "ci",
                   relative: list[float] | None = None) -> None:
    """asv's results folder as asv 0.6 writes it: benchmarks.json, one
    machine folder with machine.json and one file per commit; with
    :obj:`relative`, baseline@cora's step over the reference too (``None``
    where it failed: asv writes null, NaN being its n/a)."""
    params = [["'cora'"], ["'baseline'", "'sampled'"], ["'gcn'"]]
    root.mkdir(parents=True, exist_ok=True)
    benchmarks = {
        BENCH: {"name": BENCH, "param_names": ["dataset", "variant", "model"], "params": params,
                "type": "time", "unit": "seconds", "version": "v1"},
        WORK: {"name": WORK, "param_names": ["dataset", "variant"], "params": params[:2],
               "type": "track", "unit": "unit", "version": "w1"},
        "version": 2}
    if relative is not None:
        benchmarks[RELATIVE] = {"name": RELATIVE, "param_names": ["dataset", "variant"],
                                "params": [["'cora'"], ["'baseline'"]], "type": "track",
                                "unit": "ratio", "version": "3"}
    (root / "benchmarks.json").write_text(json.dumps(benchmarks))
    folder = root / machine
    folder.mkdir(parents=True)
    (folder / "machine.json").write_text(json.dumps({"machine": machine, "version": 1}))
    for i, commit in enumerate(commits):
        date = (dates or [1_700_000_000_000 + 86_400_000 * k for k in range(len(commits))])[i]
        time_row = [[baseline[i], sampled[i]], params, "v1", date, 1.0,
                    [baseline[i] * 0.99, sampled[i] * 0.99],
                    [baseline[i] * 1.01, sampled[i] * 1.01],
                    None, None, [1, 1], [30, 30]]
        work_row = [[aten[i], 97], params[:2], "w1", date, 0.3]
        rows = {BENCH: time_row, WORK: work_row}
        if relative is not None:
            # asv compresses a row whose every combination failed to a null result.
            result = None if relative[i] is None else [relative[i]]
            rows[RELATIVE] = [result, [["'cora'"], ["'baseline'"]], "3", date, 5.0]
        (folder / f"{commit[-8:]}-env.json").write_text(json.dumps({
            "commit_hash": commit, "env_name": "env", "date": date, "params": {"machine": machine},
            "python": "3.11", "requirements": {}, "env_vars": {}, "result_columns": COLUMNS,
            "results": rows, "durations": {}, "version": 2}))


def _commits(n: int) -> list[str]:
    return [hashlib.sha1(str(k).encode()).hexdigest() for k in range(n)]


def _stepped(n: int = 24, at: int = 12, size: float = 1.10) -> tuple[list[float], list[float]]:
    base = _noise(n, seed=5) * 0.027
    baseline = [float(v * (size if i >= at else 1.0)) for i, v in enumerate(base)]
    sampled = [float(v) for v in _noise(n, seed=6) * 0.008]  # unchanged
    return baseline, sampled


def test_reader_makes_a_series_per_parameter_combination(tmp_path):
    commits = _commits(10)
    baseline, sampled = _stepped(10)
    sampled[3] = float("nan")  # n/a at that commit (asv's NaN): no point, not a zero
    _write_results(tmp_path, commits, baseline, sampled, [98] * 10)
    results = read_asv_results(tmp_path, repo=None)
    assert results.machine == "ci" and results.order == "date"
    by_name = {s.name: s for s in results.series}
    series = by_name[f"{BENCH}('cora', 'baseline', 'gcn')"]
    assert series.params == {"dataset": "'cora'", "variant": "'baseline'", "model": "'gcn'"}
    assert series.values == pytest.approx(baseline)
    assert series.weights[0] == pytest.approx(2 / (baseline[0] * 0.02))
    assert len(by_name[f"{BENCH}('cora', 'sampled', 'gcn')"].values) == 9
    assert by_name[f"{WORK}('cora', 'baseline')"].exact


def test_reader_follows_git_order_over_dates(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    commits = []
    for k in range(3):
        date = f"2020-01-0{k + 1}T00:00:00"
        subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", str(k), f"--date={date}"],
                       check=True, env={"GIT_COMMITTER_DATE": date, "PATH": "/usr/bin:/bin"})
        commits.append(subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True,
                                      text=True, check=True).stdout.strip())
    results_dir = tmp_path / "results"
    # The results' dates say the opposite order: the repository wins.
    _write_results(results_dir, commits, [1.0, 2.0, 3.0], [1.0] * 3, [98] * 3,
                   dates=[3_000, 2_000, 1_000])
    results = read_asv_results(results_dir, repo=repo)
    assert results.order == "git" and results.commits == commits
    assert read_asv_results(results_dir, repo=None).commits == commits[::-1]


def test_reader_refuses_what_is_not_a_results_folder(tmp_path):
    with pytest.raises(GnnperfError, match="no such folder"):
        read_asv_results(tmp_path / "absent")
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.json").write_text("{}")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "x.json").write_text("{}")
    with pytest.raises(GnnperfError, match="name one with --machine"):
        read_asv_results(tmp_path)


def test_reader_gives_each_combination_its_value_a_failure_and_an_na(tmp_path):
    """The rows every reader of asv's results goes through: the product of
    the parameters in asv's order, a row that failed whole stored as one
    null, NaN an n/a; the files of a commit on any machine; the commits a
    folder measured, an unreadable file measuring nothing."""
    from gnnperf.history import asv_results
    params = [["'cora'"], ["'baseline'", "'sampled'"], ["'gcn'", "'gat'"]]
    row = {"result": [1.0, float("nan"), 3.0], "params": params}
    combos = asv_results.combinations(row)
    assert [c for c, _ in combos] == [("'cora'", "'baseline'", "'gcn'"),
                                      ("'cora'", "'baseline'", "'gat'"),
                                      ("'cora'", "'sampled'", "'gcn'")]  # past the values: none
    assert combos[0][1] == 1.0 and combos[1][1] != combos[1][1] and combos[2][1] == 3.0
    assert [v for _, v in asv_results.combinations({"result": None, "params": params})] == \
        [None] * 4
    assert asv_results.combinations({"result": 5, "params": params}) == []
    commits = _commits(3)
    _write_results(tmp_path, commits, [1.0] * 3, [2.0] * 3, [98] * 3)
    # asv names a result file by the commit's first 8 characters.
    (tmp_path / "ci" / f"{commits[1][-8:]}-env.json").rename(
        tmp_path / "ci" / f"{commits[1][:8]}-env.json")
    [found] = asv_results.commit_files(tmp_path, commits[1])
    assert found.commit == commits[1] and found.env == "env" and BENCH in found.rows
    assert found.rows[BENCH]["stats_ci_99_a"] == [0.99, 1.98]
    assert asv_results.machine_name(tmp_path / "ci") == "ci"
    (tmp_path / "ci" / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (tmp_path / "ci" / "cut.json").write_text('{"commit_hash": ')
    assert asv_results.measured_commits(tmp_path / "ci") == set(commits)
    with pytest.raises(GnnperfError, match="cut.json: not JSON"):
        asv_results.result_files(tmp_path / "ci")
    with pytest.raises(GnnperfError, match="no machine name"):
        asv_results.machine_name(tmp_path)


def test_history_command_names_the_commit_the_size_and_the_work_metric(tmp_path, capsys):
    commits = _commits(24)
    baseline, sampled = _stepped(24, at=12)
    aten = [98] * 12 + [104] * 12  # the step's cause: six more ATen calls per step
    _write_results(tmp_path, commits, baseline, sampled, aten)
    out_json, out_md = tmp_path / "h.json", tmp_path / "h.md"
    code = main(["history", "--results", str(tmp_path), "--repo", str(tmp_path), *TIME,
                 "--json", str(out_json), "--markdown", str(out_md)])
    text = capsys.readouterr().out
    assert code == 1, text
    assert f"REGRESSION at {commits[12][:10]}" in text
    doc = json.loads(out_json.read_text())
    assert doc["regressions"] == 1
    [change] = doc["changes"]
    assert change["commit"] == commits[12] and change["fails"]
    [moved] = change["series"]
    assert moved["name"] == f"{BENCH}('cora', 'baseline', 'gcn')"
    assert moved["ci_low"] < 1.10 < moved["ci_high"]
    assert change["work"] == [{"name": f"{WORK}('cora', 'baseline')", "before": 98,
                               "after": 104, "commit": commits[12]}]
    markdown = out_md.read_text()
    assert "**REGRESSION**" in markdown and f"`{WORK}('cora', 'baseline')` 98&rarr;104" in markdown


def test_history_command_passes_a_flat_history_and_an_old_regression_with_recent(tmp_path, capsys):
    commits = _commits(24)
    baseline, sampled = _stepped(24, at=6)
    _write_results(tmp_path, commits, baseline, sampled, [98] * 24)
    # The step is 18 commits back: reported, but outside --recent 10.
    assert main(["history", "--results", str(tmp_path), "--repo", str(tmp_path), *TIME,
                 "--recent", "10"]) == 0
    assert "regression at" in capsys.readouterr().out
    assert main(["history", "--results", str(tmp_path), "--repo", str(tmp_path),
                 "--bench", "sampled"]) == 0
    assert "no regression past +3%" in capsys.readouterr().out


def test_history_command_exit_2_with_one_line_on_bad_input(tmp_path, capsys):
    assert main(["history", "--results", str(tmp_path / "absent")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no such folder" in err
    commits = _commits(5)
    _write_results(tmp_path, commits, [0.027] * 5, [0.008] * 5, [98] * 5)
    assert main(["history", "--results", str(tmp_path), "--repo", str(tmp_path), *TIME]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "history too short" in err and "5 commits" in err
    assert main(["history", "--results", str(tmp_path), "--bench", "nothing-like-this"]) == 2
    assert "matches no series" in capsys.readouterr().err


def test_history_judges_the_step_over_the_reference_by_default(tmp_path, capsys):
    """By default the history figure is judged, not the raw step times: a
    raw series that jumps 10% while the same commits' step over the
    reference stays flat (the machine got slower, the code did not) is no
    regression; a results folder without the figure is exit 2 with one line
    naming --bench '\\.time_'."""
    commits = _commits(24)
    baseline, sampled = _stepped(24, at=12)
    flat = [float(v) for v in _noise(24, seed=7) * 1.85]
    _write_results(tmp_path / "both", commits, baseline, sampled, [98] * 24, relative=flat)
    assert main(["history", "--results", str(tmp_path / "both"), "--repo", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "track_step_over_reference" in out and "no regression past +3%" in out
    _write_results(tmp_path / "raw", commits, baseline, sampled, [98] * 24)
    assert main(["history", "--results", str(tmp_path / "raw"), "--repo", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--bench '\\.time_'" in err


def _history_study():
    from tool_script import load_tool
    return load_tool("history_study")


def test_the_study_injects_what_it_says_and_scores_it():
    import random
    study = _history_study()
    pool = [{"result": 1.0, "ci_99_a": 0.99, "ci_99_b": 1.01}]
    values, weights, start, end = study.compose(pool, 60, "10 x +1% ramp", random.Random(0))
    assert end == start + 9
    assert values[start - 1] == 1.0 and values[start] == pytest.approx(1.01)
    assert values[end] == values[-1] == pytest.approx(1.01 ** 10)
    assert weights[end] == pytest.approx(2 / (0.02 * 1.01 ** 10))
    assert study.compose(pool, 60, "A/A", random.Random(0))[0] == [1.0] * 60
    # A track figure's pool (the step over the reference): values without an
    # interval, weighted as asv weights them, not at all.
    track = [{"result": 2.0, "ci_99_a": None, "ci_99_b": None}]
    track_values, track_weights, step_at, _ = study.compose(track, 60, "+5% step",
                                                           random.Random(0))
    assert track_weights == [None] * 60 and track_values[step_at] == pytest.approx(2.1)
    assert track_values[step_at - 1] == 2.0
    assert study.shrink(track * 2, 0.5) == track * 2
    ramp = history.Change(start + 1, end - 1, 1.1, 1.08, 1.12, 0.0, 1.0, 1.1)
    elsewhere = history.Change(5, 5, 1.05, 1.02, 1.08, 0.0, 1.0, 1.05)
    assert study.score([ramp, elsewhere], start, end, 2, 0.03) == (True, True, True, 1, 1, 1)


def test_the_study_reads_several_pools_of_a_case_in_the_order_given(tmp_path):
    study = _history_study()
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps({"cases": {"baseline@cora": [{"result": 1.0}, {"result": 1.1}],
                                           "sampled@cora": [{"result": 0.5}]}}))
    second.write_text(json.dumps({"cases": {"baseline@cora": [{"result": 1.2}]}}))
    pools = study.read_pools([second, first])
    assert [v["result"] for v in pools["cases"]["baseline@cora"]] == [1.2, 1.0, 1.1]
    assert [v["result"] for v in pools["cases"]["sampled@cora"]] == [0.5]
    raw = tmp_path / "raw.json"
    raw.write_text(json.dumps({"figure": "raw", "cases": {"baseline@cora": [{"result": 0.02}]}}))
    first.write_text(json.dumps({"figure": "relative", "cases": {}}))
    with pytest.raises(SystemExit, match="another figure or machine"):
        study.read_pools([first, raw])


# ------------------------------------------------- inconclusive rises and gaps

def _noisy_rise() -> list[float]:
    """A figure flat at 1% noise, then five values jumping between +60% and
    -5%: the detector marks a rise at the last three, whose own 95%
    interval reaches far below no change (a noisy raw history's alert)."""
    flat = [float(v) for v in _noise(19, seed=8) * 1.85]
    return flat + [1.85 * x for x in (1.6, 1.0, 1.7, 0.95, 1.65)]


def test_a_rise_whose_interval_reaches_no_change_is_inconclusive_and_does_not_fail(
        tmp_path, capsys):
    figure = _noisy_rise()
    commits = _commits(len(figure))
    baseline, sampled = _stepped(len(figure), at=len(figure))
    _write_results(tmp_path, commits, baseline, sampled, [98] * len(figure), relative=figure)
    out_json = tmp_path / "h.json"
    code = main(["history", "--results", str(tmp_path), "--repo", str(tmp_path),
                 "--json", str(out_json)])
    text = capsys.readouterr().out
    [change] = json.loads(out_json.read_text())["changes"]
    [moved] = change["series"]
    assert moved["ratio"] > 1.03 and moved["ci_low"] < 1 < moved["ci_high"]  # a rise, unsure
    assert code == 0, text
    assert "inconclusive at" in text and "REGRESSION" not in text
    assert "its 95% interval reaches no change" in text
    assert change["verdict"] == "inconclusive" and not change["fails"]


def test_a_failed_figure_is_a_gap_and_fails_while_it_is_the_newest(tmp_path, capsys):
    """asv records a failure (the figure's environment guard, a crash) as
    null: a gap the history names with the commits, not a missing point it
    skips in silence; failing at the newest commits, it fails the history."""
    figure: list = [float(v) for v in _noise(24, seed=7) * 1.85]
    figure[10] = figure[11] = None  # failed, then fixed
    commits = _commits(24)
    baseline, sampled = _stepped(24, at=24)
    _write_results(tmp_path / "past", commits, baseline, sampled, [98] * 24, relative=figure)
    assert main(["history", "--results", str(tmp_path / "past"), "--repo", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert (f"gap: {RELATIVE}('cora', 'baseline'): asv recorded a failure at "
            f"{commits[10][:10]} (commit 11 of 24), {commits[11][:10]} (commit 12 of 24)") in text
    assert "environment guard" in text and "no regression past +3%" in text
    figure[21:] = [None] * 3  # failing since commit 22: nothing says the newest are fine
    _write_results(tmp_path / "now", commits, baseline, sampled, [98] * 24, relative=figure)
    out_json = tmp_path / "h.json"
    assert main(["history", "--results", str(tmp_path / "now"), "--repo", str(tmp_path),
                 "--json", str(out_json)]) == 1
    text = capsys.readouterr().out
    assert f"FAILED: {RELATIVE}('cora', 'baseline') has no value at its newest commits" in text
    assert "1 series failing at its newest commits" in text
    [gap] = json.loads(out_json.read_text())["gaps"]
    assert gap["current"] and gap["failed"] == [commits[i] for i in (10, 11, 21, 22, 23)]


# ------------------------------------------------------------------- --confirm
# A scratch git repository of this checkout: GOOD, then commits, the
# EXTRA_OP_AT-th adding one tensor op to every training step
# (gnnperf.gate.faults): the work gate sees it whatever the machine's load.
SCRATCH_COMMITS, EXTRA_OP_AT = 9, 5


@pytest.fixture(scope="module")
def scratch_repo(tmp_path_factory):
    from standin import faulted_history
    return faulted_history(tmp_path_factory.mktemp("history") / "repo",
                           {EXTRA_OP_AT: ("one more op per step", ("extra-op",))},
                           SCRATCH_COMMITS)


def _scratch_results(root, commits: list[str], step_at: int | None):
    """asv results of :obj:`commits`: the history figure +10% from
    :obj:`step_at` on (with one more ATen call a step), or flat (None)."""
    n = len(commits)
    at = n if step_at is None else step_at
    figure = [float(v) * (1.10 if i >= at else 1.0) for i, v in
              enumerate(_noise(n, seed=9) * 1.85)]
    baseline, sampled = _stepped(n, at=n)
    _write_results(root, commits, baseline, sampled, [98] * at + [99] * (n - at),
                   relative=figure)
    return root


@pytest.mark.e2e
def test_confirm_names_the_culprit_the_gates_reading_the_ops_and_the_command(
        scratch_repo, tmp_path, capsys):
    """A real injected step, confirmed by the gate at its commit against
    its parent (baseline@cora, 3 pairs of 5 rounds, no adaptive pairs): the
    work gate sees the extra op whatever the time gate reads."""
    repo, commits = scratch_repo
    results = _scratch_results(tmp_path / "results", commits, EXTRA_OP_AT)
    out_md, out_json = tmp_path / "issue.md", tmp_path / "h.json"
    code = main(["history", "--results", str(results), "--repo", str(repo), "--confirm",
                 "--processes", "3", "--max-processes", "3", "--rounds", "5",
                 "--markdown", str(out_md), "--json", str(out_json)])
    text = capsys.readouterr().out
    culprit, parent = commits[EXTRA_OP_AT], commits[EXTRA_OP_AT - 1]
    assert code == 1, text
    assert f"REGRESSION at {culprit[:10]}" in text
    assert (f'confirmed by the gate at {culprit[:10]} "commit {EXTRA_OP_AT}: one more op per '
            f'step" against {parent[:10]}') in text
    assert "baseline@cora: time ratio" in text
    assert "work metrics changed: aten_ops" in text and "ATen ops changed: aten.add" in text
    assert "the work gate: the step's work changed)" in text  # the time gate may add its own
    assert (f"reproduce: git -C {repo} worktree add --detach /tmp/gnnperf-{culprit[:10]} "
            f"{culprit} && gnnperf gate --base {parent} --head-dir /tmp/gnnperf-{culprit[:10]} "
            f"--variants baseline --datasets cora --processes 3 --max-processes 3 --rounds 5 "
            f"--threshold 0.03") in text
    issue = out_md.read_text()
    assert issue.index("### Confirmed regression") < issue.index("| commit | verdict")
    assert f"* **Culprit**: `{culprit}` commit {EXTRA_OP_AT}: one more op per step" in issue
    assert "* **Gate** `baseline@cora`: time ratio" in issue and "95% interval [" in issue
    assert "* **ATen ops changed**: `aten.add`" in issue
    assert f"gnnperf gate --base {parent} --head-dir" in issue
    [change] = json.loads(out_json.read_text())["changes"]
    confirmation = change["confirmation"]
    assert change["fails"] and confirmation["state"] == "confirmed"
    assert confirmation["culprit"] == culprit and confirmation["base"] == parent
    [reading] = confirmation["cases"]
    assert reading["case"] == "baseline@cora" and reading["ratio"] > 0 and reading["ops"]


def test_confirm_on_an_aa_history_has_nothing_to_confirm(scratch_repo, tmp_path, capsys,
                                                         monkeypatch):
    from gnnperf.gate import compare
    repo, commits = scratch_repo
    monkeypatch.setattr(compare, "run_gate", lambda *a, **k: pytest.fail("the gate ran"))
    results = _scratch_results(tmp_path / "results", commits, None)
    out_md = tmp_path / "issue.md"
    assert main(["history", "--results", str(results), "--repo", str(repo), "--confirm",
                 "--processes", "3", "--rounds", "5", "--markdown", str(out_md)]) == 0
    captured = capsys.readouterr()
    assert "nothing to confirm" in captured.err and "no regression past +3%" in captured.out
    assert "No alert was confirmed by the gate" not in out_md.read_text()  # none to confirm


def _gate_report(case: str, verdict: str, ratio: float, ops: dict | None = None) -> dict:
    """What run_gate reports for one case: its time verdict and work rows."""
    rows = [{"case": case, "metric": "aten_ops", "base": 98, "head": 98 + bool(ops),
             "same": not ops}]
    if ops:
        rows.append({"case": case, "metric": "op_counts", "base": None, "head": None,
                     "same": False, "op_diff": ops})
    return {"work": {"rows": rows}, "time": {"verdicts": [{
        "case": case, "ratio": ratio, "ci_low": ratio - 0.02, "ci_high": ratio + 0.02,
        "p_slower": 0.001 if verdict == "REGRESSION" else 0.4, "verdict": verdict,
        "pairs": 3}]}}


def test_an_alert_the_gate_does_not_see_is_unconfirmed_and_does_not_fail(
        scratch_repo, tmp_path, capsys, monkeypatch):
    """Scripted gate (the real one is the test above's): an A/A reading at
    the alert's commit clears it; a gate that cannot run leaves it failing."""
    from gnnperf.gate import compare
    from gnnperf.gate.compare import GateResult
    repo, commits = scratch_repo
    gates = []

    def same(options, log=None):
        gates.append((options.base, options.cases[0].name))
        return GateResult(False, "", _gate_report("baseline@cora", "same", 1.004))
    monkeypatch.setattr(compare, "run_gate", same)
    results = _scratch_results(tmp_path / "results", commits, EXTRA_OP_AT)
    out_md = tmp_path / "issue.md"
    assert main(["history", "--results", str(results), "--repo", str(repo), "--confirm",
                 "--processes", "3", "--rounds", "5", "--markdown", str(out_md)]) == 0
    text = capsys.readouterr().out
    assert gates == [(commits[EXTRA_OP_AT - 1], "baseline@cora")]
    assert f"unconfirmed at {commits[EXTRA_OP_AT][:10]}" in text
    assert "unconfirmed by the gate" in text and "does not see it" in text
    assert "no regression past +3%" in text
    assert "No alert was confirmed by the gate." in out_md.read_text()

    def broken(options, log=None):
        raise GnnperfError("no benchmark was measured in both arms")
    monkeypatch.setattr(compare, "run_gate", broken)
    assert main(["history", "--results", str(results), "--repo", str(repo), "--confirm",
                 "--processes", "3", "--rounds", "5"]) == 1
    text = capsys.readouterr().out
    assert f"REGRESSION at {commits[EXTRA_OP_AT][:10]}" in text
    assert "not checked by the gate" in text and "could not check it" in text


def test_a_change_over_several_commits_is_bisected_then_gated_at_the_culprit(
        scratch_repo, tmp_path, capsys, monkeypatch):
    """asv skipped the commit before the step: the gate across the two
    commits confirms it, bisect by the work metric that moved finds the
    commit, and the gate against its parent is the reading reported."""
    from gnnperf.gate import bisection, compare
    from gnnperf.gate.compare import GateResult
    repo, commits = scratch_repo
    culprit, parent = commits[EXTRA_OP_AT], commits[EXTRA_OP_AT - 1]
    gates, searches = [], []

    def gate(options, log=None):
        gates.append(options.base)
        return GateResult(True, "", _gate_report("baseline@cora", "same", 1.001,
                                                 {"aten.add": (2, 3)}))

    def bisect(good, bad, case, metric, repo_, options, log):
        searches.append((good, bad, case.name, metric))
        return bisection.BisectResult(culprit, "commit 5", metric, 98, 99, True)
    monkeypatch.setattr(compare, "run_gate", gate)
    monkeypatch.setattr(bisection, "bisect", bisect)
    shown = [c for i, c in enumerate(commits) if i != EXTRA_OP_AT - 1]
    results = _scratch_results(tmp_path / "results", shown, EXTRA_OP_AT - 1)
    assert main(["history", "--results", str(results), "--repo", str(repo), "--confirm",
                 "--processes", "3", "--rounds", "5"]) == 1
    text = capsys.readouterr().out
    before = commits[EXTRA_OP_AT - 2]
    assert gates == [before, parent]  # across the span, then the culprit against its parent
    assert searches == [(before, culprit, "baseline@cora", "aten_ops")]
    assert f"confirmed by the gate at {culprit[:10]}" in text
    assert (f"found by: gnnperf bisect {before} {culprit} --repo {repo} --case baseline@cora "
            f"--metric aten_ops --processes 3 --rounds 5") in text


def test_confirm_refuses_a_repository_without_the_results_commits(tmp_path, capsys):
    commits = _commits(24)
    baseline, sampled = _stepped(24, at=12)
    _write_results(tmp_path, commits, baseline, sampled, [98] * 24)
    assert main(["history", "--results", str(tmp_path), "--repo", str(tmp_path), *TIME,
                 "--confirm"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "is not in --repo" in err and "asv ran on" in err


# ------------------------------------- the study's windows, failing counts, real histories

def test_the_study_counts_what_fails_apart_from_what_is_found_at_each_merge_window():
    study = _history_study()
    # Past the threshold with an interval that leaves out 1.0: gnnperf history's REGRESSION.
    fails = history.Change(20, 20, 1.05, 1.02, 1.08, 0.001, 1.0, 1.05)
    # Past it, but the interval reaches 1.0: inconclusive, found but not failing.
    loose = history.Change(20, 20, 1.05, 0.98, 1.12, 0.2, 1.0, 1.05)
    assert study.fails(fails, 0.03) and not study.fails(loose, 0.03)
    got = study.tally([loose], 20, 20, 2, 0.03)
    assert (got["found"], got["found_past_threshold"], got["found_fails"]) == (1, 1, 0)
    # Two rises 6 commits apart inside a 10-commit ramp: two changes at a
    # window of 5, one at 10 and at 20 (the window, not the ramp, decides).
    values = [1.0] * 20 + [1.0 + 0.01 * k for k in range(1, 11)] + [1.1] * 20
    for window, as_one in ((5, 0), (10, 1), (20, 1)):
        changes = history.describe(values, [23, 29], merge_within=window)
        got = study.tally(changes, 20, 29, 2, 0.03)
        assert got["found"] == 1 and got["found_as_one"] == as_one, window


def test_asvs_threshold_is_the_largest_of_every_pattern_that_matches(tmp_path):
    pytest.importorskip("asv")
    study = _history_study()
    conf = tmp_path / "asv.conf.json"
    conf.write_text('{\n  // asv.conf.json takes comments\n  "regressions_thresholds": '
                    '{"training\\\\.TrainStep\\\\.time_.*": 0.25, ".*peakmem_.*": 0.05, '
                    '".*": 0.10}\n}')
    figure = study.figure_entry("relative")
    assert figure == f"{RELATIVE}('cora', 'baseline')"
    assert study.asv_threshold(figure, conf) == 0.10  # only the catch-all matches
    assert study.asv_threshold(study.figure_entry("raw"), conf) == 0.25
    # A more specific, smaller threshold loses to the catch-all: asv takes the largest.
    assert study.asv_threshold("suite.Mem.peakmem_step", conf) == 0.10
    conf.write_text('{"regressions_thresholds": {"training\\\\..*": 0.2}}')
    assert study.asv_threshold("other.x", conf) == 0.05  # none matches: asv's default


def test_the_real_curve_reads_a_scratch_history_as_gnnperf_history_does(tmp_path):
    study = _history_study()
    n, first, last = 20, 6, 15
    pct = [0.0 if i < first else float(min(i, last) - first + 1) for i in range(1, n + 1)]
    commits = _commits(n)
    values = [float(v) * (1 + p / 100) for v, p in zip(_noise(n, seed=3), pct)]
    folder = tmp_path / "ramp"
    results = folder / "repo" / ".asv" / "results"
    _write_results(results, commits, [0.02] * n, [0.01] * n, [98] * n, relative=values)
    (folder / "run.json").write_text(json.dumps({"commits": [
        {"commit": c, "index": i + 1, "busy_wait_us": 0.0, "busy_wait_pct": p}
        for i, (c, p) in enumerate(zip(commits, pct))]}))
    rows = study.read_history(folder, [5, 10, 20], 2, 0.03)
    assert [(r["case"], r["kind"], r["ramp"], r["points"]) for r in rows] == [
        ("baseline@cora", "ramp", [first, last], n)]
    reading = rows[0]["windows"]["10"]["gnnperf history"]
    assert reading["found"] == reading["found_fails"] == 1
    assert any(a["word"] == "REGRESSION" and first - 2 <= a["commit"] <= last + 2
               for a in reading["alerts"])
    summary = study.summarise(rows)
    row = next(r for r in summary if r["method"] == "gnnperf history" and r["merge_within"] == 10)
    assert (row["ramps"], row["found"], row["aa_histories"]) == (1, 1, 0)
    table = study.format_real(summary, [])
    assert "| baseline@cora | - | - | - | - | - | 1/1; 1/1; " in table  # no A/A history: no rate


def test_a_results_folder_asv_never_wrote_holds_no_results(tmp_path):
    """asv that failed before writing anything leaves no results folder: the
    reader finds nothing there (the doctor then shows asv's own output), it
    does not raise."""
    from gnnperf.history.asv_results import commit_files, machines
    assert machines(tmp_path / "absent") == []
    assert commit_files(tmp_path / "absent", "0123456789abcdef") == []
