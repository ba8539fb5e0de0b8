"""The one shard policy every batch maker asks: disjoint shares, as many
steps on every rank, nothing split without ddp."""
import pytest
import torch

from gnnperf.errors import GnnperfError
from gnnperf.ranks import Shard, ShardedBatches, ShardPolicy

WORLD = 3


def policies(world: int = WORLD) -> list[ShardPolicy]:
    return [ShardPolicy(Shard(rank, world, "gloo")) for rank in range(world)]


def test_without_ddp_nothing_is_split():
    alone = ShardPolicy()
    nodes = torch.arange(10)
    assert alone.train_nodes(nodes) is nodes
    assert alone.seed_batches(10, 4, seed=0) is None
    assert alone.rank_seed(7) == 7
    assert alone.steps(5, torch.device("cpu")) == 5
    assert alone.share([1, 2, 3], "unused") == [1, 2, 3]


def test_full_batch_shares_cover_the_nodes_once_within_one_node_of_each_other():
    nodes = torch.arange(140)
    shares = [policy.train_nodes(nodes) for policy in policies()]
    assert sorted(torch.cat(shares).tolist()) == nodes.tolist()
    assert max(map(len, shares)) - min(map(len, shares)) <= 1


def test_seed_batches_give_each_seed_to_one_rank_in_as_many_steps():
    samplers = [policy.seed_batches(100, 8, seed=3) for policy in policies()]
    assert all(isinstance(sampler, ShardedBatches) for sampler in samplers)
    epochs = [list(sampler) for sampler in samplers]
    assert len({len(batches) for batches in epochs}) == 1
    seeds = [seed for batches in epochs for batch in batches for seed in batch]
    assert sorted(seeds) == list(range(100))


def test_batch_shares_are_disjoint_and_equally_long_or_a_one_line_error():
    batches = list(range(10))
    shares = [policy.share(batches, "raise --cluster-parts") for policy in policies()]
    assert [len(share) for share in shares] == [3, 3, 3]  # the tenth is left out
    assert len({b for share in shares for b in share}) == 9
    with pytest.raises(GnnperfError, match="2 batches for 3 ranks: raise --cluster-parts"):
        policies()[0].share([0, 1], "raise --cluster-parts")


def test_each_rank_draws_its_own_walks():
    assert [policy.rank_seed(5) for policy in policies()] == [5, 6, 7]


def test_one_rank_of_a_world_of_one_takes_every_step():
    one = ShardPolicy(Shard(0, 1, "gloo"))
    assert one.steps(9, torch.device("cpu")) == 9
    assert one.share([1, 2], "unused") == [1, 2]
