"""Change points across a benchmark's history (issue 49): the regressions
that creep in over many commits, each too small for the gate's one-commit
comparison, and steps that landed unnoticed.

The detectors are maintained libraries' (:data:`DETECTORS`); this module
orders the points, turns a detector's change points into changes with a
size and an interval, merges a drift spread over a few commits into one
change, and groups the series that moved at the same commit; below them,
the reader of asv's results folder and the ``gnnperf history`` command.
"""
from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from gnnperf.errors import GnnperfError

#: Every detector's fewest points: below it a history is "too short", never
#: "no change" (E-divisive's t-test needs points on both sides of a split;
#: asv's Potts fit and ruptures' penalty need a noise estimate).
MIN_POINTS = 8
#: Two change points in the same direction with fewer commits than this
#: between them are one change: a drift of +1% a commit over ten commits is
#: one thing a reviewer acts on, not two or three (see docs/history.md).
MERGE_WITHIN = 10


class NotJudged(GnnperfError):
    """A series the detector cannot judge; the command lists it apart."""


class HistoryTooShort(NotJudged):
    """A series with fewer points than the detector needs."""


@dataclass
class Change:
    r"""One change of a series' level.

    Args:
        start: index of the first point after the change (for a merged drift,
            after its first step).
        end: index of the first point after its last step (= :obj:`start` for
            a step).
        ratio: the level after over the level before (> 1 slower for times).
        ci_low: the ratio's 95% interval, low end (Welch's t on log values of
            the segments before and after).
        ci_high: its high end.
        pvalue: Welch's two-sided p-value of the segments before and after.
        before: mean of the segment before.
        after: mean of the segment after.
        steps: the detector's change points merged into this change.
    """
    start: int
    end: int
    ratio: float
    ci_low: float
    ci_high: float
    pvalue: float
    before: float
    after: float
    steps: list[int] = field(default_factory=list)

    @property
    def direction(self) -> int:
        """+1 when the level rose, -1 when it fell."""
        return 1 if self.ratio > 1 else -1


def _log(values: Sequence[float]):
    import numpy as np
    return np.log(np.asarray(values, dtype=float))


def detect_otava(values: Sequence[float], *, max_pvalue: float = 0.01,
                 window: int = 50) -> list[int]:
    """Apache Otava's E-divisive with its Student t-test merge step (Hunter,
    Fleming et al. 2023): the indices of the first points after each change."""
    from otava.analysis import compute_change_points
    points, _ = compute_change_points(list(map(float, values)), window_len=window,
                                      max_pvalue=max_pvalue)
    return sorted(int(cp.index) for cp in points)


def robust_sigma(values: Sequence[float]) -> float:
    """The noise of a series with steps in it: the median absolute first
    difference, scaled to a normal sigma (differences cancel the steps,
    the median ignores spikes)."""
    import numpy as np
    diffs = np.abs(np.diff(np.asarray(values, dtype=float)))
    sigma = float(np.median(diffs)) * 1.4826 / math.sqrt(2)
    return sigma if sigma > 0 else float(np.std(values)) or 1.0


def detect_ruptures(values: Sequence[float], *, penalty: float = 2.0, cost: str = "l1",
                    min_size: int = 3) -> list[int]:
    """ruptures' PELT (Killick et al. 2012) on log values scaled by their
    robust noise, with the penalty :obj:`penalty` x log(n) (BIC's form). The
    l1 cost (a median per segment) keeps a single spike from paying for two
    change points."""
    import numpy as np
    import ruptures
    logs = _log(values)
    signal = (logs / robust_sigma(logs)).reshape(-1, 1)
    algo = ruptures.Pelt(model=cost, min_size=min_size, jump=1).fit(signal)
    return [int(i) for i in algo.predict(pen=penalty * math.log(len(logs)))[:-1]]


