"""Where this process stands among data-parallel ranks, and what the
techniques need of it: the process group (joined from torchrun's
environment, or a world of one), each rank's share of the seeds, the
all-reduce timer for DDP and agreeing on a count across ranks. The layer
below the techniques; launching ranks and measuring them is
``gnnperf.distributed``, above the measurement."""
from __future__ import annotations

import datetime
import math
import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch
import torch.distributed as dist

from gnnperf.errors import GnnperfError

# Init and every collective give up after this long, so a dead or stuck rank
# ends the run instead of hanging it.
TIMEOUT_S = int(os.environ.get("GNNPERF_DIST_TIMEOUT", "60"))


@dataclass(frozen=True)
class Shard:
    """This process's place in the data-parallel world."""
    rank: int
    world_size: int
    backend: str


def resolve_backend(name: str, device: torch.device) -> str:
    """``auto``: NCCL when this run trains on CUDA (one GPU per rank), gloo
    otherwise; or ``gloo`` / ``nccl`` as given."""
    if name == "auto":
        return "nccl" if device.type == "cuda" else "gloo"
    if name not in ("gloo", "nccl"):
        raise GnnperfError(f"unknown distributed backend {name!r}; use auto, gloo or nccl")
    if name == "nccl" and device.type != "cuda":
        raise GnnperfError("the nccl backend needs CUDA devices; use --backend gloo on CPU")
    return name


def launched_by_torchrun() -> bool:
    """Whether this process is a rank that ``torchrun`` (or the elastic
    launcher) started: it sets RANK, WORLD_SIZE and MASTER_ADDR/PORT."""
    return "WORLD_SIZE" in os.environ and "RANK" in os.environ


def init_from_env(backend: str, device: torch.device | None = None) -> Shard:
    """Joins the process group described by torchrun's environment. On a
    CUDA :obj:`device` (this rank's, :func:`rank_device`) it is made the
    current device first: NCCL binds each rank's communicator, and its
    object collectives (:func:`gather_to_rank0`), to the current device,
    which is otherwise cuda:0 on every rank (two ranks on one GPU, or a hang)."""
    if device is not None and device.type == "cuda":
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        try:
            dist.init_process_group(backend, timeout=datetime.timedelta(seconds=TIMEOUT_S))
        except Exception as exc:  # DistStoreError, RuntimeError: port in use, unreachable
            where = f"{os.environ.get('MASTER_ADDR', '?')}:{os.environ.get('MASTER_PORT', '?')}"
            raise GnnperfError(
                f"rank {os.environ.get('RANK', '?')} cannot join the process group at {where} "
                f"({type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc) else ''}); "
                f"check the rendezvous address and that the port is free") from None
    return current_shard()


def current_shard() -> Shard:
    """The initialised group's rank and size; outside one, a world of one
    (a gloo group over an in-process store: no network)."""
    if not dist.is_initialized():
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1,
                                timeout=datetime.timedelta(seconds=TIMEOUT_S))
    return Shard(dist.get_rank(), dist.get_world_size(), dist.get_backend())


class ShardPolicy:
    r"""How one epoch's work is split across data-parallel ranks: the one
    policy every batch maker of a run asks (:attr:`TrainingRun.shards
    <gnnperf.variants.base.TrainingRun.shards>`), so the full graph,
    neighbor-sampled seeds, GraphSAINT walks and Cluster-GCN batches are
    shared out by the same rules: every rank a disjoint share, every rank as
    many steps (DDP all-reduces in each). With no :obj:`shard` (a variant
    without ddp) nothing is split.

    Args:
        shard (Shard, optional): This rank's place in the group.
    """

    def __init__(self, shard: Shard | None = None) -> None:
        self.shard = shard

    def train_nodes(self, nodes: torch.Tensor) -> torch.Tensor:
        """Full batch: a disjoint share of :obj:`nodes`, equal to one node."""
        if self.shard is None:
            return nodes
        return nodes.tensor_split(self.shard.world_size)[self.shard.rank]

    def seed_batches(self, num_seeds: int, batch_size: int, seed: int
                     ) -> "ShardedBatches | None":
        """Neighbor sampling: this rank's batches of each epoch's shuffled
        seeds (:class:`ShardedBatches`), or None (the loader shuffles them all)."""
        if self.shard is None:
            return None
        return ShardedBatches(num_seeds, batch_size, self.shard, seed)

    def rank_seed(self, seed: int) -> int:
        """A seed of this rank's own random draws (GraphSAINT's walks)."""
        return seed + (self.shard.rank if self.shard is not None else 0)

    def steps(self, steps: int, device: torch.device) -> int:
        """Of an epoch of :obj:`steps` independent draws, this rank's count:
        the work split across the ranks, and the largest count of any rank,
        so all take as many."""
        if self.shard is None or self.shard.world_size == 1:
            return steps
        return max_over_ranks(math.ceil(steps / self.shard.world_size), self.shard, device)

    def share(self, items: list, too_few: str) -> list:
        """Of one epoch's batches, the same on every rank (same parts, same
        seed), a disjoint, equally long share; a one-line error ending in
        :obj:`too_few` (the fix) when there are fewer than ranks."""
        if self.shard is None:
            return items
        world = self.shard.world_size
        usable = len(items) // world * world
        if usable == 0:
            raise GnnperfError(f"{len(items)} batches for {world} ranks: {too_few}")
        return items[self.shard.rank:usable:world]


