"""Each model's reference as a reader would copy it: for GCN the PyG
tutorial's model, for SAGE, GAT and GIN PyG's own ``torch_geometric.nn.models``
class, trained plainly (``--reference tutorial``)."""
from __future__ import annotations

from typing import Iterable

import torch

from gnnperf.models import REFERENCE
from gnnperf.models.references import TutorialGCN, pair
from gnnperf.variants.base import Batch, Technique, TrainingRun


class Tutorial(Technique):
    r"""Replaces the model and the step's inputs by the reference's: the
    model's :attr:`~gnnperf.models.ModelSpec.reference` (for GCN
    :class:`TutorialGCN`, hidden width from the config, no dropout as the
    tutorial has none), plain Adam with the config's learning rate and
    weight decay, the raw :obj:`edge_index` (the reference normalises and
    adds self-loops inside) and the boolean training mask indexing the loss.
    It is a reference, not an optimisation: it combines with nothing.
    """
    name = "tutorial"
    order = 0
    combines = False
    needs_model = (REFERENCE,)

    def apply(self, run: TrainingRun) -> None:
        data, config = run.data, run.config
        # Built off the random stream, which then stands where the baseline's does.
        with torch.random.fork_rng(devices=[]):
            reference = run.model_spec.reference(data.num_features, config.hidden,
                                                 int(data.y.max()) + 1, config.layers,
                                                 config.dropout).to(run.device)
        run.stats["reference_paired"] = int(pair(run.model_spec.name, run.model, reference))
        run.model = reference
        run.optimizer = torch.optim.Adam(run.model.parameters(), lr=config.lr,
                                         weight_decay=config.weight_decay)
        run.forward = run.model
        # Evaluation too reads the raw edges: the reference prepares them itself.
        run.full_graph = lambda: (data.edge_index, None)

        def batches() -> Iterable[Batch]:
            yield Batch(data.x, data.edge_index, None, data.y, data.train_mask,
                        num_seeds=int(run.train_nodes.numel()),
                        num_edges=data.edge_index.size(1))

        run.batches = batches


__all__ = ["Tutorial", "TutorialGCN"]
