"""Cost growth with graph size: step time and peak memory on synthetic graphs
of about 10^4 .. 10^7 edges (``quick``: 10^4 and 10^5), so the report shows
whether cost per edge stays flat, and the fitted growth exponent per variant
(``time ~ edges^k``): a k that rises is a regression even where each size
alone is within noise."""
from __future__ import annotations

import statistics
import time

from . import common
from .common import PROFILE

_VARIANTS = common.scaling_variants()


class _PerSize(common.Benchmark):
    params = [list(PROFILE.scaling), _VARIANTS]
    param_names = ["edges", "variant"]
    setup_cache = common.scaling_graphs_cache
    timeout = 1200


class ScalingStep(_PerSize):
    number = 1
    repeat = PROFILE.repeat
    rounds = PROFILE.rounds
    warmup_time = 0.0

    def make(self, cache, edges, variant):
        self.prep = common.prepared(cache, edges, variant, warm=True)

    def time_step(self, cache, edges, variant):
        self.prep.synced_step()


class ScalingMemory(_PerSize):
    """The process's RSS high-water mark over one epoch's steps (on a GPU
    runner the host side only: :class:`ScalingCudaMemory` is the device's)."""

    def make(self, cache, edges, variant):
        self.prep = common.prepared(cache, edges, variant, warm=False)

    def peakmem_step(self, cache, edges, variant):
        for _ in range(len(self.prep.batches)):
            self.prep.synced_step()


class ScalingCudaMemory(_PerSize, common._CudaStepPeak):
    """The device's peak of one warm step at each size (see ``common._CudaStepPeak``)."""


# Timed steps per size for the exponent (after the prepared warm-up epoch);
# the median of them is each size's time.
EXPONENT_STEPS = 5 if PROFILE.name == "quick" else 21


def exponent_cache(self):
    """Each variant's median step time at every scaling size, and the
    exponent fitted over them (one process, the sizes one after another)."""
    graphs = common.scaling_graphs_cache(self)
    figures = {}
    for variant in _VARIANTS:
        def measure():
            sizes, seconds = [], []
            for key in PROFILE.scaling:
                prep = common.prepared(graphs, key, variant, warm=True)
                times = []
                for _ in range(EXPONENT_STEPS):
                    start = time.perf_counter()
                    prep.synced_step()
                    times.append(time.perf_counter() - start)
                prep.check_loss(prep.last_loss, EXPONENT_STEPS)
                sizes.append(common.dataset(graphs, key).edge_index.size(1))
                seconds.append(statistics.median(times))
            return {"exponent": common.growth_exponent(sizes, seconds),
                    "sizes": sizes, "seconds": seconds}
        figures[(variant,)] = common.measured_or_reason(measure)
    return figures


exponent_cache.timeout = 1200


class ScalingExponent(common.CachedFigures):
    """The fitted growth exponent of the step time over the scaling sizes."""
    params = [_VARIANTS]
    param_names = ["variant"]
    setup_cache = exponent_cache
    timeout = 1200

    def track_time_exponent(self, cache, variant):
        """k of step time ~ edges^k (1: linear in the edges; higher is worse)."""
        return self.figure("exponent")

    track_time_exponent.unit = "exponent"
