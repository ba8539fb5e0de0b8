"""Cost growth with graph size: step time and peak memory on synthetic graphs
of about 10^4 .. 10^7 edges (``quick``: 10^4 and 10^5), so the report shows
whether cost per edge stays flat, and the fitted growth exponent per variant
(``time ~ edges^k``): a k that rises is a regression even where each size
alone is within noise."""
from __future__ import annotations

import statistics

from . import base, caches, profiles, suite
from .profiles import PROFILE

_VARIANTS = profiles.scaling_variants()


class _PerSize(base.Benchmark):
    params = [list(PROFILE.scaling), _VARIANTS]
    param_names = ["edges", "variant"]
    setup_cache = caches.scaling_graphs_cache
    timeout = 1200


class ScalingStep(_PerSize):
    number = 1
    repeat = PROFILE.repeat
    rounds = PROFILE.rounds
    warmup_time = 0.0

    def make(self, cache, edges, variant):
        self.prep = caches.prepared(cache, edges, variant, warm=True)

    def time_step(self, cache, edges, variant):
        self.prep.synced_step()


class ScalingMemory(_PerSize):
    """The process's RSS high-water mark over one epoch's steps (on a GPU
    runner the host side only: :class:`ScalingCudaMemory` is the device's)."""

    def make(self, cache, edges, variant):
        self.prep = caches.prepared(cache, edges, variant, warm=False)

    def peakmem_step(self, cache, edges, variant):
        for _ in range(len(self.prep.batches)):
            self.prep.synced_step()


class ScalingCudaMemory(_PerSize, base._CudaStepPeak):
    """The device's peak of one warm step at each size (see ``base._CudaStepPeak``)."""


def growth_exponent(sizes: list[float], seconds: list[float]) -> float:
    r"""The :math:`k` of :math:`t \propto E^k` that fits :obj:`seconds` at
    :obj:`sizes` best (least squares of :math:`\log t` on :math:`\log E`):
    1 for cost linear in the edges, 2 for an accidental quadratic one."""
    import math
    if len(sizes) != len(seconds) or len(set(sizes)) < 2:
        raise ValueError(f"a growth exponent needs times at two sizes or more, got {sizes}")
    if min(sizes) <= 0 or min(seconds) <= 0:
        raise ValueError("sizes and times must be positive")
    xs, ys = [math.log(v) for v in sizes], [math.log(v) for v in seconds]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    return (sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys))
            / sum((x - mean_x) ** 2 for x in xs))


# Timed steps per size for the exponent (after the prepared warm-up epoch);
# the median of them is each size's time.
EXPONENT_STEPS = 5 if PROFILE.name == "quick" else 21


def exponent_cache(self):
    """Each variant's median step time at every scaling size, and the
    exponent fitted over them (one process, the sizes one after another)."""
    graphs = caches.scaling_graphs_cache(self)
    figures = {}
    for variant in _VARIANTS:
        def measure():
            sizes, seconds = [], []
            for key in PROFILE.scaling:
                prep = caches.prepared(graphs, key, variant, warm=True)
                times = [prep.timed_steps(1).wall for _ in range(EXPONENT_STEPS)]
                sizes.append(caches.dataset(graphs, key).edge_index.size(1))
                seconds.append(statistics.median(times))
            return {"exponent": growth_exponent(sizes, seconds),
                    "sizes": sizes, "seconds": seconds}
        figures[(variant,)] = suite.measured_or_reason(measure)
    return figures


exponent_cache.timeout = 1200


class ScalingExponent(base.CachedFigures):
    """The fitted growth exponent of the step time over the scaling sizes."""
    params = [_VARIANTS]
    param_names = ["variant"]
    setup_cache = exponent_cache
    timeout = 1200

    def track_time_exponent(self, cache, variant):
        """k of step time ~ edges^k (1: linear in the edges; higher is worse)."""
        return self.figure("exponent")

    track_time_exponent.unit = "exponent"
