"""GAT (Velickovic et al., 2018) as PyG's ``GAT`` model builds it: 8 heads
in every layer, concatenated in the hidden layers and averaged in the
output one, dropout on the attention coefficients; self-loops added once
with the graph."""
from __future__ import annotations

from torch import Tensor
from torch_geometric.nn import GATConv
from torch_geometric.typing import Adj, OptTensor
from torch_geometric.utils import add_self_loops, remove_self_loops

from gnnperf.errors import GnnperfError
from gnnperf.models.blocks import Block, BlockGNN, check_sizes, target_size

#: Attention heads of every layer (PyG's example and the paper's Cora setup).
HEADS = 8


def self_loop_graph(edge_index: Tensor, num_nodes: int) -> tuple[Tensor, None]:
    """The edges with one self-loop per node (what ``GATConv`` adds every
    call), no weights: attention weighs the edges."""
    edge_index, _ = remove_self_loops(edge_index)
    edge_index, _ = add_self_loops(edge_index, num_nodes=num_nodes)
    return edge_index, None


class _GATConv(GATConv):
    """:class:`GATConv` (self-loops added beforehand) split into its
    projection :obj:`lin` and :meth:`aggregate_projected`, which attends
    into the first :obj:`num_targets` rows only when given (trimming)."""

    def __init__(self, in_channels: int, out_channels: int, heads: int, concat: bool,
                 dropout: float) -> None:
        super().__init__(in_channels, out_channels, heads=heads, concat=concat,
                         dropout=dropout, add_self_loops=False)

    def aggregate_projected(self, h: Tensor, edge_index: Adj, edge_weight: OptTensor = None,
                            num_targets: int | None = None) -> Tensor:
        if edge_weight is not None or not isinstance(edge_index, Tensor):
            raise GnnperfError("GAT attends over an edge_index and takes no edge weights")
        heads, channels = self.heads, self.out_channels
        h = h.view(-1, heads, channels)
        h_dst = h if num_targets is None else h[:num_targets]
        alpha_src = (h * self.att_src).sum(dim=-1)
        alpha_dst = (h_dst * self.att_dst).sum(dim=-1)
        size = target_size(h, num_targets)
        alpha = self.edge_updater(edge_index, alpha=(alpha_src, alpha_dst), edge_attr=None,
                                  size=size)
        out = self.propagate(edge_index, x=(h, h_dst), alpha=alpha, size=size)
        out = out.reshape(-1, heads * channels) if self.concat else out.mean(dim=1)
        return out if self.bias is None else out + self.bias


class GAT(BlockGNN):
    r"""The graph attention network of PyG's ``GAT`` model (its reference):
    hidden layers of :data:`HEADS` concatenated heads of
    :obj:`hidden_channels` each (``examples/gat.py``'s 8 x 8 at
    ``--hidden 8``), an output layer of :data:`HEADS` heads averaged (the
    example's output layer has one); a ReLU and dropout between layers, the
    same dropout on the attention coefficients.

    Args:
        in_channels (int): Input feature width.
        hidden_channels (int): Width of each head.
        out_channels (int): Number of classes.
        num_layers (int): Number of layers. (default: :obj:`2`)
        dropout (float): Dropout before every layer but the first, and on
            the attention coefficients. (default: :obj:`0.5`)
        checkpoint (bool): Recompute each block in the backward pass.
            (default: :obj:`False`)
        heads (int): Heads of the hidden layers. (default: :data:`HEADS`)
    """

    def __init__(self, in_channels: int, hidden_channels: int = 16, out_channels: int = 7,
                 num_layers: int = 2, dropout: float = 0.5, checkpoint: bool = False,
                 heads: int = HEADS) -> None:
        check_sizes("GAT", in_channels, hidden_channels, out_channels, num_layers, dropout)
        blocks, width = [], in_channels
        for i in range(num_layers):
            last = i == num_layers - 1
            conv = _GATConv(width, out_channels if last else hidden_channels, heads,
                            concat=not last, dropout=dropout)
            blocks.append(Block(conv, dropout if i else 0.0, activate=not last))
            width = hidden_channels * heads
        super().__init__(blocks, checkpoint)
