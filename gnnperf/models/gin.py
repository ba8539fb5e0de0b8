"""GIN (Xu et al., 2019): a sum over in-neighbours plus (1 + eps) times the
node itself, through a 2-layer MLP, as PyG's ``GINConv`` with the ``MLP``
that PyG's ``GIN`` model builds (no normalisation)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.nn import Linear, MessagePassing
from torch_geometric.typing import Adj, OptTensor

from gnnperf.models.blocks import Block, BlockGNN, check_sizes, layer_widths, target_size
from gnnperf.models.kernels import SparseAdjacency, aggregate
from gnnperf.models.sage import init_bias, weighted_message


def sum_graph(edge_index: Tensor, num_nodes: int) -> tuple[Tensor, None]:
    """GIN reads the edges as they are: an unweighted sum, no self-loops
    (the (1 + eps) term carries the node itself)."""
    return edge_index, None


class _GINConv(MessagePassing):
    r"""``GINConv(MLP([in, out, out]))`` with the MLP's first linear layer
    applied before the sum (it is linear: :math:`W((1 + \epsilon) x_i +
    \sum_j x_j) = (1 + \epsilon) W x_i + \sum_j W x_j`), so the sum runs on
    the projected width; its bias, a ReLU and the second layer follow.

    Args:
        in_channels (int): Input width.
        out_channels (int): Output (and the MLP's hidden) width.
        train_eps (bool): Learn :math:`\epsilon` (PyG's default: fixed at 0).
    """

    def __init__(self, in_channels: int, out_channels: int, train_eps: bool = False) -> None:
        super().__init__(aggr="add")
        self.lin = Linear(in_channels, out_channels, bias=False)
        self.bias = torch.nn.Parameter(torch.empty(out_channels))
        self.lin2 = Linear(out_channels, out_channels)
        eps = torch.zeros(1)
        if train_eps:
            self.eps = torch.nn.Parameter(eps)
        else:
            self.register_buffer("eps", eps)
        self.lin.reset_parameters()
        self.lin2.reset_parameters()
        init_bias(self.bias, in_channels)

    def aggregate_projected(self, h: Tensor, edge_index: Adj | SparseAdjacency,
                            edge_weight: OptTensor = None,
                            num_targets: int | None = None) -> Tensor:
        if isinstance(edge_index, SparseAdjacency):
            out = aggregate(edge_index, h)
        else:
            out = self.propagate(edge_index, x=h, edge_weight=edge_weight,
                                 size=target_size(h, num_targets))
        out = out + (1 + self.eps) * h[:out.size(0)] + self.bias
        return self.lin2(F.relu(out))

    def message(self, x_j: Tensor, edge_weight: OptTensor) -> Tensor:
        return weighted_message(x_j, edge_weight)


class GIN(BlockGNN):
    r"""The graph isomorphism network in PyG's ``GIN`` layout: a ReLU and
    dropout between layers, none on the input.

    Args:
        in_channels, hidden_channels, out_channels, num_layers, dropout,
            checkpoint: As :class:`~gnnperf.models.sage.GraphSAGE`'s.
        train_eps (bool): Learn each layer's :math:`\epsilon`.
            (default: :obj:`False`, PyG's)
    """

    def __init__(self, in_channels: int, hidden_channels: int = 16, out_channels: int = 7,
                 num_layers: int = 2, dropout: float = 0.5, checkpoint: bool = False,
                 train_eps: bool = False) -> None:
        check_sizes("GIN", in_channels, hidden_channels, out_channels, num_layers, dropout)
        widths = layer_widths(in_channels, hidden_channels, out_channels, num_layers)
        super().__init__([Block(_GINConv(widths[i], widths[i + 1], train_eps),
                                dropout if i else 0.0, activate=i < num_layers - 1)
                          for i in range(num_layers)], checkpoint)
