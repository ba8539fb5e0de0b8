"""The models a reader would otherwise copy, trained plainly as each
model's reference (the ``tutorial`` variant): the PyG introduction's GCN and
PyG's own ``GraphSAGE``, ``GAT`` and ``GIN`` from ``torch_geometric.nn.models``,
and how each is paired with our model of the same seed (:func:`pair`)."""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.nn import GCNConv

from gnnperf.models.kernels import dropout


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


# Pairing -------------------------------------------------------------------
# Ours and PyG's model of one seed draw different initial weights (other
# construction orders) and, on CPU, different dropout masks (our lane
# dropout, PyG's torch.nn.Dropout). Over 200 epochs on Cora GIN's test
# accuracy then scatters by points a seed, so a few seeds' mean difference
# carries as much noise as the difference sought. Paired, the reference
# starts from our weights and draws our masks: the difference left is the
# implementations'.

def _same_layer(ours: torch.nn.Module, theirs: torch.nn.Module) -> None:
    theirs.load_state_dict(ours.state_dict())


def _sage_layer(ours: torch.nn.Module, theirs: torch.nn.Module) -> None:
    # Ours projects neighbours and root in one product: [W_l; W_r] rows.
    out = theirs.lin_l.out_channels
    theirs.lin_l.weight.copy_(ours.lin.weight[:out])
    theirs.lin_r.weight.copy_(ours.lin.weight[out:])
    theirs.lin_l.bias.copy_(ours.bias)


def _gin_layer(ours: torch.nn.Module, theirs: torch.nn.Module) -> None:
    # Ours applies the MLP's first linear layer before the sum, its bias after.
    first, second = theirs.nn.lins
    first.weight.copy_(ours.lin.weight)
    first.bias.copy_(ours.bias)
    second.load_state_dict(ours.lin2.state_dict())


LAYER_COPIES: dict[str, Callable[[torch.nn.Module, torch.nn.Module], None]] = {
    "gcn": _same_layer, "sage": _sage_layer, "gat": _same_layer, "gin": _gin_layer}


class KernelDropout(torch.nn.Module):
    """:func:`gnnperf.models.kernels.dropout` as a module: what our models
    draw, put in place of a PyG model's ``torch.nn.Dropout``."""

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training)


def reference_layers(reference: torch.nn.Module) -> list[torch.nn.Module]:
    """The conv layers of a reference, first to last."""
    if isinstance(reference, TutorialGCN):
        return [reference.conv1, reference.conv2]
    return list(reference.convs)  # torch_geometric.nn.models.BasicGNN


def pair(model: str, ours: torch.nn.Module, reference: torch.nn.Module) -> bool:
    """Copies the initial weights of :obj:`ours` (a built-in model's
    blocks) into :obj:`reference`, layer by layer, and gives a PyG
    ``BasicGNN`` reference our dropout kernel (the tutorial's GCN has none).
    False, with nothing changed, where the layers do not correspond (the
    tutorial's GCN has two layers whatever is asked)."""
    layers = reference_layers(reference)
    if model not in LAYER_COPIES or len(layers) != len(ours.blocks):
        return False
    with torch.no_grad():
        for block, layer in zip(ours.blocks, layers):
            LAYER_COPIES[model](block.conv, layer)
    if isinstance(getattr(reference, "dropout", None), torch.nn.Dropout):
        reference.dropout = KernelDropout(reference.dropout.p)
    return True
