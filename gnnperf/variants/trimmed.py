"""Exact per-layer trimming of sampled batches (PyG's ``trim_to_layer`` idea):
layer i reads only the nodes and edges that the seeds still depend on."""
from __future__ import annotations

import itertools

import torch

from gnnperf.models import LayerGraph
from gnnperf.variants.base import Batch, Technique, TrainingRun


class Trimmed(Technique):
    """Normalises once on the whole sampled subgraph, then hands layer i the
    weighted edges into the nodes within :obj:`layers - 1 - i` hops of the
    seeds. Trimming with :class:`GCNConv` normalising inside would change the
    degrees, and the outputs, of the trimmed graph."""
    name = "trimmed"
    order = 12
    requires = ("sampled",)

    @classmethod
    def standard_variant(cls) -> str:
        return "sampled+trimmed"

    def apply(self, run: TrainingRun) -> None:
        num_layers = run.model.num_layers

        def subgraph_batch(batch: Batch) -> Batch:
            edge_index, edge_weight = batch.graph, batch.edge_weight
            target = edge_index[1]
            # Sorted by target, the edges into the first n nodes are a prefix.
            order = torch.argsort(target, stable=True)
            edge_index = edge_index.index_select(1, order)
            edge_weight = edge_weight.index_select(0, order)
            edges_into = torch.cumsum(torch.bincount(target, minlength=batch.x.size(0)), 0)
            nodes_within = list(itertools.accumulate(batch.num_sampled_nodes))
            layers = []
            for i in range(num_layers):
                num_sources = nodes_within[num_layers - i]
                num_targets = nodes_within[num_layers - 1 - i]
                num_edges = int(edges_into[num_targets - 1])
                graph, weight = run.graph_transform(edge_index[:, :num_edges],
                                                    edge_weight[:num_edges],
                                                    num_targets, num_sources)
                layers.append(LayerGraph(graph, weight, num_sources, num_targets))
            batch.layers = layers
            return batch

        run.subgraph_batch = subgraph_batch
