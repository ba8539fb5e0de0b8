"""GraphSAGE (Hamilton et al., 2017) with mean aggregation and a root
weight, as PyG's ``SAGEConv``; the mean is a sum weighted by one over each
target's in-degree, computed once with the graph."""
from __future__ import annotations

import math

import torch
from torch import Tensor
from torch_geometric.nn import Linear, MessagePassing
from torch_geometric.typing import Adj, OptTensor
from torch_geometric.utils import degree

from gnnperf.models.blocks import Block, BlockGNN, check_sizes, layer_widths, target_size
from gnnperf.models.kernels import SparseAdjacency, aggregate


def mean_weights(edge_index: Tensor, num_nodes: int) -> tuple[Tensor, Tensor]:
    """The edges unchanged and one over their target's in-degree each: a
    weighted sum with these is the mean over in-neighbours (no self-loops:
    SAGE's root weight carries the node itself)."""
    target = edge_index[1]
    in_degree = degree(target, num_nodes, dtype=torch.float)
    return edge_index, in_degree.reciprocal().index_select(0, target)


def weighted_message(x_j: Tensor, edge_weight: OptTensor) -> Tensor:
    return x_j if edge_weight is None else edge_weight.view(-1, 1) * x_j


def init_bias(bias: torch.nn.Parameter, fan_in: int) -> None:
    """What ``torch.nn.Linear`` (and PyG's ``Linear``) draw for a bias."""
    bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
    torch.nn.init.uniform_(bias, -bound, bound)


class _SAGEConv(MessagePassing):
    r"""PyG's ``SAGEConv`` (mean, root weight) as one projection then the
    mean: :math:`W_l \,\mathrm{mean}_j x_j + W_r x_i + b = \mathrm{mean}_j (W_l
    x_j) + W_r x_i + b`. Both weights are one matrix :obj:`lin`
    (:math:`[W_l; W_r]`, one product), and the mean runs on the projected
    width, not the input's (``SAGEConv`` aggregates Cora's 1433 features
    before projecting them to 16)."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__(aggr="add")
        self.out_channels = out_channels
        self.lin = Linear(in_channels, 2 * out_channels, bias=False)
        self.bias = torch.nn.Parameter(torch.empty(out_channels))
        self.lin.reset_parameters()
        init_bias(self.bias, in_channels)

    def aggregate_projected(self, h: Tensor, edge_index: Adj | SparseAdjacency,
                            edge_weight: OptTensor = None,
                            num_targets: int | None = None) -> Tensor:
        neighbours, root = h[:, :self.out_channels], h[:, self.out_channels:]
        if isinstance(edge_index, SparseAdjacency):
            out = aggregate(edge_index, neighbours)
        else:
            out = self.propagate(edge_index, x=neighbours, edge_weight=edge_weight,
                                 size=target_size(h, num_targets))
        return out + root[:out.size(0)] + self.bias

    def message(self, x_j: Tensor, edge_weight: OptTensor) -> Tensor:
        return weighted_message(x_j, edge_weight)


class GraphSAGE(BlockGNN):
    r"""GraphSAGE with mean aggregation and root weights, PyG's
    ``GraphSAGE`` layout: a ReLU and dropout between layers, none on the
    input.

    Args:
        in_channels (int): Input feature width.
        hidden_channels (int): Hidden width.
        out_channels (int): Number of classes.
        num_layers (int): Number of layers. (default: :obj:`2`)
        dropout (float): Dropout before every layer but the first.
            (default: :obj:`0.5`)
        checkpoint (bool): Recompute each block in the backward pass.
            (default: :obj:`False`)

    The graph is the one :func:`mean_weights` prepares.
    """

    def __init__(self, in_channels: int, hidden_channels: int = 16, out_channels: int = 7,
                 num_layers: int = 2, dropout: float = 0.5, checkpoint: bool = False) -> None:
        check_sizes("GraphSAGE", in_channels, hidden_channels, out_channels, num_layers,
                    dropout)
        widths = layer_widths(in_channels, hidden_channels, out_channels, num_layers)
        super().__init__([Block(_SAGEConv(widths[i], widths[i + 1]), dropout if i else 0.0,
                                activate=i < num_layers - 1) for i in range(num_layers)],
                         checkpoint)
