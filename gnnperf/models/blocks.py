"""What every built-in model shares: layers as blocks (dropout, a conv that
projects the features first and then aggregates, an optional ReLU), so that
activation checkpointing wraps a block whole, a trimmed layer aggregates into
its target rows only, and sparse input features enter through one sparse
product with the first conv's projection weight."""
from __future__ import annotations

from typing import NamedTuple, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.utils.checkpoint import checkpoint
from torch_geometric.typing import Adj, OptTensor

from gnnperf.errors import GnnperfError
from gnnperf.models.kernels import SparseAdjacency, SparseFeatures, _SparseInputLinear, dropout


class LayerGraph(NamedTuple):
    """The graph one layer reads: messages into its first :obj:`num_targets`
    rows from its first :obj:`num_sources` rows (trimmed sampled training)."""
    graph: Adj
    edge_weight: OptTensor
    num_sources: int
    num_targets: int


def check_sizes(model: str, in_channels: int, hidden_channels: int, out_channels: int,
                num_layers: int, dropout_p: float) -> None:
    if num_layers < 1 or hidden_channels < 1 or in_channels < 1 or out_channels < 1:
        raise GnnperfError(f"{model} sizes must be positive (layers={num_layers}, "
                           f"hidden={hidden_channels})")
    if not 0.0 <= dropout_p < 1.0:
        raise GnnperfError(f"dropout must be in [0, 1), got {dropout_p}")


def layer_widths(in_channels: int, hidden_channels: int, out_channels: int,
                 num_layers: int) -> list[int]:
    return [in_channels] + [hidden_channels] * (num_layers - 1) + [out_channels]


def target_size(h: Tensor, num_targets: int | None) -> tuple[int, int] | None:
    """PyG's ``size`` of a layer aggregating into its first :obj:`num_targets` rows."""
    return None if num_targets is None else (h.size(0), num_targets)


class Block(torch.nn.Module):
    r"""Dropout, a conv and an optional ReLU: the unit activation
    checkpointing recomputes, so that dropout and ReLU outputs are not saved
    either.

    The conv has a linear projection :obj:`lin` applied first (every
    built-in conv is linear in its input before it aggregates) and
    :obj:`aggregate_projected(h, graph, edge_weight, num_targets)` for the
    rest, so sparse input features (:class:`SparseFeatures`) enter as one
    sparse product with :obj:`lin.weight`, dropout on their stored values only.
    """

    def __init__(self, conv: torch.nn.Module, dropout: float, activate: bool) -> None:
        super().__init__()
        self.dropout = dropout
        self.activate = activate
        self.conv = conv

    def forward(self, x: Tensor | SparseFeatures, edge_index: Adj | SparseAdjacency,
                edge_weight: OptTensor = None, num_targets: int | None = None) -> Tensor:
        if isinstance(x, SparseFeatures):  # dropout on the stored values, a sparse product
            values = dropout(x.values, self.dropout, self.training)
            h = _SparseInputLinear.apply(values, self.conv.lin.weight, x)
        else:
            h = self.conv.lin(dropout(x, self.dropout, self.training))
        x = self.conv.aggregate_projected(h, edge_index, edge_weight, num_targets)
        return F.relu(x) if self.activate else x


class BlockGNN(torch.nn.Module):
    r"""A stack of :class:`Block` layers, what the techniques reshape.

    The forward pass takes node features and the graph the model's
    :attr:`~gnnperf.models.ModelSpec.prepare_graph` made (an
    :obj:`edge_index` with optional :obj:`edge_weight`, or a sparse adjacency
    with the weights as values), or one :class:`LayerGraph` per layer as
    :obj:`layers` for trimmed training.

    Args:
        blocks (list[Block]): The layers, input first.
        checkpoint (bool): Recompute each block's activations in the backward
            pass instead of saving them. (default: :obj:`False`)
    """

    def __init__(self, blocks: Sequence[Block], checkpoint: bool = False) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList(blocks)
        self.checkpoint = checkpoint

    @property
    def num_layers(self) -> int:
        return len(self.blocks)

    def forward(self, x: Tensor, edge_index: Adj | None = None, edge_weight: OptTensor = None,
                layers: Sequence[LayerGraph] | None = None) -> Tensor:
        num_targets = None
        for i, block in enumerate(self.blocks):
            if layers is not None:
                edge_index, edge_weight, num_sources, num_targets = layers[i]
                x = x[:num_sources]
            if self.checkpoint and self.training and torch.is_grad_enabled():
                x = checkpoint(block, x, edge_index, edge_weight, num_targets,
                               use_reentrant=False)
            else:
                x = block(x, edge_index, edge_weight, num_targets)
        return x
