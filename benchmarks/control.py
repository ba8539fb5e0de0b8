"""Controls: figures every other benchmark includes, to subtract from them."""
from __future__ import annotations

from . import common


class Control(common.Benchmark):
    """asv's ``peakmem_`` is the whole process's RSS high-water mark: Python,
    torch, torch-geometric and gnnperf imports included. This no-op reports
    that floor; a step's own peak is ``peakmem_train_step - peakmem_noop``
    (minus the dataset, which the step benchmarks also hold)."""

    def peakmem_noop(self):
        pass
