"""The time gate's statistics: interleaved samples per process pair, the
pair as the unit of replication, and the decision rule."""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from gnnperf.measure.spread import relative_iqr


@dataclass
class TimeSamples:
    """Seconds per step: ``a[p][r]`` (base) and ``b[p][r]`` (head) for pair p,
    round r, on the gate's clock; ``a_other``/``b_other`` on the other clock."""
    case: str
    steps: int
    clock: str = "cpu"
    a: list[list[float]] = field(default_factory=list)
    b: list[list[float]] = field(default_factory=list)
    a_other: list[list[float]] = field(default_factory=list)
    b_other: list[list[float]] = field(default_factory=list)


@dataclass
class Verdict:
    """The time gate's decision on one benchmark: medians and spreads of
    the per-step samples, the ratio head/base with its 95% interval, the
    one-sided p-values and the verdict (``REGRESSION``, ``improvement``,
    ``inconclusive`` or ``same``)."""
    case: str
    base_median_s: float
    head_median_s: float
    base_spread: float
    head_spread: float
    ratio: float
    ci_low: float
    ci_high: float
    p_slower: float
    p_faster: float
    verdict: str
    pairs: int = 0  # the process pairs it was decided on


def pair_log_ratios(a: list[list[float]], b: list[list[float]]) -> list[list[float]]:
    """log(B/A) of each round of each pair."""
    return [[math.log(y / x) for x, y in zip(ra, rb)] for ra, rb in zip(a, b)]


def _iqm(values, axis=-1):
    """Interquartile mean (the mean of the middle half) along :obj:`axis`:
    nearly as efficient as the mean on normal noise, as robust as the median
    to the long right tail that preemption gives step times."""
    import numpy as np

    values = np.sort(np.asarray(values, dtype=float), axis=axis)
    n = values.shape[axis]
    lo, hi = n // 4, n - n // 4
    return np.take(values, range(lo, hi), axis=axis).mean(axis=axis)


def pair_test(log_ratios: list[list[float]]) -> tuple[float, float, float, float, float]:
    """One-sample t-test across pairs of each pair's interquartile-mean log
    ratio: the process pair is the unit of replication, so an offset that a
    worker process carries through all its rounds (memory layout, large
    beside a regression on Cora-sized steps) counts as noise, not as signal.
    Returns (estimate, p_slower, p_faster, ci_low, ci_high) in log space."""
    try:
        from scipy import stats
    except ImportError:
        from gnnperf.errors import GnnperfError
        raise GnnperfError("the time gate's t-test needs scipy (a base dependency of gnnperf): pip install scipy") from None

    estimates = [float(_iqm(rounds)) for rounds in log_ratios]
    mean = statistics.fmean(estimates)
    dof = len(estimates) - 1
    se = statistics.stdev(estimates) / math.sqrt(len(estimates))
    if se == 0.0:
        return mean, float(mean <= 0), float(mean >= 0), mean, mean
    t = mean / se
    half = stats.t.ppf(0.975, dof) * se
    return (mean, float(stats.t.sf(t, dof)), float(stats.t.cdf(t, dof)),
            mean - half, mean + half)


def decide(samples: TimeSamples, threshold: float, alpha: float) -> Verdict:
    """Verdict of one benchmark: ``REGRESSION`` when the ratio exceeds
    ``1 + threshold`` and the one-sided p-value of :func:`pair_test` is below
    :obj:`alpha`; ``improvement`` symmetrically; ``inconclusive`` when
    neither holds but the 95% interval still reaches past the threshold
    (:func:`inconclusive`: these pairs cannot tell "no change" from a change
    not yet significant); else ``same``."""
    logs = pair_log_ratios(samples.a, samples.b)
    center, p_slower, p_faster, lo, hi = pair_test(logs)
    ratio = math.exp(center)
    verdict = judge(ratio, p_slower, p_faster, threshold, alpha)
    if inconclusive(ratio, p_slower, p_faster, math.exp(lo), math.exp(hi), threshold, alpha):
        verdict = "inconclusive"
    flat_a = [t for rounds in samples.a for t in rounds]
    flat_b = [t for rounds in samples.b for t in rounds]
    return Verdict(samples.case, statistics.median(flat_a), statistics.median(flat_b), relative_iqr(flat_a),
                   relative_iqr(flat_b), ratio, math.exp(lo), math.exp(hi), p_slower, p_faster,
                   verdict, len(samples.a))


def adaptive_budget(processes: int, max_processes: int | None) -> int:
    """Process pairs a verdict may take at most: :obj:`max_processes`, by
    default three times the planned :obj:`processes`."""
    return max_processes if max_processes is not None else 3 * processes


def inconclusive(ratio: float, p_slower: float, p_faster: float, ci_low: float,
                 ci_high: float, threshold: float, alpha: float) -> bool:
    """The adaptive rule's trigger: the verdict is "same" but its 95%
    interval still reaches past the threshold (either way), so the pairs so
    far cannot tell "no regression" from "a regression not yet significant".
    That covers a ratio past the threshold with p not below alpha, and a
    ratio inside it whose interval is wide: under load, a true slowdown near
    the threshold can read well below it on a few pairs and near its true
    size with more."""
    if judge(ratio, p_slower, p_faster, threshold, alpha) != "same":
        return False
    return ci_high > 1 + threshold or ci_low < 1 / (1 + threshold)


def adaptive_test(log_ratios: list[list[float]], processes: int, budget: int,
                  threshold: float, alpha: float) -> tuple[float, float, float, int, bool]:
    """The adaptive gate replayed on pairs measured in order: the first
    :obj:`processes` pairs, then one more while :func:`inconclusive`, up to
    :obj:`budget` (or the pairs there are). Returns (ratio, p_slower,
    p_faster, pairs used, still inconclusive there)."""
    last = min(budget, len(log_ratios))
    n = min(processes, last)
    while True:
        center, p_slower, p_faster, lo, hi = pair_test(log_ratios[:n])
        ratio = math.exp(center)
        still = inconclusive(ratio, p_slower, p_faster, math.exp(lo), math.exp(hi), threshold,
                             alpha)
        if n >= last or not still:
            return ratio, p_slower, p_faster, n, still
        n += 1


def judge(ratio: float, p_slower: float, p_faster: float, threshold: float,
          alpha: float) -> str:
    """The decision rule: a minimum effect and a significance level."""
    if ratio > 1 + threshold and p_slower < alpha:
        return "REGRESSION"
    if ratio < 1 / (1 + threshold) and p_faster < alpha:
        return "improvement"
    return "same"
