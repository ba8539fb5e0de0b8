"""Cost growth with graph size: step time and peak memory on synthetic graphs
of about 10^4 .. 10^7 edges (``quick``: 10^4 and 10^5), so the report shows
whether cost per edge stays flat."""
from __future__ import annotations

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
