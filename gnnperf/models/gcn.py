"""The GCN of Kipf and Welling (the PyG tutorial's model, the default): a
symmetric-normalised sum over the graph with self-loops, normalised once."""
from __future__ import annotations

from torch import Tensor
from torch_geometric.nn import GCNConv
from torch_geometric.nn.conv.gcn_conv import gcn_norm
from torch_geometric.typing import Adj, OptTensor

from gnnperf.models.blocks import Block, BlockGNN, check_sizes, layer_widths, target_size
from gnnperf.models.kernels import SparseAdjacency, aggregate


def normalize_graph(edge_index: Tensor, num_nodes: int) -> tuple[Tensor, Tensor]:
    """Adds self-loops and computes GCN's symmetric edge weights once.

    Doing this outside :class:`GCNConv` keeps the data-dependent
    ``add_remaining_self_loops`` out of the model, so ``torch.compile`` sees
    one graph with no breaks.
    """
    return gcn_norm(edge_index, None, num_nodes, add_self_loops=True)



class _GCNConv(GCNConv):
    """:class:`GCNConv` on a graph normalised once (:func:`normalize_graph`),
    split into its projection and :meth:`aggregate_projected`."""

    def forward(self, x: Tensor, edge_index: Adj | SparseAdjacency,
                edge_weight: OptTensor = None, num_targets: int | None = None) -> Tensor:
        return self.aggregate_projected(self.lin(x), edge_index, edge_weight, num_targets)

    def aggregate_projected(self, h: Tensor, edge_index: Adj | SparseAdjacency,
                            edge_weight: OptTensor = None,
                            num_targets: int | None = None) -> Tensor:
        """The rest of GCNConv.forward (normalize=False) on features already
        projected by :obj:`lin`: messages into the first :obj:`num_targets`
        rows (all by default), then the bias. GCNConv sizes its output by its
        input; a trimmed layer aggregates into its target rows only, so the
        rows no later layer reads get no zero-fill, bias, ReLU or dropout.
        A :class:`SparseAdjacency` (already sized targets x sources) is one
        product, without PyG's per-call ``propagate`` machinery."""
        if isinstance(edge_index, SparseAdjacency):
            out = aggregate(edge_index, h)
        else:
            out = self.propagate(edge_index, x=h, edge_weight=edge_weight,
                                 size=target_size(h, num_targets))
        return out if self.bias is None else out + self.bias


class GCN(BlockGNN):
    r"""The graph convolutional network of Kipf and Welling (2017).

    Args:
        in_channels (int): Input feature width.
        hidden_channels (int): Hidden width (the tutorial's 16 by default).
        out_channels (int): Number of classes.
        num_layers (int): Number of GCN layers. (default: :obj:`2`)
        dropout (float): Dropout before every layer, the input's too, as in
            PyG's ``examples/gcn.py``. (default: :obj:`0.5`)
        checkpoint (bool): Recompute each block's activations in the backward
            pass instead of saving them. (default: :obj:`False`)

    The forward pass takes node features and a graph already normalised by
    :func:`normalize_graph` (:class:`~gnnperf.models.blocks.BlockGNN`).
    """

    def __init__(self, in_channels: int, hidden_channels: int = 16, out_channels: int = 7,
                 num_layers: int = 2, dropout: float = 0.5, checkpoint: bool = False) -> None:
        check_sizes("GCN", in_channels, hidden_channels, out_channels, num_layers, dropout)
        widths = layer_widths(in_channels, hidden_channels, out_channels, num_layers)
        super().__init__([Block(_GCNConv(widths[i], widths[i + 1], normalize=False), dropout,
                                activate=i < num_layers - 1) for i in range(num_layers)],
                         checkpoint)
