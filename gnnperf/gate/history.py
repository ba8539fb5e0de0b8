"""Change points across a benchmark's history: the regressions that creep
in over many commits, each too small for the gate's one-commit comparison,
and steps that landed unnoticed.

The detectors are maintained libraries' (:data:`DETECTORS`); this module
orders the points, turns a detector's change points into changes with a
size and an interval, merges a drift spread over a few commits into one
change, and groups the series that moved at the same commit; below them,
the reader of asv's results folder (values, and the commits where asv
recorded a failure: gaps), the confirmation of an alert by the gate at its
commit (``--confirm``) and the ``gnnperf history`` command. A rise whose
own interval reaches no change is inconclusive, never a failing regression.
"""
from __future__ import annotations

import argparse
import math
import sys
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
        failed: the commits where asv recorded a failure (no value: the
            benchmark raised, e.g. the history figure's environment guard,
            or its environment did not build), oldest first. An n/a (a
            variant the commit lacks) is neither a point nor a failure.
    """
    name: str
    benchmark: str
    params: dict[str, str]
    commits: list[str] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    weights: list[float | None] = field(default_factory=list)
    env: str = ""
    failed: list[str] = field(default_factory=list)

    @property
    def exact(self) -> bool:
        """An exact work metric: counted, not timed."""
        return self.benchmark.rsplit(".", 1)[-1] in WORK_METRICS


@dataclass
class Results:
    r"""What one machine's asv results folder holds, in commit order.

    Args:
        machine: asv's machine name.
        series: every series with at least one value or failure.
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
    # key -> (commit, value or None for a failure, weight, asv's version), in order.
    points: dict[tuple, list[tuple[str, float | None, float | None, object]]] = {}
    for f in files:
        columns = f.get("result_columns", ["result", "params", "version"])
        for bench, entry in f.get("results", {}).items():
            row = dict(zip(columns, entry))
            params = row.get("params") or []
            combos = list(itertools.product(*params)) if params else [()]
            results = row.get("result")
            if results is None:  # asv compresses "every combination failed" to null
                results = [None] * len(combos)
            if not isinstance(results, list):
                continue
            ci_a, ci_b = row.get("stats_ci_99_a") or [], row.get("stats_ci_99_b") or []
            pnames = names.get(bench) or [f"p{i}" for i in range(len(params))]
            for i, combo in enumerate(combos):
                if i >= len(results):
                    continue
                value = results[i]
                # asv writes a failure as null and an n/a (or a combination
                # not run) as NaN: a failure is a gap to report, an n/a nothing.
                if value is not None and (not isinstance(value, (int, float))
                                          or value != value):
                    continue
                env = f.get("env_name", "") if len(envs) > 1 else ""
                key = (bench, combo, env)
                name = (bench + (f"({', '.join(combo)})" if combo else "")
                        + (f" [{env}]" if env else ""))
                series.setdefault(key, Series(name, bench, dict(zip(pnames, combo)), env=env))
                a = ci_a[i] if i < len(ci_a) else None
                b = ci_b[i] if i < len(ci_b) else None
                finite = a is not None and b is not None and math.isfinite(a) and math.isfinite(b)
                weight = 2 / abs(b - a) if finite and b != a else None
                points.setdefault(key, []).append(
                    (f["commit_hash"], None if value is None else float(value), weight,
                     row.get("version")))
    dropped = 0
    for key, s in series.items():
        # asv's benchmark version: a new one restarts the history (its
        # figure means something else), so only the latest version's points.
        latest = points[key][-1][3]
        kept = [p for p in points[key] if p[3] == latest]
        dropped += sum(p[1] is not None for p in points[key]) - sum(p[1] is not None
                                                                    for p in kept)
        s.commits = [c for c, v, _, _ in kept if v is not None]
        s.values = [v for _, v, _, _ in kept if v is not None]
        s.weights = [w for _, v, w, _ in kept if v is not None]
        s.failed = [c for c, v, _, _ in kept if v is None]
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

    @property
    def conclusive(self) -> bool:
        """Whether the change's own 95% interval leaves out no change (1.0):
        a rise whose interval reaches 1.0 may be noise, and never fails."""
        return self.change.ci_low > 1 if self.change.ratio > 1 else self.change.ci_high < 1