def detect_asv(values: Sequence[float], weights: Sequence[float | None] | None = None, *,
               threshold: float = 0.05) -> list[int]:
    """asv's own detector as ``asv publish`` runs it: the Potts fit
    (:func:`asv.step_detect.detect_steps`, weights 2 / the 99% interval's
    width) and its regression filter with the configured threshold. asv
    reports regressions only: these are the indices of the first point after
    each upward step it keeps."""
    from asv import step_detect
    steps = step_detect.detect_steps(list(map(float, values)), weights)
    _, _, jumps = step_detect.detect_regressions(steps, threshold)
    return sorted(int(after) for _, after, _, _ in (jumps or []))


#: name -> (function of values and weights, what it is).
DETECTORS: dict[str, tuple[Callable[..., list[int]], str]] = {
    "otava": (lambda v, w=None, **kw: detect_otava(v, **kw),
              "Apache Otava 0.8: E-divisive means with a t-test merge, p < 0.01"),
    "ruptures": (lambda v, w=None, **kw: detect_ruptures(v, **kw),
                 "ruptures PELT, l1 cost on log values / robust sigma, penalty 2 log n"),
    "asv": (lambda v, w=None, **kw: detect_asv(v, w, **kw),
            "asv.step_detect as asv publish: Potts fit, detect_regressions"),
}


#: What each detector needs installed, for the one line that says so.
INSTALL = {
    "ruptures": "ruptures (gnnperf's bench extra, with asv): pip install 'gnnperf[bench]'",
    "asv": "asv (gnnperf's bench extra): pip install 'gnnperf[bench]'",
    # Its wheel pins numpy 2.2 and scipy < 1.17 and brings BigQuery, Slack and
    # Postgres clients: its detector needs none of that, so not a dependency.
    "otava": "apache-otava, not a dependency of gnnperf (its wheel pins numpy 2.2 and "
             "scipy < 1.17): pip install --no-deps apache-otava",
}


def segment_test(before: Sequence[float], after: Sequence[float]
                 ) -> tuple[float, float, float, float]:
    """Ratio of the geometric means after/before with its 95% interval and
    Welch's two-sided p-value, on log values: (ratio, low, high, p)."""
    from scipy import stats
    a, b = _log(before), _log(after)
    diff = float(b.mean() - a.mean())
    if len(a) < 2 or len(b) < 2:
        return math.exp(diff), 0.0, math.inf, 1.0
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    se = math.sqrt(va + vb)
    if se == 0:
        return math.exp(diff), math.exp(diff), math.exp(diff), float(diff == 0)
    dof = (va + vb) ** 2 / ((va ** 2 / (len(a) - 1)) + (vb ** 2 / (len(b) - 1)))
    t = float(stats.t.ppf(0.975, dof))
    p = float(2 * stats.t.sf(abs(diff) / se, dof))
    return math.exp(diff), math.exp(diff - t * se), math.exp(diff + t * se), p


def describe(values: Sequence[float], points: Sequence[int], *,
             merge_within: int = MERGE_WITHIN) -> list[Change]:
    """The changes at a detector's change points: each between the segments
    on either side (bounded by the neighbouring changes), consecutive ones in
    one direction with fewer than :obj:`merge_within` points between them
    merged into one (a drift), its size from the level before its first step
    to the level after its last."""
    import numpy as np
    n = len(values)
    points = sorted(p for p in set(points) if 0 < p < n)
    bounds = [0, *points, n]
    groups: list[list[int]] = []
    for k, p in enumerate(points):
        level_before = float(np.mean(_log(values[bounds[k]:p])))
        level_after = float(np.mean(_log(values[p:bounds[k + 2]])))
        up = level_after > level_before
        if groups and groups[-1][0] == up and p - groups[-1][-1] < merge_within:
            groups[-1].append(p)
        else:
            groups.append([up, p])
    changes = []
    for g, (_, *steps) in enumerate(groups):
        lo = groups[g - 1][-1] if g else 0
        hi = groups[g + 1][1] if g + 1 < len(groups) else n
        before, after = values[lo:steps[0]], values[steps[-1]:hi]
        ratio, low, high, p = segment_test(before, after)
        changes.append(Change(start=steps[0], end=steps[-1], ratio=ratio, ci_low=low,
                              ci_high=high, pvalue=p, before=float(np.mean(before)),
                              after=float(np.mean(after)), steps=list(steps)))
    return changes


