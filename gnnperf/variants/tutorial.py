"""The PyG tutorial's GCN on Cora as a reader would copy it: the reference the
fast paths are measured against (``--reference tutorial``)."""
from __future__ import annotations

from typing import Iterable

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.nn import GCNConv

from gnnperf.variants.base import Batch, Technique, TrainingRun


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


class Tutorial(Technique):
    r"""Replaces the model and the step's inputs by the tutorial's:
    :class:`TutorialGCN` (hidden width from the config, dropout ignored as the
    tutorial has none), Adam with the config's learning rate and weight decay,
    the raw :obj:`edge_index` and the boolean training mask indexing the loss.
    It is a reference, not an optimisation: it combines with nothing.
    """
    name = "tutorial"
    order = 0
    combines = False

    def apply(self, run: TrainingRun) -> None:
        data, config = run.data, run.config
        run.model = TutorialGCN(data.num_features, config.hidden,
                                int(data.y.max()) + 1).to(run.device)
        run.optimizer = torch.optim.Adam(run.model.parameters(), lr=config.lr,
                                         weight_decay=config.weight_decay)
        run.forward = run.model
        # Evaluation too reads the raw edges: the tutorial's GCNConv normalises.
        run.full_graph = lambda: (data.edge_index, None)

        def batches() -> Iterable[Batch]:
            yield Batch(data.x, data.edge_index, None, data.y, data.train_mask,
                        num_seeds=int(run.train_nodes.numel()),
                        num_edges=data.edge_index.size(1))

        run.batches = batches
