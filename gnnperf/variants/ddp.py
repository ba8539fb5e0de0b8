"""Data-parallel training with PyTorch's ``DistributedDataParallel``: every rank
trains a replica on its share of the training work, and DDP all-reduces the
gradients (gloo on CPU, NCCL on GPUs)."""
from __future__ import annotations

import os

import torch

from gnnperf.ranks import AllReduceTimer
from gnnperf.errors import GnnperfError
from gnnperf.variants.base import Technique, TrainingRun, seed_generators

# Fault injection for the tests and the docs' failure demo: "RANK:STEP" makes
# that rank raise in its STEP-th forward pass.
FAULT_ENV = "GNNPERF_DDP_FAULT"


class Ddp(Technique):
    r"""Wraps the model in :class:`~torch.nn.parallel.DistributedDataParallel`.

    The share of each rank is set up by the variant before any technique
    applies (:attr:`~gnnperf.variants.base.TrainingRun.shard`): full batch, a
    disjoint equal share of the training nodes; ``sampled``, a disjoint shard
    of each epoch's shuffled seeds (:class:`~gnnperf.distributed.ShardedBatches`);
    ``saint``, independent walks per rank; ``cluster``, a disjoint share of
    each epoch's cluster batches. Gradients are averaged across ranks, so with
    equal shares a step equals one process's step on all of them (a test).
    Ranks are seeded with ``seed + rank`` after the model is built (DDP
    broadcasts rank 0's parameters); the all-reduce time per step is
    recorded through a DDP communication hook.
    """
    name = "ddp"
    order = 85  # wraps the final model; compiled (90) then compiles the DDP module
    data_parallel = True
    in_comparison = False  # one rank alone is the baseline: see --world-size
    step_untraceable_because = ("its gradient all-reduce runs in autograd hooks, which a traced "
                                "backward skips")

    def apply(self, run: TrainingRun) -> None:
        from torch.nn.parallel import DistributedDataParallel

        shard = run.shard
        # The rank's own GPU (init_from_env made it current before the group).
        device_ids = ([run.device.index if run.device.index is not None
                       else torch.cuda.current_device()] if run.device.type == "cuda" else None)
        ddp = DistributedDataParallel(run.model, device_ids=device_ids)
        timer = AllReduceTimer(run.device)
        ddp.register_comm_hook(None, timer.hook)
        seed_generators(run.config.seed + shard.rank, run.device)
        forward = ddp
        fault = os.environ.get(FAULT_ENV)
        if fault:
            forward = _faulty(ddp, fault, shard.rank)
        run.forward = forward
        run.stats.update(world_size=shard.world_size, backend=shard.backend, rank=shard.rank)

        def finish() -> None:
            if timer.steps:  # a hook that never fired leaves the figure n/a, not 0
                run.stats["allreduce_ms_per_step"] = timer.seconds / timer.steps * 1e3
        run.on_finish.append(finish)


def _faulty(forward, spec: str, rank: int):
    try:
        fault_rank, fault_step = (int(part) for part in spec.split(":"))
    except ValueError:
        raise GnnperfError(f"{FAULT_ENV}={spec!r}: use RANK:STEP, e.g. 1:3") from None
    calls = [0]

    def call(*args, **kwargs):
        calls[0] += 1
        if rank == fault_rank and calls[0] == fault_step:
            raise RuntimeError(f"injected fault in step {fault_step} ({FAULT_ENV})")
        return forward(*args, **kwargs)
    return call