class ShardedBatches:
    r"""A batch sampler giving each rank a disjoint share of the seed nodes:
    per epoch a seeded permutation (the same on every rank) split into
    :math:`B = W \lceil \lceil n / b \rceil / W \rceil` nearly equal batches,
    rank :math:`r` taking batches :math:`r, r + W, \dots`. Every seed is in
    exactly one batch per epoch and every rank takes the same number of steps
    (DDP all-reduces once per step on every rank). torch's
    ``DistributedSampler`` instead pads by repeating seeds.

    Args:
        num_seeds (int): Seed nodes to cover (indices ``0..n-1``).
        batch_size (int): Seeds per batch at most.
        shard (Shard): This rank and the world size.
        seed (int): Seed of the permutation (advanced per epoch).
    """

    def __init__(self, num_seeds: int, batch_size: int, shard: Shard, seed: int = 0) -> None:
        self.num_seeds, self.shard, self.seed, self.epoch = num_seeds, shard, seed, 0
        world = shard.world_size
        self.num_batches = world * max(1, math.ceil(math.ceil(num_seeds / batch_size) / world))

    def __len__(self) -> int:
        return self.num_batches // self.shard.world_size

    def __iter__(self) -> Iterator[list[int]]:
        generator = torch.Generator().manual_seed(self.seed * 100003 + self.epoch)
        self.epoch += 1
        order = torch.randperm(self.num_seeds, generator=generator)
        chunks = torch.tensor_split(order, self.num_batches)
        for chunk in chunks[self.shard.rank::self.shard.world_size]:
            yield chunk.tolist()


class AllReduceTimer:
    r"""A DDP communication hook: the default all-reduce, timed from the
    moment DDP hands a bucket over to the all-reduce's completion, summed
    over buckets (they overlap the backward pass, so the sum is an upper
    bound of the time communication adds to a step).

    On gloo (CPU) the bucket's future completes when the all-reduce has, so
    the host clock times it. On NCCL the future completes as soon as the
    work is queued (a host clock would read about 0): there a CUDA event is
    recorded on the current stream as the bucket is handed over and one in
    the completion callback, whose stream waits for NCCL's work (CUDA
    futures synchronise a callback's streams with the work's events); the
    events are read after the run (:attr:`seconds`), never in a step.
    Unverified on a GPU so far (docs/gpu-runner.md).

    Args:
        device (torch.device, optional): This rank's device.
        event_factory (callable, optional): Makes a timing event (a stand-in
            for :class:`torch.cuda.Event` in tests).
    """

    def __init__(self, device: torch.device | None = None,
                 event_factory: Callable[[], Any] | None = None) -> None:
        self.cuda = device is not None and device.type == "cuda"
        self._event = event_factory or (lambda: torch.cuda.Event(enable_timing=True))
        self._host_seconds = 0.0
        self._events: list[tuple[Any, Any]] = []
        self.steps = 0

    def hook(self, process_group, bucket):
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

        last = bucket.is_last()  # one step's last bucket
        if self.cuda:
            start = self._event()
            start.record()
        else:
            start = time.perf_counter()
        future = allreduce_hook(process_group, bucket)

        def done(fut):
            if self.cuda:  # on a stream that waited for the all-reduce
                end = self._event()
                end.record()
                self._events.append((start, end))
            else:
                self._host_seconds += time.perf_counter() - start
            self.steps += last
            # allreduce_hook's future already holds the averaged bucket
            # tensor, which DDP copies back into the gradients.
            return fut.value()
        return future.then(done)

    @property
    def seconds(self) -> float:
        """All-reduce seconds so far (on CUDA waits for the recorded events)."""
        if self._events:
            for _, end in self._events:  # recorded on different streams: wait for each
                end.synchronize()
            self._host_seconds += sum(start.elapsed_time(end)
                                      for start, end in self._events) / 1e3
            self._events.clear()
        return self._host_seconds


def gather_to_rank0(obj: Any) -> list[Any] | None:
    """Every rank's :obj:`obj` on rank 0 (None elsewhere)."""
    shard = current_shard()
    if shard.world_size == 1:
        return [obj]
    gathered = [None] * shard.world_size if shard.rank == 0 else None
    dist.gather_object(obj, gathered, dst=0)
    return gathered


def rank_device(device: torch.device) -> torch.device:
    """One GPU per rank: ``cuda:LOCAL_RANK`` on CUDA runs."""
    if device.type == "cuda":
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", device.index or 0)))
    return device


def max_over_ranks(value: int, shard: Shard, device: torch.device) -> int:
    """The largest :obj:`value` any rank holds (every rank must take as many
    DDP steps): an all-reduce where there are several ranks. NCCL reduces
    device tensors only; gloo, host ones."""
    if shard.world_size == 1:
        return value
    where = device if shard.backend == "nccl" else torch.device("cpu")
    count = torch.tensor([value], device=where)
    dist.all_reduce(count, op=dist.ReduceOp.MAX)
    return int(count)
