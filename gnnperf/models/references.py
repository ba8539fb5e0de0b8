"""The models a reader would otherwise copy, trained plainly as each
model's reference (the ``tutorial`` variant): the PyG introduction's GCN and
PyG's own ``GraphSAGE``, ``GAT`` and ``GIN`` from ``torch_geometric.nn.models``."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.nn import GCNConv


class TutorialGCN(torch.nn.Module):
    """Two :class:`GCNConv` layers that normalise the graph inside (self-loops
    and degrees every call), a ReLU between them and no dropout: the PyG
    introduction's model, unchanged."""

    def __init__(self, in_channels: int, hidden_channels: int, out_channels: int) -> None:
        super().__init__()
        self.conv1 = GCNConv(in_channels, hidden_channels)
        self.conv2 = GCNConv(hidden_channels, out_channels)

    def forward(self, x: Tensor, edge_index: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        x = F.relu(self.conv1(x, edge_index))
        return self.conv2(x, edge_index)


def tutorial_gcn(in_channels: int, hidden: int, out_channels: int, layers: int,
                 dropout: float) -> torch.nn.Module:
    # The tutorial's model is two layers without dropout, whatever is asked.
    return TutorialGCN(in_channels, hidden, out_channels)


def pyg_graphsage(in_channels: int, hidden: int, out_channels: int, layers: int,
                  dropout: float) -> torch.nn.Module:
    from torch_geometric.nn.models import GraphSAGE
    return GraphSAGE(in_channels, hidden, layers, out_channels, dropout=dropout)


def pyg_gat(in_channels: int, hidden: int, out_channels: int, layers: int,
            dropout: float) -> torch.nn.Module:
    from torch_geometric.nn.models import GAT

    from gnnperf.models.gat import HEADS
    # PyG's GAT splits hidden_channels over the heads: hidden per head, as ours.
    return GAT(in_channels, hidden * HEADS, layers, out_channels, dropout=dropout, heads=HEADS)


def pyg_gin(in_channels: int, hidden: int, out_channels: int, layers: int,
            dropout: float) -> torch.nn.Module:
    from torch_geometric.nn.models import GIN
    return GIN(in_channels, hidden, layers, out_channels, dropout=dropout)
