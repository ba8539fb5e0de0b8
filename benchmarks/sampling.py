"""Neighbor sampling on its own and inside PyG's loader (features and labels
gathered): time per batch of 1024 seeds at fan-out [15, 10], the setting of
``gnnperf sampler``. Every sampled training step pays for both; here they are
apart from the model, so a slower sampler or loader shows as itself."""
from __future__ import annotations

import torch

from . import base, caches, compat, suite
from .profiles import PROFILE

FANOUT = [15, 10]
BATCH_SIZE = 1024
SEED_BATCHES = 8

_STATE: dict[tuple, object] = {}


class NeighborSampling(base.Benchmark):
    params = [list(PROFILE.datasets)]
    param_names = ["dataset"]
    setup_cache = caches.training_datasets_cache
    repeat = PROFILE.repeat
    rounds = PROFILE.rounds

    def make(self, cache, dataset):
        ident = (dataset, str(self.device))
        if ident not in _STATE:  # setup runs before every repeat: build once per process
            _STATE.clear()
            _STATE[ident] = _build(caches.dataset(cache, dataset), self.device)
        self.sampler, self.seed_batches, self.loader = _STATE[ident]
        self.cursor = 0
        self.batches = iter(self.loader)

    def time_sample_batch(self, cache, dataset):
        self.sampler.sample(self.seed_batches[self.cursor % SEED_BATCHES])
        self.cursor += 1
        suite.CASES.synchronize(self.device)

    def time_loader_batch(self, cache, dataset):
        batch = next(self.batches, None)
        if batch is None:  # epoch over: start the next one
            self.batches = iter(self.loader)
            batch = next(self.batches)
        suite.CASES.synchronize(self.device)


def _build(data, dev: torch.device):
    from torch_geometric.data import Data

    sampler_cls = compat.gnnperf_name("sampling.VectorizedNeighborSampler")
    make_neighbor_loader = compat.gnnperf_name("sampling.make_neighbor_loader")
    lean = Data(x=data.x, y=data.y, edge_index=data.edge_index, num_nodes=data.num_nodes).to(dev)
    generator = torch.Generator().manual_seed(0)
    seed_batches = [torch.randperm(data.num_nodes, generator=generator)[:BATCH_SIZE].to(dev)
                    for _ in range(SEED_BATCHES)]
    sampler = sampler_cls(lean, FANOUT, seed=0, edge_ids=False)
    loader = make_neighbor_loader(lean, FANOUT, BATCH_SIZE, shuffle=True, seed=0,
                                  backend="vectorized", edge_ids=False)
    return sampler, seed_batches, loader
