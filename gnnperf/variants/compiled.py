"""torch.compile of the model, counting graphs, graph breaks and recompiles."""
from __future__ import annotations

import torch

from gnnperf.variants.base import Technique, TrainingRun


def _dynamo_counts() -> tuple[int, int]:
    # Private: torch.compiler has no public graph or graph-break count (only
    # torch._dynamo.explain, which recompiles). Canary:
    # tests/test_workcount.py::test_measure_work_of_a_compiled_variant_has_no_recompiles
    # needs compiled_graphs >= 1 from these counters.
    from torch._dynamo.utils import counters
    return counters["stats"]["unique_graphs"], sum(counters["graph_break"].values())


class CompileCounter:
    """Graphs and graph breaks Dynamo produced since this counter was made
    (Dynamo's own counters, which skip its internal tracing restarts)."""

    def __init__(self) -> None:
        self._graphs_at_start, self._breaks_at_start = _dynamo_counts()

    @property
    def graphs(self) -> int:
        return _dynamo_counts()[0] - self._graphs_at_start

    @property
    def graph_breaks(self) -> int:
        return _dynamo_counts()[1] - self._breaks_at_start


# Inductor settings for CPU runs, each measured on synthetic-1m at hidden 16
# (1 thread; eager 560-610 ms per step):
# - fallback_random: Inductor's CPU random numbers cost about 6x ATen's
#   uniform_ per element, and the input dropout draws 12.8M of them per step
#   (434 -> 342 ms). ATen's generator also gives the eager dropout masks, so
#   the compiled loss curve follows the baseline's.
# - realize_reads_threshold=1: store a pointwise result that several kernels
#   read instead of recomputing it in each. Otherwise the backward recomputes
#   the ReLU and dropout masks inside the edge gather, once per edge (11 per
#   node here) rather than once per node (342 -> 202 ms).
# CUDA keeps Inductor's defaults (its fused Philox RNG is fast there).
CPU_INDUCTOR_OPTIONS = {"fallback_random": True, "realize_reads_threshold": 1}


class Compiled(Technique):
    """Wraps the forward in :func:`torch.compile`; dynamic shapes when the
    batches vary in size (sampled), so it compiles once instead of
    recompiling per batch and falling back to eager."""
    name = "compiled"
    order = 90  # wraps whatever the other techniques set up

    def apply(self, run: TrainingRun) -> None:
        # Dynamo caches compiled frames per code object, not per model: a
        # second run of the same model class in this process would reuse the
        # first one's graphs, and its compile time and graph counts would read
        # as zero. Each compiled run starts from an empty cache.
        torch.compiler.reset()
        run.compile_counter = CompileCounter()
        options = CPU_INDUCTOR_OPTIONS if run.device.type == "cpu" else None
        # The forward as the other techniques left it (the model, or its DDP wrapper).
        run.forward = torch.compile(run.forward, dynamic=run.dynamic_shapes, options=options)
