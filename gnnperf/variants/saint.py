"""GraphSAINT random-walk subgraphs: each step trains on the subgraph induced
by a batch of short random walks, with the paper's normalisation making the
subgraph loss and aggregation unbiased estimates of the full-graph ones."""
from __future__ import annotations

import math
import sys
import time
from typing import Iterable

import torch

from gnnperf.sampling.subgraph import RandomWalkSampler
from gnnperf.models import EDGE_WEIGHTS
from gnnperf.variants.base import Batch, Technique, TrainingRun


class Saint(Technique):
    r"""GraphSAINT (Zeng et al., 2020) with the random-walk sampler of
    :class:`~gnnperf.sampling.subgraph.RandomWalkSampler`: :obj:`saint_roots`
    uniform roots per batch (by default :obj:`max(500, ceil(N / 5))`), walks
    of :obj:`saint_walk_length` steps.

    Before training, subgraphs are pre-sampled until they hold
    :obj:`saint_coverage` x num_nodes nodes in all (PyG's
    ``sample_coverage``) and then on until :obj:`saint_seen_edges` of the
    edges were drawn :obj:`saint_min_count` times each (at most :obj:`saint_max_coverage` x num_nodes nodes), to
    estimate how often each node and edge is sampled; that time is reported
    apart (``setup_seconds['presample']``), the share of never-drawn edges and
    nodes in ``stats`` (``saint_unseen_edges``, ``saint_unseen_nodes``), with a
    warning line above 1%. Then:

    * edge weights are the full graph's, as the model prepares them (GCN's
      normalisation, SAGE's mean, GIN's ones), times ``edge_norm``
      (:meth:`~gnnperf.sampling.subgraph.RandomWalkSampler.compute_norm`):
      :math:`C_v / C_{uv}` with :math:`v` the aggregating node
      (:obj:`saint_norm="paper"`, Zeng et al. 2020) or PyG's source-count
      :math:`C_u / C_{uv}` (``pyg``), self-loops included (norm 1); a
      never-drawn edge keeps its prepared weight; a model whose aggregation
      takes no weights (GAT's attention, recorded as
      ``saint_aggregator_norm``) keeps only the loss normalisation below;
    * the loss is :math:`\sum_{v \in \text{train} \cap S} \ell_v \cdot
      \text{node\_norm}_v`, scaled by :math:`N / |\text{train}|` so its
      expectation is the full-batch mean loss over the training nodes (PyG's
      sum has expectation :math:`|\text{train}| / N` times that, which
      with 140 training nodes of Cora's 2708 leaves Adam's weight decay
      dominating the step).

    An epoch is :math:`\lceil N / \bar n \rceil` batches, :math:`\bar n` the
    mean pre-sampled subgraph size: about as many nodes as the graph has.
    """
    name = "saint"
    order = 10
    makes_batches = True

    def apply(self, run: TrainingRun) -> None:
        config, data = run.config, run.data
        num_nodes = data.num_nodes
        graph, weight = run.prepare_graph(data.edge_index, num_nodes)
        # ddp: independent walks on every rank (each its own seed).
        sampler = RandomWalkSampler(data.edge_index, num_nodes, config.saint_roots_for(num_nodes),
                                    config.saint_walk_length,
                                    seed=run.shards.rank_seed(config.seed),
                                    subgraph_edge_index=graph)
        start = time.perf_counter()
        # PyG's sample_coverage: subgraphs until coverage * N nodes were drawn;
        # the first batch estimates how many that takes.
        first = sampler.sample().num_nodes
        num_samples = max(1, math.ceil(config.saint_coverage * num_nodes / max(first, 1)))
        max_samples = max(num_samples,
                          math.ceil(config.saint_max_coverage * num_nodes / max(first, 1)))
        norm = sampler.compute_norm(num_samples, norm=config.saint_norm,
                                    seen_edges=config.saint_seen_edges,
                                    min_count=config.saint_min_count, max_samples=max_samples)
        node_norm, edge_norm = norm.node_norm, norm.edge_norm
        if run.device.type == "cuda":
            torch.cuda.synchronize(run.device)
        run.setup_seconds["presample"] = time.perf_counter() - start
        run.stats["presample_subgraphs"] = norm.num_samples
        run.stats["saint_norm"] = config.saint_norm
        run.stats["saint_roots"] = sampler.num_roots
        run.stats["saint_unseen_edges"] = norm.unseen_edges
        run.stats["saint_unseen_nodes"] = norm.unseen_nodes
        if max(norm.unseen_edges, norm.unseen_nodes) > 0.01:
            # Their weights are bounded but biased low: say so.
            print(f"warning: saint: {norm.unseen_edges:.2%} of the edges and "
                  f"{norm.unseen_nodes:.2%} of the nodes were in none of the "
                  f"{norm.num_samples} pre-sampled subgraphs (they keep unnormalised "
                  f"weights); raise --saint-max-coverage", file=sys.stderr)
        # The aggregator normalisation weighs each edge (GCN's weights, SAGE's
        # mean, GIN's plain sum times C_v / C_uv); a model whose aggregation
        # takes no weights (GAT's attention) keeps the loss normalisation only.
        if run.model_spec.has(EDGE_WEIGHTS):
            edge_weight = edge_norm if weight is None else weight * edge_norm
            run.stats["saint_aggregator_norm"] = True
        else:
            edge_weight = None
            run.stats["saint_aggregator_norm"] = False
        loss_scale = num_nodes / int(data.train_mask.sum())
        # An epoch draws about N nodes, by the pre-sampled subgraphs' mean
        # size (one draw's size swings with its walks' degrees). ddp: the
        # epoch's draws split across the ranks, all taking as many.
        steps = run.shards.steps(max(1, math.ceil(num_nodes / max(norm.mean_nodes, 1.0))),
                                 run.device)
        run.stats["saint_mean_subgraph_nodes"] = norm.mean_nodes
        run.stats["saint_steps_per_epoch"] = steps
        run.dynamic_shapes = True

        def batches() -> Iterable[Batch]:
            for _ in range(steps):
                sub = sampler.sample()
                yield run.induced_batch(
                    sub.node_ids, sub.edge_index,
                    None if edge_weight is None else edge_weight.index_select(0, sub.edge_ids),
                    sub.edge_ids.numel(),
                    loss_weight=lambda ids: node_norm.index_select(0, ids) * loss_scale)

        run.batches = batches