def find_changes(values: Sequence[float], weights: Sequence[float | None] | None = None, *,
                 method: str = "ruptures", merge_within: int = MERGE_WITHIN,
                 **options) -> list[Change]:
    """The changes in one series, oldest first, by :obj:`method` (a key of
    :data:`DETECTORS`). Raises :class:`HistoryTooShort` below
    :data:`MIN_POINTS` points."""
    if len(values) < MIN_POINTS:
        raise HistoryTooShort(f"{len(values)} points; the {method} detector needs at least "
                              f"{MIN_POINTS}")
    # The detectors work on log values (a change is a ratio): a zero, a
    # negative or a non-finite figure (a percentage that can be 0 or below,
    # e.g. track_gpu_idle_pct, track_headroom_pct) has no log.
    bad = [v for v in values if not (math.isfinite(v) and v > 0)]
    if bad:
        raise NotJudged(f"{len(bad)} of its values are not positive finite numbers "
                        f"(e.g. {bad[0]}): a change is a ratio; pick figures that are positive "
                        f"(times, the step over the reference) with --bench")
    detector, _ = DETECTORS[method]
    try:
        points = detector(values, weights, **options)
    except ImportError as exc:
        raise GnnperfError(f"--method {method} needs {INSTALL[method]} ({exc})") from None
    return describe(values, points, merge_within=merge_within)


# ------------------------------------------------------- asv's results folder

#: asv figures that are exact counts (gnnperf.measure.workcount): a change
#: in them is any change of value, no detector needed, and it names what
#: moved when a time moved at the same commit.
WORK_METRICS = ("track_aten_ops", "track_flops", "track_profiled_ops", "track_bytes_allocated",
                "track_peak_bytes", "track_compiled_graphs", "track_graph_breaks",
                "track_recompiles")


@dataclass
class Series:
    r"""One benchmark at one parameter combination in one environment: its
    values in commit order.

    Args:
        name: asv's name of the series, e.g.
            ``training.TrainStep.time_train_step('cora', 'baseline', 'gcn')``.
        benchmark: the benchmark's name.
        params: parameter name -> value, as asv stores it (``"'cora'"``).
        commits: commit hashes, oldest first.
        values: the figure at each commit.
        weights: asv's weight of each point (2 / its 99% interval's width),
            ``None`` where asv has no interval.
        env: asv's environment name.
    """
    name: str
    benchmark: str
    params: dict[str, str]
    commits: list[str] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    weights: list[float | None] = field(default_factory=list)
    env: str = ""

    @property
    def exact(self) -> bool:
        """An exact work metric: counted, not timed."""
        return self.benchmark.rsplit(".", 1)[-1] in WORK_METRICS


@dataclass
class Results:
    r"""What one machine's asv results folder holds, in commit order.

    Args:
        machine: asv's machine name.
        series: every series with at least one value.
        order: ``"git"`` (``git rev-list --all --date-order``, asv publish's
            order) or ``"date"`` (the results files' commit dates).
        dates: commit hash -> its date (ms since the epoch, asv's).
        commits: every commit with results, in that order.
        dropped: points left out because a later result carries another
            benchmark version (asv starts a new history then).
    """
    machine: str
    series: list[Series]
    order: str
    dates: dict[str, int]
    commits: list[str] = field(default_factory=list)
    dropped: int = 0


def _machines(results_dir: Path) -> list[str]:
    return sorted(p.name for p in results_dir.iterdir()
                  if p.is_dir() and any(p.glob("*.json")))


