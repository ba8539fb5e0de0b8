"""Controls: figures every other benchmark includes, to subtract from them."""
from __future__ import annotations

from . import base, compat


class Control(base.Benchmark):
    """asv's ``peakmem_`` is the whole process's RSS high-water mark: Python,
    torch, torch-geometric and gnnperf imports included and, on a GPU
    runner, the CUDA context and library handles (hundreds of MiB of host
    memory), which this no-op also initialises. It reports that floor; a
    step's own host peak is ``peakmem_train_step - peakmem_noop`` (minus the
    dataset, which the step benchmarks also hold). On CUDA, ``peakmem_`` is
    the host side only; the device's figures are the ``track_cuda_peak_mib``
    benchmarks."""

    def make(self, cache):
        compat.warm_device(self.device)

    def peakmem_noop(self):
        pass
