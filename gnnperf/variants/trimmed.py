"""Exact per-layer trimming (PyG's ``trim_to_layer`` idea): layer i reads only
the nodes and edges that the loss nodes still depend on, in each sampled
batch or, full batch, in the training nodes' receptive field, built once."""
from __future__ import annotations

import itertools
import time

import torch
from torch import Tensor

from gnnperf.models import BLOCKS, LayerGraph
from gnnperf.models.kernels import stable_order
from gnnperf.variants.base import Batch, Technique, TrainingRun


def receptive_field(edge_index: Tensor, seeds: Tensor, num_nodes: int,
                    hops: int) -> tuple[Tensor, list[int]]:
    """The nodes within :obj:`hops` hops upstream of :obj:`seeds` (a message
    flows from ``edge_index[0]`` to ``edge_index[1]``), ordered by hop, seeds
    first, and how many each hop added: the layout of a neighbor-sampled
    batch, so that the nodes within *k* hops are a prefix. (The sampler with
    fanout -1 gives the same nodes, but normalises per subgraph: the outer hop's
    degrees would then miss their edges from outside, and the weights differ.)"""
    source, target = edge_index
    hop = torch.full((num_nodes,), -1, dtype=torch.long, device=seeds.device)
    hop[seeds] = 0
    layers, counts = [seeds], [seeds.numel()]
    for k in range(1, hops + 1):
        reached = torch.zeros(num_nodes, dtype=torch.bool, device=seeds.device)
        reached[source[hop.index_select(0, target) >= 0]] = True
        new = (reached & (hop < 0)).nonzero().view(-1)
        hop[new] = k
        layers.append(new)
        counts.append(new.numel())
    return torch.cat(layers), counts


class Trimmed(Technique):
    """Prepares the whole graph (or sampled subgraph) once, then hands
    layer i the weighted edges into the nodes within :obj:`layers - 1 - i`
    hops of the loss nodes. Trimming with a conv normalising inside (GCN's
    degrees, SAGE's mean) would change the outputs of the trimmed graph;
    attention (GAT) is a softmax over a target's in-edges, all kept.

    Full batch, the training nodes' receptive field is relabelled once (hop
    by hop) into one batch every epoch reuses, recorded as
    ``receptive_field_nodes`` (Cora: 1664 of 2708 nodes for the first layer,
    644 for the second, 140 loss nodes): the loss and its gradients are the
    full graph's, since no other node reaches a training node in
    :obj:`layers` hops, and dropout on the rows left out never reached the loss.
    """
    name = "trimmed"
    order = 12
    # The batches it can trim: neighbor-sampled ones carry their hops
    # (GraphSAINT's and Cluster-GCN's subgraphs do not), or the full graph.
    allowed_batch_makers = ("sampled",)
    needs_model = (BLOCKS,)  # hands each layer block its own graph

    @classmethod
    def standard_variant(cls) -> str:
        return "sampled+trimmed"

    def apply(self, run: TrainingRun) -> None:
        num_layers = run.model.num_layers

        def subgraph_batch(batch: Batch) -> Batch:
            edge_index, edge_weight = batch.graph, batch.edge_weight
            target = edge_index[1]
            # Sorted by target, the edges into the first n nodes are a prefix.
            order = stable_order(target, batch.x.size(0))
            edge_index = edge_index.index_select(1, order)
            edge_weight = None if edge_weight is None else edge_weight.index_select(0, order)
            edges_into = torch.cumsum(torch.bincount(target, minlength=batch.x.size(0)), 0)
            nodes_within = list(itertools.accumulate(batch.num_sampled_nodes))
            layers = []
            for i in range(num_layers):
                num_sources = nodes_within[num_layers - i]
                num_targets = nodes_within[num_layers - 1 - i]
                num_edges = int(edges_into[num_targets - 1])
                graph, weight = run.graph_transform(edge_index[:, :num_edges],
                                                    None if edge_weight is None
                                                    else edge_weight[:num_edges],
                                                    num_targets, num_sources)
                layers.append(LayerGraph(graph, weight, num_sources, num_targets))
            batch.layers = layers
            return batch

        if run.variant.minibatch:
            run.subgraph_batch = subgraph_batch
            return
        start = time.perf_counter()
        batch = subgraph_batch(self.receptive_field_batch(run, num_layers))
        run.setup_seconds["receptive field"] = time.perf_counter() - start
        run.stats["receptive_field_nodes"] = batch.x.size(0)
        run.batches = lambda: iter((batch,))

    @staticmethod
    def receptive_field_batch(run: TrainingRun, num_layers: int) -> Batch:
        """The full-graph batch restricted to the loss nodes' receptive field,
        relabelled hop by hop, its edges weighted with the whole graph's degrees."""
        data = run.data
        nodes, per_hop = receptive_field(data.edge_index, run.train_nodes, data.num_nodes,
                                         num_layers)
        edge_index, edge_weight = run.prepare_graph(data.edge_index, data.num_nodes)
        local = torch.full((data.num_nodes,), -1, dtype=torch.long, device=nodes.device)
        local[nodes] = torch.arange(nodes.numel(), device=nodes.device)
        # Edges into nodes within num_layers - 1 hops: all a layer reads.
        target = local.index_select(0, edge_index[1])
        keep = (target >= 0) & (target < nodes.numel() - per_hop[-1])
        edge_index = local[edge_index[:, keep]]
        seeds = per_hop[0]
        return Batch(data.x.index_select(0, nodes), edge_index,
                     None if edge_weight is None else edge_weight[keep],
                     data.y.index_select(0, nodes), slice(0, seeds), num_seeds=seeds,
                     num_edges=int(keep.sum()), num_sampled_nodes=per_hop)
