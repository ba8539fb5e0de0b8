"""torch.compile of the model, counting graphs, graph breaks and recompiles."""
from __future__ import annotations

import torch

from gnnperf.variants.base import Technique, TrainingRun


def _dynamo_counts() -> tuple[int, int]:
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


class Compiled(Technique):
    """Wraps the forward in :func:`torch.compile`; dynamic shapes when the
    batches vary in size (sampled), so it compiles once instead of
    recompiling per batch and falling back to eager."""
    name = "compiled"
    order = 90  # wraps whatever the other techniques set up

    def apply(self, run: TrainingRun) -> None:
        run.compile_counter = CompileCounter()
        run.forward = torch.compile(run.model, dynamic=run.dynamic_shapes)