def _git_order(repo: Path | None) -> dict[str, int] | None:
    """Commit -> position in ``git rev-list --all --date-order --reverse``
    (what ``asv publish`` orders by), or None without a repository."""
    import subprocess
    if repo is None:
        return None
    try:
        out = subprocess.run(["git", "-C", str(repo), "rev-list", "--all", "--date-order",
                              "--reverse"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return {commit: i for i, commit in enumerate(out.split())}


def _param_names(results_dir: Path) -> dict[str, list[str]]:
    import json
    try:
        listing = json.loads((results_dir / "benchmarks.json").read_text())
    except (OSError, ValueError):
        return {}
    return {name: b.get("param_names", []) for name, b in listing.items() if isinstance(b, dict)}


def read_asv_results(results_dir: Path, machine: str | None = None,
                     repo: Path | None = None) -> Results:
    """Reads asv's results folder (format version 2, asv >= 0.5): each
    parameter combination of each benchmark is a series of its own, ordered
    by :obj:`repo`'s git order where every commit is in it, else by date.
    Raises :class:`GnnperfError` with the fix on a folder that is not one."""
    import itertools
    import json
    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        raise GnnperfError(f"--results {results_dir}: no such folder; point it at asv.conf.json's "
                           f"results_dir (e.g. .asv/results) after an asv run")
    machines = _machines(results_dir)
    if machine is None:
        if len(machines) != 1:
            raise GnnperfError(
                f"--results {results_dir}: "
                + (f"{len(machines)} machines ({', '.join(machines)}); name one with --machine"
                   if machines else "no machine folder with results; run asv first"))
        machine = machines[0]
    elif machine not in machines:
        raise GnnperfError(f"--machine {machine}: not in {results_dir} (there: "
                           f"{', '.join(machines) or 'none'})")
    names = _param_names(results_dir)
    files = []
    for path in sorted((results_dir / machine).glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except ValueError as exc:
            raise GnnperfError(f"{path}: not JSON ({exc}); delete it or re-run asv") from None
        if path.name == "machine.json" or "commit_hash" not in data:
            continue
        if data.get("version") != 2:
            raise GnnperfError(f"{path}: asv results format {data.get('version')}, not 2; "
                               f"upgrade it with asv >= 0.5: asv update")
        files.append(data)
    if not files:
        raise GnnperfError(f"--results {results_dir}: no results for machine {machine}; "
                           f"run asv first")
    dates = {f["commit_hash"]: int(f.get("date") or 0) for f in files}
    position = _git_order(repo)
    order = "git"
    if position is None or any(c not in position for c in dates):
        position = {c: i for i, c in enumerate(sorted(dates, key=lambda c: (dates[c], c)))}
        order = "date"
    files.sort(key=lambda f: position[f["commit_hash"]])
    envs = {f.get("env_name", "") for f in files}
    series: dict[tuple, Series] = {}
    versions: dict[tuple, list] = {}
    for f in files:
        columns = f.get("result_columns", ["result", "params", "version"])
        for bench, entry in f.get("results", {}).items():
            row = dict(zip(columns, entry))
            params = row.get("params") or []
            combos = list(itertools.product(*params)) if params else [()]
            results = row.get("result")
            if not isinstance(results, list):
                continue
            ci_a, ci_b = row.get("stats_ci_99_a") or [], row.get("stats_ci_99_b") or []
            pnames = names.get(bench) or [f"p{i}" for i in range(len(params))]
            for i, combo in enumerate(combos):
                value = results[i] if i < len(results) else None
                if value is None or not isinstance(value, (int, float)) or value != value:
                    continue  # n/a, failed or skipped at this commit: no point
                env = f.get("env_name", "") if len(envs) > 1 else ""
                key = (bench, combo, env)
                name = (bench + (f"({', '.join(combo)})" if combo else "")
                        + (f" [{env}]" if env else ""))
                s = series.setdefault(key, Series(name, bench, dict(zip(pnames, combo)), env=env))
                a = ci_a[i] if i < len(ci_a) else None
                b = ci_b[i] if i < len(ci_b) else None
                finite = a is not None and b is not None and math.isfinite(a) and math.isfinite(b)
                s.commits.append(f["commit_hash"])
                s.values.append(float(value))
                s.weights.append(2 / abs(b - a) if finite and b != a else None)
                versions.setdefault(key, []).append(row.get("version"))
    dropped = 0
    for key, s in series.items():
        # asv's benchmark version: a new one restarts the history (its
        # figure means something else), so only the latest version's points.
        latest = versions[key][-1]
        keep = [i for i, v in enumerate(versions[key]) if v == latest]
        dropped += len(s.values) - len(keep)
        s.commits = [s.commits[i] for i in keep]
        s.values = [s.values[i] for i in keep]
        s.weights = [s.weights[i] for i in keep]
    commits = list(dict.fromkeys(f["commit_hash"] for f in files))
    return Results(machine, list(series.values()), order, dates, commits, dropped)


# ---------------------------------------------------------- what it reports

#: The detector ``gnnperf history`` runs unless told otherwise, chosen by
#: the operating curve of tools/history_study.py (docs/history.md).
DEFAULT_METHOD = "ruptures"
#: The series judged by default: the suite's history figure, a step's time
#: over a reference step's timed in the same process, where the machine's
#: speed cancels. On a shared machine the raw ``time_`` values of identical
#: commits spread past a 5% step (a false +11% on an A/A scratch history,
#: docs/history.md); ``--bench '\.time_'`` judges them on a quiet runner.
DEFAULT_BENCH = r"\.track_step_over_reference"


@dataclass
class Moved:
    r"""One series' change at a commit (a row of an :class:`Alert`).

    Args:
        series: the series that moved.
        change: its change.
        regression: whether the change rose past the threshold.
    """
    series: Series
    change: Change
    regression: bool


@dataclass
class Alert:
    r"""Everything that changed at one commit: the series that moved, each
    with its size and interval, and the exact work metrics that moved there.

    Args:
        commit: the first commit after the change.
        end_commit: for a drift, the first commit after its last step.
        position: the commit's index in the history's order.
        moved: the series that changed there, largest first.
        work: ``(name, before, after, commit)`` of each exact work metric of
            the same parameters whose value changed inside the change.
    """
    commit: str
    end_commit: str
    position: int
    moved: list[Moved] = field(default_factory=list)
    work: list[tuple[str, float, float, str]] = field(default_factory=list)

    @property
    def regression(self) -> bool:
        """Whether any series rose past the threshold here."""
        return any(m.regression for m in self.moved)


def _matches(work: Series, series: Series) -> bool:
    """A work metric of the same case: every parameter they share agrees
    (work metrics carry no model; they count the GCN step)."""
    shared = set(work.params) & set(series.params)
    if not shared or work.env != series.env:
        return False
    if "model" in series.params and "model" not in work.params and \
            series.params["model"] != "'gcn'":
        return False
    return all(work.params[k] == series.params[k] for k in shared)


def exact_changes(series: Series) -> list[Change]:
    """Every change of an exact count: each commit whose value differs from
    the one before."""
    out = []
    for i in range(1, len(series.values)):
        a, b = series.values[i - 1], series.values[i]
        if a != b:
            ratio = b / a if a else math.inf
            out.append(Change(i, i, ratio, ratio, ratio, 0.0, a, b, [i]))
    return out


def analyse(results: Results, pattern: str, *, method: str = DEFAULT_METHOD,
            threshold: float = 0.03, **options
            ) -> tuple[list[Alert], list[tuple[Series, str]], int]:
    """The alerts of the series whose name matches :obj:`pattern` (a regular
    expression, searched), oldest first, the series too short to judge with
    why, and how many series matched. A change is a regression when its
    ratio is past 1 + threshold."""
    import re
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise GnnperfError(f"--bench {pattern!r}: not a regular expression ({exc})") from None
    chosen = [s for s in results.series if regex.search(s.name)]
    if not chosen:
        fix = ("these results have no TrainStepOverReference (a suite before it): judge "
               "the raw step times with --bench '\\.time_'" if pattern == DEFAULT_BENCH
               else "e.g. 'time_train_step' or a full name")
        raise GnnperfError(f"--bench {pattern!r}: matches no series of machine "
                           f"{results.machine}; {fix}")
    rank = {c: i for i, c in enumerate(results.commits)}
    merged: dict[str, Alert] = {}
    short = []
    work = [s for s in results.series if s.exact]
    for s in chosen:
        try:
            changes = exact_changes(s) if s.exact else find_changes(
                s.values, s.weights, method=method, **options)
        except NotJudged as exc:
            short.append((s, str(exc)))
            continue
        for ch in changes:
            commit = s.commits[ch.start]
            alert = merged.setdefault(commit, Alert(commit, s.commits[ch.end], 0))
            alert.moved.append(Moved(s, ch, ch.ratio > 1 + threshold))
            if ch.end > ch.start and alert.end_commit == alert.commit:
                alert.end_commit = s.commits[ch.end]
            lo, hi = s.commits[ch.start - 1], s.commits[ch.end]
            for w in work:
                if w is s or not _matches(w, s):
                    continue
                for wc in exact_changes(w):
                    at = w.commits[wc.start]
                    if rank[lo] < rank[at] <= rank[hi] and (w.name, at) not in \
                            {(n, c) for n, _, _, c in alert.work}:
                        alert.work.append((w.name, wc.before, wc.after, at))
    alerts = sorted(merged.values(), key=lambda a: rank[a.commit])
    for a in alerts:
        a.position = rank[a.commit]
        a.moved.sort(key=lambda m: -abs(math.log(m.change.ratio)) if m.change.ratio > 0 else 0)
    return alerts, short, len(chosen)


def _pct(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.1f}%" if math.isfinite(ratio) else "+inf"


def _date(results: Results, commit: str) -> str:
    import datetime
    ms = results.dates.get(commit)
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).date().isoformat() \
        if ms else "?"


def _where(results: Results, alert: Alert) -> str:
    n = len(results.commits)
    where = (f"{alert.commit[:10]} ({_date(results, alert.commit)}; "
             f"commit {alert.position + 1} of {n})")
    if alert.end_commit != alert.commit:
        span = results.commits.index(alert.end_commit) - alert.position + 1
        where = (f"{alert.commit[:10]}..{alert.end_commit[:10]} (a drift over {span} commits, "
                 f"{_date(results, alert.commit)} to {_date(results, alert.end_commit)}; "
                 f"commits {alert.position + 1}-{alert.position + span} of {n})")
    return where


def _size(change: Change) -> str:
    if change.ci_low == change.ci_high:
        return f"{_pct(change.ratio)} (exact)"
    return (f"{_pct(change.ratio)} [{_pct(change.ci_low)}, {_pct(change.ci_high)}] "
            f"p {change.pvalue:.1g}")


def format_text(results: Results, alerts: list[Alert], short: list[tuple[Series, str]],
                header: str, failing: list[Alert], threshold: float) -> str:
    """What ``gnnperf history`` prints: one block per commit where something
    changed, the series in it largest change first."""
    lines = [header]
    for a in alerts:
        label = "REGRESSION" if a in failing else ("regression" if a.regression else "change")
        lines.append(f"{label} at {_where(results, a)}")
        for m in a.moved:
            lines.append(f"  {_size(m.change)}  {m.series.name}  "
                         f"{m.change.before:.4g} -> {m.change.after:.4g}")
        for name, before, after, at in a.work:
            lines.append(f"  work metric moved: {name} {before:.6g} -> {after:.6g} at {at[:10]}")
    for s, why in short:
        lines.append(f"not judged: {s.name} ({why})")
    n_reg = len(failing)
    lines.append(f"{n_reg} regression{'s' if n_reg != 1 else ''} past {threshold:+.0%}"
                 if n_reg else f"no regression past {threshold:+.0%}")
    return "\n".join(lines)


def format_markdown(results: Results, alerts: list[Alert], short: list[tuple[Series, str]],
                    header: str, failing: list[Alert], threshold: float) -> str:
    """The reviewer's table: a row per series that moved, grouped by commit."""
    lines = [f"### gnnperf history", "", header, ""]
    if alerts:
        lines += ["| commit | verdict | series | change [95% interval] | before &rarr; after | "
                  "work metrics moved |", "|---|---|---|---|---|---|"]
    for a in alerts:
        verdict = "**REGRESSION**" if a in failing else ("regression" if a.regression else "change")
        work = "<br>".join(f"`{n}` {b:.6g}&rarr;{f:.6g}" for n, b, f, _ in a.work) or ""
        for i, m in enumerate(a.moved):
            lines.append(f"| {'`' + _where(results, a) + '`' if i == 0 else ''} | "
                         f"{verdict if i == 0 else ''} | `{m.series.name}` | {_size(m.change)} | "
                         f"{m.change.before:.4g} &rarr; {m.change.after:.4g} | "
                         f"{work if i == 0 else ''} |")
    for s, why in short:
        lines.append(f"\nNot judged: `{s.name}` ({why})")
    lines.append("")
    lines.append(f"**{len(failing)} regression(s) past {threshold:+.0%}**" if failing
                 else f"No regression past {threshold:+.0%}.")
    return "\n".join(lines) + "\n"


def to_dict(results: Results, alerts: list[Alert], short: list[tuple[Series, str]],
            failing: list[Alert], settings: dict) -> dict:
    """The ``--json`` document."""
    def finite(x: float) -> float | None:
        return x if math.isfinite(x) else None
    return {
        "machine": results.machine, "order": results.order, "commits": len(results.commits),
        "dropped_for_version": results.dropped, **settings,
        "changes": [{
            "commit": a.commit, "end_commit": a.end_commit, "position": a.position,
            "date": _date(results, a.commit), "regression": a.regression,
            "fails": a in failing,
            "series": [{"name": m.series.name, "benchmark": m.series.benchmark,
                        "params": m.series.params, "ratio": finite(m.change.ratio),
                        "ci_low": finite(m.change.ci_low), "ci_high": finite(m.change.ci_high),
                        "pvalue": m.change.pvalue, "before": m.change.before,
                        "after": m.change.after, "regression": m.regression,
                        "steps": [m.series.commits[i] for i in m.change.steps]}
                       for m in a.moved],
            "work": [{"name": n, "before": b, "after": f, "commit": c} for n, b, f, c in a.work],
        } for a in alerts],
        "too_short": [{"name": s.name, "points": len(s.values), "why": why} for s, why in short],
        "regressions": len(failing),
    }


def add_parser(sub) -> None:
    """``gnnperf history``'s options (registered by :mod:`gnnperf.cli`)."""
    from gnnperf.cli_help import command_parser
    parser = command_parser(
        sub, "history", help="change points across asv's results: steps and slow drifts, "
                             "commit by commit",
        description="Reads asv's results folder (one machine), orders the commits as asv "
                    "publish does (git rev-list --all --date-order; by date where the "
                    "commits are not in --repo) and finds the changes in each series (a "
                    "benchmark at one parameter combination) with a change-point detector; "
                    "a drift over a few commits is one change. Each change names its first "
                    "commit, its size with a 95% interval, the series that moved with it "
                    "and the exact work metrics (track_aten_ops, ...) that changed there.")
    parser.add_argument("--results", type=Path, default=Path(".asv/results"),
                        help="asv's results_dir (default: %(default)s)")
    parser.add_argument("--machine", help="asv's machine name (default: the folder's only one)")
    parser.add_argument("-b", "--bench", default=DEFAULT_BENCH,
                        help="regular expression searched in each series' name, "
                             "benchmark(params) (default: %(default)s, the step over the "
                             "suite's reference step; '\\.time_' for the raw step times)")
    parser.add_argument("--method", default=DEFAULT_METHOD, choices=sorted(DETECTORS),
                        help=f"change-point detector (default: %(default)s; "
                             f"docs/history.md compares them)")
    parser.add_argument("--threshold", type=float, default=0.03,
                        help="a rise past this fraction is a regression that fails "
                             "(default: %(default)s, the gate's)")
    parser.add_argument("--recent", type=int,
                        help="only regressions starting in the last N commits fail "
                             "(all are reported)")
    parser.add_argument("--repo", type=Path, default=Path("."),
                        help="the git repository whose order the commits take (default: here)")
    parser.add_argument("--merge-within", type=int, default=MERGE_WITHIN,
                        help="same-direction changes fewer commits apart than this are one "
                             "drift (default: %(default)s)")
    parser.add_argument("--json", type=Path, help="write the changes here")
    parser.add_argument("--markdown", type=Path,
                        help="write the reviewer's table here (e.g. $GITHUB_STEP_SUMMARY)")


def history_command(args: argparse.Namespace) -> int:
    """``gnnperf history``: 0 no regression, 1 a regression past the
    threshold, 2 bad input (a :class:`GnnperfError`, one line)."""
    import json
    from gnnperf.io import write_atomic
    for option, path in (("--json", args.json), ("--markdown", args.markdown)):
        if path is not None and not path.parent.resolve().is_dir():
            raise GnnperfError(f"{option} {path}: folder {path.parent} does not exist; "
                               f"create it first")
    if args.threshold < 0:
        raise GnnperfError(f"--threshold must be >= 0, got {args.threshold}")
    if args.recent is not None and args.recent < 1:
        raise GnnperfError(f"--recent must be >= 1, got {args.recent}")
    results = read_asv_results(args.results, args.machine, args.repo)
    alerts, short, matched = analyse(results, args.bench, method=args.method,
                                     threshold=args.threshold, merge_within=args.merge_within)
    if short and len(short) == matched:  # nothing judged: never read as "no change"
        s, why = max(short, key=lambda x: len(x[0].values))
        if len(s.values) >= MIN_POINTS:  # long enough, but not a figure a ratio applies to
            raise GnnperfError(f"no series matching '{args.bench}' can be judged: {s.name}: "
                               f"{why}")
        raise GnnperfError(
            f"history too short: {len(short)} series matching '{args.bench}', the longest "
            f"{len(s.values)} commits ({s.name}); the {args.method} detector needs at least "
            f"{MIN_POINTS}: run asv on more commits (e.g. asv run HEAD~{MIN_POINTS}..HEAD)")
    first = len(results.commits) - args.recent if args.recent else 0
    failing = [a for a in alerts if a.regression and a.position >= first]
    header = (f"machine {results.machine}: {len(results.commits)} commits ({results.order} order), "
              f"series matching '{args.bench}', detector {args.method}: "
              f"{DETECTORS[args.method][1]}"
              + (f"; {results.dropped} points of older benchmark versions left out"
                 if results.dropped else ""))
    print(format_text(results, alerts, short, header, failing, args.threshold))
    if args.markdown:
        write_atomic(args.markdown, format_markdown(results, alerts, short, header, failing,
                                                    args.threshold).encode())
    if args.json:
        settings = {"bench": args.bench, "method": args.method, "threshold": args.threshold,
                    "recent": args.recent, "merge_within": args.merge_within}
        write_atomic(args.json, json.dumps(to_dict(results, alerts, short, failing, settings),
                                           indent=2).encode())
    return 1 if failing else 0
