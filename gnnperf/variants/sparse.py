"""Sparse-adjacency aggregation: the normalised graph as a CSR matrix, so each
layer aggregates with one sparse-dense product instead of gathering a message
per edge."""
from __future__ import annotations

from torch import Tensor

from gnnperf.models import FIXED_AGGREGATION, SparseAdjacency
from gnnperf.variants.base import Technique, TrainingRun


def to_sparse_adjacency(edge_index: Tensor, edge_weight: Tensor | None, num_targets: int,
                        num_sources: int) -> tuple[SparseAdjacency, None]:
    """The transposed adjacency (targets x sources) that each layer multiplies
    with the node features, with its transpose built once for the backward
    pass (:class:`~gnnperf.models.SparseAdjacency`)."""
    return SparseAdjacency.from_edges(edge_index, edge_weight, num_targets, num_sources), None


class Sparse(Technique):
    """Replaces :obj:`edge_index` by a CSR adjacency
    (:class:`~gnnperf.models.SparseAdjacency`): a step no longer materialises
    per-edge message tensors (the peak of the edge-list path), and the layers
    skip PyG's ``propagate``. Held as plain index tensors and multiplied by a
    ``torch.library`` custom op, so ``torch.compile`` traces the whole model."""
    name = "sparse"
    order = 11  # only sets a hook: placed after sampled for the name's sake
    # GCN's normalised adjacency, SAGE's row-normalised one, GIN's plain one.
    needs_model = (FIXED_AGGREGATION,)

    def apply(self, run: TrainingRun) -> None:
        run.graph_transform = to_sparse_adjacency
