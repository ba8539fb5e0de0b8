"""CPU offload: the graph, its features and labels stay in host memory (pinned
on CUDA); each mini-batch is built on the host and copied to the device on a
side stream at the start of the step that trains on it, while the previous
step's kernels still run (PyG's ``PrefetchLoader`` idea), so only the model
and the current batch live on the device."""
from __future__ import annotations

import dataclasses
import statistics

import torch
from torch import Tensor

from gnnperf.variants.base import Batch, Technique, TrainingRun

_COPIED = ("x", "graph", "edge_weight", "y", "loss_nodes", "loss_weight")


class BatchCopier:
    r"""Copies a host :class:`Batch` to :obj:`device`: on CUDA from pinned
    memory with ``non_blocking=True`` on its own stream, which the compute
    stream then waits for (the copy of batch *i + 1* overlaps step *i*, as
    batches are made while the previous step's kernels run); on CPU the batch
    passes through untouched.

    Records per step the bytes copied and, through CUDA events on the copy
    stream, the copy time (read once the epoch is over, never in the step).
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.cuda = device.type == "cuda"
        self.stream = torch.cuda.Stream(device) if self.cuda else None
        self.bytes_per_step: list[int] = []
        self._events: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []

    def to_device(self, batch: Batch) -> Batch:
        if not self.cuda:
            return batch
        compute = torch.cuda.current_stream(self.device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        moved, nbytes = {}, 0
        with torch.cuda.stream(self.stream):
            start.record(self.stream)
            for name in _COPIED:
                value = getattr(batch, name)
                if isinstance(value, Tensor):
                    host = value if value.is_pinned() else value.pin_memory()
                    moved[name] = host.to(self.device, non_blocking=True)
                    nbytes += host.numel() * host.element_size()
            end.record(self.stream)
        compute.wait_stream(self.stream)
        for tensor in moved.values():
            tensor.record_stream(compute)  # allocated on the copy stream, used on compute
        self.bytes_per_step.append(nbytes)
        self._events.append((start, end))
        return dataclasses.replace(batch, **moved)

    def summary(self) -> dict[str, float]:
        """Mean MiB and median copy milliseconds per step; empty on CPU (n/a)."""
        if not self.cuda or not self._events:
            return {}
        torch.cuda.synchronize(self.device)
        copy_ms = [start.elapsed_time(end) for start, end in self._events]
        return {"transfer_mib_per_step": statistics.fmean(self.bytes_per_step) / 2 ** 20,
                "copy_ms_per_step": statistics.median(copy_ms)}


class Offload(Technique):
    r"""Keeps the data on the host and moves only each batch to the device.

    Combines with every batch technique (``sampled``, ``saint``,
    ``cluster``): they sample and gather on the host, and the batch is copied
    before the steps that follow it (normalisation, trimming, sparse
    adjacency) run on the device. ``sampled`` alone on a GPU holds the whole
    graph and its features in GPU memory; ``sampled+offload`` holds the model
    and one batch. On CPU the copy is a no-op, and the loss curve equals the
    variant without offload. Evaluation runs a host copy of the model on the
    full graph, which never goes to the device.
    """
    name = "offload"
    order = 15  # after the batch techniques and trimming, whose hook it wraps
    keeps_data_on_host = True
    needs_batches = True

    @classmethod
    def standard_variant(cls) -> str:
        return "sampled+offload"

    def apply(self, run: TrainingRun) -> None:
        copier = BatchCopier(run.device)
        # The batch techniques' batches stay on the host; the copy and what
        # follows it on the device (normalisation, trimming, sparse
        # adjacency) start each step, so a step's time and peak hold its own
        # copy and one batch, also where an epoch's batches are made ahead
        # (the asv step benchmarks).
        on_device = run.subgraph_batch
        run.subgraph_batch = lambda batch: batch
        run.batch_to_device = lambda batch: on_device(copier.to_device(batch))
        run.on_finish.append(lambda: run.stats.update(copier.summary()))
