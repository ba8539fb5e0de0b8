"""The spread of timing samples: quartiles and the interquartile range
relative to the median, as the measurement and the gate report it."""
from __future__ import annotations

import statistics
from typing import Sequence


def quartiles(samples: Sequence[float]) -> tuple[float, float, float]:
    """First quartile, median and third quartile (inclusive method: the
    quartiles of the samples themselves, not of a population they came
    from); a single sample is all three."""
    if len(samples) < 2:
        return samples[0], samples[0], samples[0]
    q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return q1, statistics.median(samples), q3


def relative_iqr(samples: Sequence[float]) -> float:
    """Interquartile range relative to the median (0 for fewer than two
    samples or a median of 0)."""
    if len(samples) < 2:
        return 0.0
    q1, median, q3 = quartiles(samples)
    return (q3 - q1) / median if median > 0 else 0.0
