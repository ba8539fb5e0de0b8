"""What ``gnnperf history`` reports: the series a pattern selects, their
changes gathered into alerts (everything that moved at one commit, with the
exact work metrics that moved there), the gaps where asv recorded a
failure, and the record of the gate's word on an alert
(:class:`Confirmation`, filled in by :mod:`gnnperf.history.confirm`). A
rise whose own interval reaches no change is inconclusive, never a failing
regression.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from gnnperf.errors import GnnperfError
from gnnperf.history.asv_results import Results, Series
from gnnperf.history.detect import Change, NotJudged, find_changes

#: The detector ``gnnperf history`` runs unless told otherwise, chosen by
#: the operating curve of tools/history_study.py (docs/results.md, "Finding a
#: change in an asv history").
DEFAULT_METHOD = "ruptures"
#: The series judged by default: the suite's history figure, a step's time
#: over a reference step's timed in the same process, where the machine's
#: speed cancels. On a shared machine the raw ``time_`` values of identical
#: commits spread past a 5% step (docs/results.md, "A ramp in a scratch
#: history"); ``--bench '\.time_'`` judges them on a quiet runner.
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
    (:func:`~gnnperf.history.confirm.confirm_alert`).

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
    """Every change of an exact count, no detector needed.

    Args:
        series: an exact work metric's series (:attr:`Series.exact`).

    Returns:
        A step at each commit whose value differs from the one before.
    """
    out = []
    for i in range(1, len(series.values)):
        a, b = series.values[i - 1], series.values[i]
        if a != b:
            ratio = b / a if a else math.inf
            out.append(Change(i, i, ratio, ratio, ratio, 0.0, a, b, [i]))
    return out


def select(results: Results, pattern: str) -> list[Series]:
    """The series ``--bench`` picks.

    Args:
        results: one machine's results.
        pattern: a regular expression, searched in each series' name.

    Returns:
        The series whose name matches.

    Raises:
        GnnperfError: the pattern is no regular expression or matches no
            series (naming the fix).
    """
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
    """The gaps where asv recorded a failure.

    Args:
        results: one machine's results.
        chosen: the series judged (:func:`select`).

    Returns:
        A gap for each series of :obj:`chosen` with a failure, in name order.
    """
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
    """The changes of the series a pattern selects, gathered commit by
    commit. A change is a regression when its ratio is past 1 + threshold
    (:attr:`Alert.conclusive` when its interval also leaves out no change).

    Args:
        results: one machine's results.
        pattern: a regular expression searched in each series' name
            (:func:`select`).
        method: the detector (a key of
            :data:`~gnnperf.history.detect.DETECTORS`).
        threshold: a rise past this fraction is a regression.
        **options: :func:`~gnnperf.history.detect.find_changes`' other
            options (``merge_within``, the detector's).

    Returns:
        The alerts, oldest first; the series not judged, each with why; how
        many series matched.

    Raises:
        GnnperfError: the pattern is no regular expression or matches
            nothing, or the detector is not installed.
    """
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


__all__ = ["Alert", "Confirmation", "DEFAULT_BENCH", "DEFAULT_METHOD", "GateCase", "Gap", "Moved",
           "analyse", "exact_changes", "find_gaps", "select"]
