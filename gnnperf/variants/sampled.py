"""Neighbor-sampled mini-batches: each step trains on the sampled computation
graphs of a batch of training nodes."""
from __future__ import annotations

from typing import Iterable

from torch_geometric.data import Data

from gnnperf.sampling.neighbor import make_neighbor_loader
from gnnperf.variants.base import Batch, Technique, TrainingRun


class Sampled(Technique):
    """Mini-batches from :func:`~gnnperf.sampling.neighbor.make_neighbor_loader`; loss
    and accuracy of a step use only the seed nodes (``out[:batch_size]``)."""
    name = "sampled"
    order = 10
    makes_batches = True

    def apply(self, run: TrainingRun) -> None:
        config = run.config
        # Only what a step reads travels with each batch (masks, names don't).
        data = Data(x=run.data.x, y=run.data.y, edge_index=run.data.edge_index,
                    num_nodes=run.data.num_nodes)
        # ddp: this rank's batches of each epoch's seeds.
        shard_batches = run.shards.seed_batches(int(run.data.train_mask.sum()),
                                                config.batch_size, config.seed)
        sharding = {} if shard_batches is None else {"batch_sampler": shard_batches}
        loader = make_neighbor_loader(
            data, config.fanout_per_layer(), config.batch_size,
            input_nodes=run.data.train_mask, shuffle=True, seed=config.seed,
            backend=config.sampler, edge_ids=False, **sharding)
        run.dynamic_shapes = True

        def batches() -> Iterable[Batch]:
            for sub in loader:
                # Prepared per subgraph: cached full-graph weights would be wrong here.
                edge_index, edge_weight = run.prepare_graph(sub.edge_index, sub.num_nodes)
                yield run.subgraph_batch(Batch(
                    sub.x, edge_index, edge_weight, sub.y, slice(0, sub.batch_size),
                    num_seeds=sub.batch_size, num_edges=sub.edge_index.size(1),
                    num_sampled_nodes=sub.num_sampled_nodes))

        run.batches = batches