@dataclass
class GateCase:
    r"""What the gate said of one case at an alert's commit
    (:func:`confirm_alert`).

    Args:
        case: the gate's case, ``variant@dataset[@model]``.
        verdict: the time gate's verdict (``REGRESSION``, ``same``,
            ``improvement``, ``inconclusive``), or why it has none.
        ratio: head over base step time (``None``: not timed).
        ci_low: the ratio's 95% interval, low end.
        ci_high: its high end.
        p_slower: the one-sided p-value of a slowdown.
        pairs: the process pairs it was decided on.
        work: each exact work metric that changed, ``(metric, base, head)``.
        ops: each ATen op whose count changed, ``(op, base, head)``.
    """
    case: str
    verdict: str
    ratio: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_slower: float | None = None
    pairs: int = 0
    work: list[tuple[str, object, object]] = field(default_factory=list)
    ops: list[tuple[str, int, int]] = field(default_factory=list)

    @property
    def confirms(self) -> bool:
        """The time gate saw a regression, or the work gate a change."""
        return self.verdict == "REGRESSION" or bool(self.work or self.ops)


@dataclass
class Confirmation:
    r"""The gate's word on an alert (``gnnperf history --confirm``).

    Args:
        state: ``confirmed`` (the gate saw it), ``unconfirmed`` (the gate
            ran and did not) or ``error`` (the gate could not run: the alert
            stands as the history found it).
        culprit: the commit the gate confirmed it at (the alert's commit, or
            the one :func:`~gnnperf.gate.bisection.bisect` found), ``None``
            for a drift no single commit carries.
        base: the gate's base: the culprit's parent, or the commit before
            the change for a drift.
        head: the gate's head commit.
        subject: the head commit's subject line.
        cases: the gate's reading of each case.
        command: the commands that reproduce the gate's reading.
        search: the ``gnnperf bisect`` command, where the change spans
            several commits.
        note: what happened, in a sentence.
    """
    state: str
    culprit: str | None = None
    base: str | None = None
    head: str | None = None
    subject: str = ""
    cases: list[GateCase] = field(default_factory=list)
    command: str = ""
    search: str = ""
    note: str = ""

    @property
    def confirmed(self) -> bool:
        return self.state == "confirmed"


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
        confirmation: the gate's word on it (``--confirm``), else ``None``.
    """
    commit: str
    end_commit: str
    position: int
    moved: list[Moved] = field(default_factory=list)
    work: list[tuple[str, float, float, str]] = field(default_factory=list)
    confirmation: Confirmation | None = None

    @property
    def regression(self) -> bool:
        """Whether any series rose past the threshold here."""
        return any(m.regression for m in self.moved)

    @property
    def conclusive(self) -> bool:
        """Whether a series rose past the threshold with its 95% interval
        leaving out no change: the only kind of rise that may fail."""
        return any(m.regression and m.conclusive for m in self.moved)


@dataclass
class Gap:
    r"""The commits where asv recorded a failure of one series: no value,
    a gap in its history (the figure's environment guard fails it, naming
    what it found, in asv's log).

    Args:
        series: the series.
        commits: the commits it failed at, oldest first.
        current: whether it failed at every commit after its last value
            (up to the newest one it was run at): it fails now.
    """
    series: Series
    commits: list[str]
    current: bool


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


def select(results: Results, pattern: str) -> list[Series]:
    """The series whose name matches :obj:`pattern` (a regular expression,
    searched); a :class:`GnnperfError` naming the fix where none does."""
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
    return chosen


def find_gaps(results: Results, chosen: list[Series]) -> list[Gap]:
    """The gaps of :obj:`chosen`: each series with a failure, in name order."""
    rank = {c: i for i, c in enumerate(results.commits)}
    gaps = []
    for s in sorted(chosen, key=lambda s: s.name):
        if s.failed:
            last_value = max((rank[c] for c in s.commits), default=-1)
            gaps.append(Gap(s, sorted(s.failed, key=rank.__getitem__),
                            current=max(rank[c] for c in s.failed) > last_value))
    return gaps


def analyse(results: Results, pattern: str, *, method: str = DEFAULT_METHOD,
            threshold: float = 0.03, **options
            ) -> tuple[list[Alert], list[tuple[Series, str]], int]:
    """The alerts of the series whose name matches :obj:`pattern` (a regular
    expression, searched), oldest first, the series too short to judge with
    why, and how many series matched. A change is a regression when its
    ratio is past 1 + threshold (:attr:`Alert.conclusive` when its interval
    also leaves out no change)."""
    chosen = select(results, pattern)
    rank = {c: i for i, c in enumerate(results.commits)}
    merged: dict[str, Alert] = {}
    short = []
    work = [s for s in results.series if s.exact and s.values]
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


# ------------------------------------------------- the gate at an alert's commit

@dataclass
class ConfirmOptions:
    r"""How ``--confirm`` runs the gate (``gnnperf gate``'s options of the
    same names).

    Args:
        repo: the git repository whose commits the results are of.
        processes: worker pairs, the t-test's replicates.
        max_processes: the adaptive budget (``None``: the gate's default).
        rounds: interleaved rounds per pair.
        threshold: the smallest slowdown that fails (the history's).
        python: the interpreter both arms run under.
    """
    repo: Path
    processes: int = 6
    max_processes: int | None = None
    rounds: int = 30
    threshold: float = 0.03
    python: str = sys.executable


def _case_of(series: Series):
    """The gate's :class:`~gnnperf.measure.case.Case` of a series (its
    ``dataset``, ``variant`` and ``model`` parameters), or ``None``."""
    import ast
    from gnnperf.measure.case import Case

    def plain(name: str) -> str | None:
        text = series.params.get(name)
        if text is None:
            return None
        try:
            value = ast.literal_eval(text)  # asv stores each parameter's repr
        except (ValueError, SyntaxError):
            value = text
        return str(value)

    variant, dataset = plain("variant"), plain("dataset")
    if variant is None or dataset is None:
        return None
    return Case.of(variant, dataset, plain("model") or "gcn")


def _work_metric(alert: Alert) -> str | None:
    """The exact metric (``aten_ops``, ...) of the first work metric that
    moved inside :obj:`alert`, for a bisect by it (deterministic)."""
    from gnnperf.measure.workcount import EXACT_FIELDS
    for name, *_ in alert.work:
        metric = name.split("(")[0].rsplit(".", 1)[-1].removeprefix("track_")
        if metric in EXACT_FIELDS:
            return metric
    return None


def _read_gate(report: dict, case_names: list[str]) -> list[GateCase]:
    """Each case's time verdict, changed work metrics and ATen ops from a
    gate report (:attr:`~gnnperf.gate.compare.GateResult.report`)."""
    verdicts = {v["case"]: v for v in report.get("time", {}).get("verdicts", [])}
    rows = report.get("work", {}).get("rows", [])
    out = []
    for name in case_names:
        v = verdicts.get(name)
        states = {key: report.get(key) or {} for key in ("head_failed", "base_failed",
                                                         "unavailable")}
        if v is not None:
            reading = GateCase(name, v["verdict"], v["ratio"], v["ci_low"], v["ci_high"],
                               v["p_slower"], v.get("pairs", 0))
        elif name in states["head_failed"]:
            reading = GateCase(name, f"failed in the head: {states['head_failed'][name]}")
        elif name in states["base_failed"]:
            reading = GateCase(name, f"failed in the base: {states['base_failed'][name]}")
        elif name in states["unavailable"]:
            reading = GateCase(name, f"n/a: {states['unavailable'][name]}")
        else:
            reading = GateCase(name, "not timed")
        for row in rows:
            if row["case"] != name:
                continue
            if "op_diff" in row:
                reading.ops = [(op, a, b) for op, (a, b) in row["op_diff"].items()]
            elif not row["same"] and not row.get("new"):
                reading.work.append((row["metric"], row["base"], row["head"]))
        out.append(reading)
    return out


def _seen_by(readings: list[GateCase]) -> str:
    """Which of the gate's two halves saw the change."""
    seen = (["the time gate: REGRESSION"] if any(r.verdict == "REGRESSION" for r in readings)
            else []) + (["the work gate: the step's work changed"]
                        if any(r.work or r.ops for r in readings) else [])
    return "; ".join(seen)


def _gate_command(repo: Path, base: str, head: str, cases, options: ConfirmOptions) -> str:
    """The shell commands that rerun the gate of :obj:`head` against
    :obj:`base` on :obj:`cases`: the head checked out as a git worktree (the
    gate's ``--base`` is a ref of the head's repository)."""
    import shlex
    tree = f"/tmp/gnnperf-{head[:10]}"
    variants = ",".join(dict.fromkeys(c.variant for c in cases))
    datasets = ",".join(dict.fromkeys(c.dataset for c in cases))
    models = ",".join(dict.fromkeys(c.model for c in cases))
    return (f"git -C {shlex.quote(str(repo))} worktree add --detach {tree} {head} && "
            f"gnnperf gate --base {base} --head-dir {tree} --variants {shlex.quote(variants)} "
            f"--datasets {shlex.quote(datasets)}"
            + (f" --models {shlex.quote(models)}" if models != "gcn" else "")
            + _timing_flags(options))


def _timing_flags(options: ConfirmOptions) -> str:
    return (f" --processes {options.processes}"
            + (f" --max-processes {options.max_processes}" if options.max_processes else "")
            + f" --rounds {options.rounds} --threshold {options.threshold:g}")


def confirm_alert(alert: Alert, results: Results, options: ConfirmOptions,
                  log: Callable[[str], None] = lambda msg: None) -> Confirmation:
    """Runs the gate (:func:`~gnnperf.gate.compare.run_gate`, work and time)
    on :obj:`alert`'s cases between the commit before the change and the
    change's last commit. A change at one commit is gated against its
    parent. A change spanning several commits (asv skipped some, or a
    drift) is gated across the span, and where the gate confirms it,
    :func:`~gnnperf.gate.bisection.bisect` finds the first commit (by the
    exact work metric that moved there, else by time), which is gated
    against its own parent; a drift no commit carries alone stays confirmed
    across its span. A gate that cannot run is an ``error``: the alert
    stands as the history found it."""
    import tempfile
    from gnnperf.gate import arms as arm_runner
    from gnnperf.gate.bisection import bisect, commits_between
    from gnnperf.gate.compare import GateOptions, run_gate

    rising = [m for m in alert.moved if m.regression and m.conclusive] or alert.moved
    cases = list(dict.fromkeys(c for c in map(_case_of, (m.series for m in rising)) if c))
    if not cases:
        return Confirmation("error", note=f"{rising[0].series.name} names no variant and "
                                          f"dataset to gate")
    first = rising[0]
    before = first.series.commits[first.change.start - 1]
    last = first.series.commits[first.change.end]
    repo = options.repo

    def gate(base: str, head: str, tmp: str) -> tuple[list[GateCase], str]:
        log(f"gate: {head[:10]} against {base[:10]} on {', '.join(c.name for c in cases)} ...")
        tree = arm_runner.export_ref(head, Path(tmp) / head[:12], repo)
        result = run_gate(GateOptions(
            base=base, repo=str(repo), head_dir=str(tree), cases=list(cases),
            base_python=options.python, head_python=options.python,
            processes=options.processes, max_processes=options.max_processes,
            rounds=options.rounds, threshold=options.threshold), log)
        return _read_gate(result.report, [c.name for c in cases]), \
            _gate_command(repo, base, head, cases, options)

    def subject(commit: str) -> str:
        import subprocess
        return subprocess.run(["git", "-C", str(repo), "log", "-1", "--format=%s", commit],
                              capture_output=True, text=True).stdout.strip()

    try:
        chain = commits_between(repo, before, last)  # chain[0] is `before`
        with tempfile.TemporaryDirectory(prefix="gnnperf-history-") as tmp:
            readings, command = gate(before, last, tmp)
            single = len(chain) == 2
            found = Confirmation(
                "confirmed" if any(r.confirms for r in readings) else "unconfirmed",
                culprit=last if single else None, base=before, head=last,
                subject=subject(last), cases=readings, command=command)
            if single or not found.confirmed:
                against = "its parent" if single else "the commit before the change"
                found.note = (f"the gate of {last[:10]} against {against} {before[:10]} "
                              + (f"confirms it ({_seen_by(readings)})" if found.confirmed
                                 else "does not see it"))
                return found
            # Confirmed across the span: which commit of it.
            # An exact metric that moved makes the search deterministic.
            metric = next((m for m, _, _ in readings[0].work), None) or _work_metric(alert) \
                or "time"
            found.search = (f"gnnperf bisect {before} {last} --repo {repo} --case "
                            f"{cases[0].name} --metric {metric}" + _timing_flags(options))
            log(f"bisect {before[:10]}..{last[:10]} by {metric} ...")
            span = (f"the gate across the {len(chain) - 1} commits after {before[:10]} "
                    f"confirms it ({_seen_by(readings)})")
            try:
                searched = bisect(before, last, cases[0], metric, str(repo), GateOptions(
                    head_dir=str(repo), base_python=options.python,
                    head_python=options.python, processes=options.processes,
                    max_processes=options.max_processes, rounds=options.rounds,
                    threshold=options.threshold), log)
            except GnnperfError as exc:  # confirmed all the same: the span is the answer
                found.note = f"{span}; bisect by {metric} named no commit ({exc})"
                return found
            if not searched.confirmed:
                found.note = (f"{span}; bisect by {metric} found no one commit that carries "
                              f"it alone (a drift)")
                return found
            parent = chain[chain.index(searched.commit) - 1]
            readings, command = gate(parent, searched.commit, tmp)
            if not any(r.confirms for r in readings):
                found.note = (f"{span}; bisect by {metric} found {searched.commit[:10]}, "
                              f"which the gate against its parent does not see alone (a "
                              f"drift)")
                return found
            return Confirmation("confirmed", culprit=searched.commit, base=parent,
                                head=searched.commit, subject=searched.subject,
                                cases=readings, command=command, search=found.search,
                                note=f"bisect by {metric} over {before[:10]}..{last[:10]} "
                                     f"found it; the gate against its parent confirms it "
                                     f"({_seen_by(readings)})")
    except GnnperfError as exc:
        return Confirmation("error", base=before, head=last, note=f"the gate could not "
                                                                  f"check it: {exc}")


def check_repository(results: Results, repo: Path) -> None:
    """``--confirm``'s one-line errors: :obj:`repo` must be the git
    repository whose commits the results are of."""
    if results.order != "git":
        import subprocess
        missing = next((c for c in results.commits if subprocess.run(
            ["git", "-C", str(repo), "cat-file", "-e", f"{c}^{{commit}}"],
            capture_output=True).returncode != 0), results.commits[0])
        raise GnnperfError(f"--confirm: commit {missing[:12]} of the results is not in --repo "
                           f"{repo}; point --repo at the git repository asv ran on")


# ------------------------------------------------------------------ the report

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


def verdict(alert: Alert, failing: list[Alert]) -> str:
    """An alert's word in the report: ``REGRESSION`` (it fails),
    ``unconfirmed`` (the gate did not see it), ``inconclusive`` (a rise past
    the threshold whose interval reaches no change), ``regression`` (one
    that does not fail: before ``--recent``), or ``change``."""
    if alert in failing:
        return "REGRESSION"
    if alert.confirmation is not None and alert.confirmation.state == "unconfirmed":
        return "unconfirmed"
    if alert.regression and not alert.conclusive:
        return "inconclusive"
    return "regression" if alert.regression else "change"


def _reading(r: GateCase) -> str:
    if r.ratio is None:
        time = r.verdict
    else:
        time = (f"time ratio {r.ratio:.3f} [{r.ci_low:.3f}, {r.ci_high:.3f}] p "
                f"{r.p_slower:.2g}, {r.pairs} pairs: {r.verdict}")
    work = "; work metrics changed: " + ", ".join(f"{m} {a} -> {b}" for m, a, b in r.work) \
        if r.work else ""
    ops = "; ATen ops changed: " + ", ".join(f"{op} {a} -> {b}" for op, a, b in r.ops) \
        if r.ops else ""
    return f"{r.case}: {time}{work}{ops}"


def _gap_line(results: Results, gap: Gap) -> str:
    n = len(results.commits)
    rank = {c: i for i, c in enumerate(results.commits)}
    at = ", ".join(f"{c[:10]} (commit {rank[c] + 1} of {n})" for c in gap.commits[:5]) \
        + (f" and {len(gap.commits) - 5} more" if len(gap.commits) > 5 else "")
    why = ("the benchmark raised (the history figure's environment guard names a background "
           "thread or a global mode it found) or its environment did not build: asv run "
           "--show-stderr at one of them says which")
    if gap.current:
        return (f"FAILED: {gap.series.name} has no value at its newest commits: asv recorded "
                f"a failure at {at}, and no value after ({why})")
    return f"gap: {gap.series.name}: asv recorded a failure at {at} ({why})"


def _summary(failing: list[Alert], gaps: list[Gap], threshold: float) -> str:
    n_reg, n_gap = len(failing), sum(g.current for g in gaps)
    parts = [f"{n_reg} regression{'s' if n_reg != 1 else ''} past {threshold:+.0%}"
             if n_reg else f"no regression past {threshold:+.0%}"]
    if n_gap:
        parts.append(f"{n_gap} series failing at {'its' if n_gap == 1 else 'their'} newest "
                     f"commits")
    return "; ".join(parts)


def format_text(results: Results, alerts: list[Alert], short: list[tuple[Series, str]],
                header: str, failing: list[Alert], threshold: float,
                gaps: Sequence[Gap] = ()) -> str:
    """What ``gnnperf history`` prints: one block per commit where something
    changed, the series in it largest change first, then the gate's word on
    it (``--confirm``); then the gaps."""
    lines = [header]
    for a in alerts:
        label = verdict(a, failing)
        lines.append(f"{label} at {_where(results, a)}")
        for m in a.moved:
            lines.append(f"  {_size(m.change)}  {m.series.name}  "
                         f"{m.change.before:.4g} -> {m.change.after:.4g}")
        for name, before, after, at in a.work:
            lines.append(f"  work metric moved: {name} {before:.6g} -> {after:.6g} at {at[:10]}")
        if a.regression and not a.conclusive:
            lines.append(f"  inconclusive: its 95% interval reaches no change (1.0); not a "
                         f"failing regression (gnnperf gate on the commit, or more commits "
                         f"after it, decide it)")
        c = a.confirmation
        if c is not None:
            where = (f"at {c.culprit[:10]} \"{c.subject}\" against {c.base[:10]}" if c.culprit
                     else f"across {c.base[:10]}..{c.head[:10]}" if c.base else "")
            state = {"error": "not checked"}.get(c.state, c.state)
            lines.append(f"  {state} by the gate{' ' + where if where else ''}: {c.note}")
            for r in c.cases:
                lines.append(f"    {_reading(r)}")
            if c.command:
                lines.append(f"    reproduce: {c.command}")
            if c.search:
                lines.append(f"    found by: {c.search}")
    for gap in gaps:
        lines.append(_gap_line(results, gap))
    for s, why in short:
        lines.append(f"not judged: {s.name} ({why})")
    lines.append(_summary(failing, list(gaps), threshold))
    return "\n".join(lines)


def format_issue(results: Results, alert: Alert) -> str:
    """An issue's Markdown for one confirmed alert: the culprit, the gate's
    ratio and interval, the ops that changed, the command that reproduces it."""
    c = alert.confirmation
    top = alert.moved[0]
    title = (f"{_pct(top.change.ratio)} at `{c.culprit[:10]}` {c.subject}" if c.culprit
             else f"{_pct(top.change.ratio)} over `{c.base[:10]}..{c.head[:10]}` (a drift)")
    lines = [f"### Confirmed regression: {title}", ""]
    if c.culprit:
        lines.append(f"* **Culprit**: `{c.culprit}` {c.subject} (parent `{c.base}`)")
    else:
        lines.append(f"* **Span**: `{c.base}`..`{c.head}`, no one commit carries it alone")
    lines.append(f"* **History**: `{top.series.name}` {_size(top.change)}, "
                 f"{top.change.before:.4g} &rarr; {top.change.after:.4g} at "
                 f"{_where(results, alert)}")
    for r in c.cases:
        if r.ratio is not None:
            lines.append(f"* **Gate** `{r.case}`: time ratio {r.ratio:.3f}, 95% interval "
                         f"[{r.ci_low:.3f}, {r.ci_high:.3f}], p {r.p_slower:.2g} "
                         f"({r.pairs} process pairs): {r.verdict}")
        else:
            lines.append(f"* **Gate** `{r.case}`: {r.verdict}")
        if r.work:
            lines.append("* **Work metrics changed**: " + ", ".join(
                f"`{m}` {a} &rarr; {b}" for m, a, b in r.work))
        if r.ops:
            lines.append("* **ATen ops changed**: " + ", ".join(
                f"`{op}` {a} &rarr; {b}" for op, a, b in r.ops))
    lines += ["* **Reproduce**:", "", "  ```bash", f"  {c.command}", "  ```"]
    if c.search:
        lines += ["", f"  Found by `{c.search}`."]
    return "\n".join(lines) + "\n"


def format_markdown(results: Results, alerts: list[Alert], short: list[tuple[Series, str]],
                    header: str, failing: list[Alert], threshold: float,
                    gaps: Sequence[Gap] = ()) -> str:
    """The reviewer's Markdown: with ``--confirm``, an issue-ready section
    per confirmed alert (:func:`format_issue`) first; then a table row per
    series that moved, grouped by commit, and the gaps."""
    lines = ["### gnnperf history", "", header, ""]
    confirmed = [a for a in alerts if a.confirmation is not None and a.confirmation.confirmed]
    if any(a.confirmation is not None for a in alerts):
        lines += [format_issue(results, a) for a in confirmed] or \
            ["No alert was confirmed by the gate.", ""]
    if alerts:
        lines += ["| commit | verdict | series | change [95% interval] | before &rarr; after | "
                  "work metrics moved |", "|---|---|---|---|---|---|"]
    for a in alerts:
        label = verdict(a, failing)
        label = f"**{label}**" if label == "REGRESSION" else label
        work = "<br>".join(f"`{n}` {b:.6g}&rarr;{f:.6g}" for n, b, f, _ in a.work) or ""
        for i, m in enumerate(a.moved):
            lines.append(f"| {'`' + _where(results, a) + '`' if i == 0 else ''} | "
                         f"{label if i == 0 else ''} | `{m.series.name}` | {_size(m.change)} | "
                         f"{m.change.before:.4g} &rarr; {m.change.after:.4g} | "
                         f"{work if i == 0 else ''} |")
    for gap in gaps:
        lines.append(f"\n{_gap_line(results, gap)}")
    for s, why in short:
        lines.append(f"\nNot judged: `{s.name}` ({why})")
    lines.append("")
    summary = _summary(failing, list(gaps), threshold)
    lines.append(f"**{summary}**" if failing or any(g.current for g in gaps)
                 else f"{summary[0].upper()}{summary[1:]}.")
    return "\n".join(lines) + "\n"


def to_dict(results: Results, alerts: list[Alert], short: list[tuple[Series, str]],
            failing: list[Alert], settings: dict, gaps: Sequence[Gap] = ()) -> dict:
    """The ``--json`` document."""
    from dataclasses import asdict

    def finite(x: float) -> float | None:
        return x if math.isfinite(x) else None
    return {
        "machine": results.machine, "order": results.order, "commits": len(results.commits),
        "dropped_for_version": results.dropped, **settings,
        "changes": [{
            "commit": a.commit, "end_commit": a.end_commit, "position": a.position,
            "date": _date(results, a.commit), "regression": a.regression,
            "conclusive": a.conclusive, "verdict": verdict(a, failing),
            "fails": a in failing,
            "series": [{"name": m.series.name, "benchmark": m.series.benchmark,
                        "params": m.series.params, "ratio": finite(m.change.ratio),
                        "ci_low": finite(m.change.ci_low), "ci_high": finite(m.change.ci_high),
                        "pvalue": m.change.pvalue, "before": m.change.before,
                        "after": m.change.after, "regression": m.regression,
                        "conclusive": m.conclusive,
                        "steps": [m.series.commits[i] for i in m.change.steps]}
                       for m in a.moved],
            "work": [{"name": n, "before": b, "after": f, "commit": c} for n, b, f, c in a.work],
            "confirmation": asdict(a.confirmation) if a.confirmation is not None else None,
        } for a in alerts],
        "gaps": [{"name": g.series.name, "failed": g.commits, "current": g.current}
                 for g in gaps],
        "too_short": [{"name": s.name, "points": len(s.values), "why": why} for s, why in short],
        "regressions": len(failing),
    }


def add_parser(sub) -> None:
    """``gnnperf history``'s options (registered by :mod:`gnnperf.cli`)."""
    from gnnperf.cli_help import command_parser
    parser = command_parser(
        sub, "history", history_command, help="change points across asv's results: steps and slow drifts, "
                             "commit by commit",
        description="Reads asv's results folder (one machine), orders the commits as asv "
                    "publish does (git rev-list --all --date-order; by date where the "
                    "commits are not in --repo) and finds the changes in each series (a "
                    "benchmark at one parameter combination) with a change-point detector; "
                    "a drift over a few commits is one change. Each change names its first "
                    "commit, its size with a 95% interval, the series that moved with it "
                    "and the exact work metrics (track_aten_ops, ...) that changed there. "
                    "A rise whose interval reaches no change is inconclusive and never "
                    "fails; with --confirm, the gate at the commit decides each rise that "
                    "would fail.")
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
                        help="a rise past this fraction, its 95%% interval leaving out no "
                             "change, is a regression that fails (default: %(default)s, the "
                             "gate's)")
    parser.add_argument("--recent", type=int,
                        help="only regressions starting in the last N commits fail "
                             "(all are reported)")
    parser.add_argument("--repo", type=Path, default=Path("."),
                        help="the git repository whose commits the results are of: their "
                             "order, and --confirm's trees (default: here)")
    parser.add_argument("--merge-within", type=int, default=MERGE_WITHIN,
                        help="same-direction changes fewer commits apart than this are one "
                             "drift (default: %(default)s)")
    parser.add_argument("--json", type=Path, help="write the changes here")
    parser.add_argument("--markdown", type=Path,
                        help="write the reviewer's Markdown here (e.g. $GITHUB_STEP_SUMMARY): "
                             "with --confirm, an issue-ready section per confirmed regression "
                             "(culprit, the gate's ratio and interval, ATen ops, the command), "
                             "then the table")
    confirm = parser.add_argument_group(
        "confirmation", "--confirm runs gnnperf gate on each regression that would fail: the "
                        "commit against its parent (gnnperf bisect first where the change "
                        "spans several commits); one the gate does not see is 'unconfirmed' "
                        "and does not fail")
    confirm.add_argument("--confirm", action="store_true",
                         help="confirm each failing regression with the gate before it fails")
    confirm.add_argument("--processes", type=int, default=6,
                         help="the gate's worker pairs (default: %(default)s)")
    confirm.add_argument("--max-processes", type=int,
                         help="the gate's adaptive budget (default: 3 x --processes)")
    confirm.add_argument("--rounds", type=int, default=30,
                         help="the gate's interleaved rounds per pair (default: %(default)s)")


def history_command(args: argparse.Namespace) -> int:
    """``gnnperf history``: 0 no regression, 1 a regression past the
    threshold (with ``--confirm``, one the gate confirmed or could not
    check) or a series that fails at its newest commits, 2 bad input (a
    :class:`GnnperfError`, one line)."""
    import json
    from gnnperf.io import check_output, write_atomic
    check_output(args.json, "--json")
    check_output(args.markdown, "--markdown")
    if args.threshold < 0:
        raise GnnperfError(f"--threshold must be >= 0, got {args.threshold}")
    if args.recent is not None and args.recent < 1:
        raise GnnperfError(f"--recent must be >= 1, got {args.recent}")
    if args.confirm and (args.processes < 3 or args.rounds < 3):
        raise GnnperfError("--confirm needs --processes >= 3 (the t-test's replicates) and "
                           "--rounds >= 3")
    results = read_asv_results(args.results, args.machine, args.repo)
    if args.confirm:
        check_repository(results, args.repo)
    alerts, short, matched = analyse(results, args.bench, method=args.method,
                                     threshold=args.threshold, merge_within=args.merge_within)
    gaps = find_gaps(results, select(results, args.bench))
    if short and len(short) == matched and not gaps:  # nothing judged: never "no change"
        s, why = max(short, key=lambda x: len(x[0].values))
        if len(s.values) >= MIN_POINTS:  # long enough, but not a figure a ratio applies to
            raise GnnperfError(f"no series matching '{args.bench}' can be judged: {s.name}: "
                               f"{why}")
        raise GnnperfError(
            f"history too short: {len(short)} series matching '{args.bench}', the longest "
            f"{len(s.values)} commits ({s.name}); the {args.method} detector needs at least "
            f"{MIN_POINTS}: run asv on more commits (e.g. asv run HEAD~{MIN_POINTS}..HEAD)")
    first = len(results.commits) - args.recent if args.recent else 0
    # A rise whose own interval reaches no change may be noise: never a failure.
    failing = [a for a in alerts if a.conclusive and a.position >= first]
    header = (f"machine {results.machine}: {len(results.commits)} commits ({results.order} order), "
              f"series matching '{args.bench}', detector {args.method}: "
              f"{DETECTORS[args.method][1]}"
              + (f"; {results.dropped} points of older benchmark versions left out"
                 if results.dropped else ""))
    if args.confirm:
        options = ConfirmOptions(args.repo.resolve(), args.processes, args.max_processes,
                                 args.rounds, args.threshold)

        def log(msg: str) -> None:
            print(msg, file=sys.stderr, flush=True)
        if not failing:
            log("--confirm: nothing to confirm (no regression that would fail)")
        for a in failing:
            a.confirmation = confirm_alert(a, results, options, log)
        # The gate's "no" clears an alert; its "could not run" does not.
        failing = [a for a in failing if a.confirmation.state != "unconfirmed"]
    print(format_text(results, alerts, short, header, failing, args.threshold, gaps))
    if args.markdown:
        write_atomic(args.markdown, format_markdown(results, alerts, short, header, failing,
                                                    args.threshold, gaps).encode())
    if args.json:
        settings = {"bench": args.bench, "method": args.method, "threshold": args.threshold,
                    "recent": args.recent, "merge_within": args.merge_within,
                    "confirm": args.confirm}
        write_atomic(args.json, json.dumps(to_dict(results, alerts, short, failing, settings,
                                                   gaps), indent=2).encode())
    return 1 if failing or any(g.current for g in gaps) else 0
