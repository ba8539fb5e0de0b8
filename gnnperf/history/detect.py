"""Change points in one series: the detectors (maintained libraries',
:data:`DETECTORS`), each change point turned into a change with a size, a
95% interval and a p-value, and a drift spread over a few commits merged
into one change (:func:`describe`). The numerical libraries load on first
use: importing this module loads none.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
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
    Fleming et al. 2023).

    Args:
        values: the series, oldest first.
        max_pvalue: the t-test's level for keeping a change point.
        window: E-divisive's window, in points.

    Returns:
        The indices of the first points after each change.
    """
    from otava.analysis import compute_change_points
    points, _ = compute_change_points(list(map(float, values)), window_len=window,
                                      max_pvalue=max_pvalue)
    return sorted(int(cp.index) for cp in points)


def robust_sigma(values: Sequence[float]) -> float:
    """The noise of a series with steps in it: the median absolute first
    difference, scaled to a normal sigma (differences cancel the steps,
    the median ignores spikes).

    Args:
        values: the series.

    Returns:
        The sigma; the standard deviation where the median difference is 0,
        1.0 where that is 0 too.
    """
    import numpy as np
    diffs = np.abs(np.diff(np.asarray(values, dtype=float)))
    sigma = float(np.median(diffs)) * 1.4826 / math.sqrt(2)
    return sigma if sigma > 0 else float(np.std(values)) or 1.0


def detect_ruptures(values: Sequence[float], *, penalty: float = 2.0, cost: str = "l1",
                    min_size: int = 3) -> list[int]:
    """ruptures' PELT (Killick et al. 2012) on log values scaled by their
    robust noise (:func:`robust_sigma`). The l1 cost (a median per segment)
    keeps a single spike from paying for two change points.

    Args:
        values: the series, oldest first, each positive.
        penalty: the penalty is this x log(n) (BIC's form).
        cost: ruptures' cost model.
        min_size: the fewest points of a segment.

    Returns:
        The indices of the first points after each change.
    """
    import ruptures
    logs = _log(values)
    signal = (logs / robust_sigma(logs)).reshape(-1, 1)
    algo = ruptures.Pelt(model=cost, min_size=min_size, jump=1).fit(signal)
    return [int(i) for i in algo.predict(pen=penalty * math.log(len(logs)))[:-1]]


def detect_asv(values: Sequence[float], weights: Sequence[float | None] | None = None, *,
               threshold: float = 0.05) -> list[int]:
    """asv's own detector as ``asv publish`` runs it: the Potts fit
    (:func:`asv.step_detect.detect_steps`) and its regression filter.

    Args:
        values: the series, oldest first.
        weights: asv's weight of each point (2 / the 99% interval's width).
        threshold: the regression filter's threshold (asv.conf.json's).

    Returns:
        The indices of the first point after each upward step asv keeps
        (asv reports regressions only).
    """
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
    """Welch's t-test of two segments on log values.

    Args:
        before: the segment before a change.
        after: the segment after it.

    Returns:
        ``(ratio, low, high, p)``: the ratio of the geometric means
        after/before, its 95% interval and Welch's two-sided p-value.
    """
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
    one direction close together merged into one (a drift), its size from
    the level before its first step to the level after its last.

    Args:
        values: the series, oldest first.
        points: the detector's change points (first indices after each).
        merge_within: same-direction points fewer than this apart are one
            change.

    Returns:
        The changes, oldest first.
    """
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
    """The changes in one series.

    Args:
        values: the series, oldest first.
        weights: asv's weight of each point (the ``asv`` detector's).
        method: the detector, a key of :data:`DETECTORS`.
        merge_within: same-direction change points fewer than this apart
            are one change (:func:`describe`).
        **options: the detector's own options.

    Returns:
        The changes, oldest first.

    Raises:
        HistoryTooShort: fewer than :data:`MIN_POINTS` points.
        NotJudged: a value is no positive finite number (a change is a
            ratio).
        GnnperfError: the detector's library is not installed.
    """
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


__all__ = ["Change", "DETECTORS", "HistoryTooShort", "INSTALL", "MERGE_WITHIN", "MIN_POINTS",
           "NotJudged", "describe", "detect_asv", "detect_otava", "detect_ruptures",
           "find_changes", "robust_sigma", "segment_test"]
