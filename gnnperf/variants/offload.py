"""CPU offload: the graph, its features and labels stay in host memory (pinned
on CUDA); each mini-batch is built on the host and copied to the device on a
side stream at the start of the step that trains on it, while the previous
step's kernels still run (PyG's ``PrefetchLoader`` idea), so only the model
and the current batch live on the device."""
from __future__ import annotations

import dataclasses
import statistics
import time

import torch
from torch import Tensor

from gnnperf.models import CsrMatrix
from gnnperf.variants.base import Batch, Technique, TrainingRun

_COPIED = ("x", "graph", "edge_weight", "y", "loss_nodes", "loss_weight")


class BatchCopier:
    r"""Copies a host :class:`Batch` to :obj:`device`: on CUDA from pinned
    memory with ``non_blocking=True`` on its own stream, which the compute
    stream then waits for (the copy of batch *i + 1* overlaps step *i*, as
    batches are made while the previous step's kernels run); on CPU the batch
    passes through untouched.

    Records per step the bytes copied, the host's pinning time (a
    synchronous host copy into page-locked memory, on the host's clock) and,
    through CUDA events on the copy stream around the host-to-device copies
    alone, the copy time (read once the epoch is over, never in the step).
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.cuda = device.type == "cuda"
        self.stream = torch.cuda.Stream(device) if self.cuda else None
        self.bytes_per_step: list[int] = []
        self.pin_seconds: list[float] = []
        self._events: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []

    def to_device(self, batch: Batch) -> Batch:
        """The batch on the device: a new :class:`Batch` either way (what
        runs after the copy rewrites its fields, and a batch stepped again,
        as the fixed batches of A/B timing are, must still be the host one)."""
        if not self.cuda:
            return dataclasses.replace(batch)
        # PyG's loader gathers a batch into pageable memory: pinned first (one
        # host copy, as PyG's PrefetchLoader makes) so the DMA runs
        # asynchronously on the copy stream. Pinning is host work that ends
        # before it returns: timed on the host's clock, apart from the
        # copies, which the events below time alone.
        started = time.perf_counter()
        pinned = {}
        for name in _COPIED:
            value = getattr(batch, name)
            if isinstance(value, Tensor):
                pinned[name] = _pinned(value)
            elif isinstance(value, CsrMatrix):  # sparse features: only the stored values
                pinned[name] = value.map_tensors(_pinned)
        self.pin_seconds.append(time.perf_counter() - started)
        compute = torch.cuda.current_stream(self.device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        moved, on_device, nbytes = {}, [], 0

        def copy(host: Tensor) -> Tensor:
            nonlocal nbytes
            nbytes += host.numel() * host.element_size()
            on_device.append(host.to(self.device, non_blocking=True))
            return on_device[-1]
        with torch.cuda.stream(self.stream):
            start.record(self.stream)
            for name, value in pinned.items():
                moved[name] = copy(value) if isinstance(value, Tensor) else value.map_tensors(copy)
            end.record(self.stream)
        compute.wait_stream(self.stream)
        for tensor in on_device:
            tensor.record_stream(compute)  # allocated on the copy stream, used on compute
        self.bytes_per_step.append(nbytes)
        self._events.append((start, end))
        return dataclasses.replace(batch, **moved)

    def summary(self) -> dict[str, float]:
        """Mean MiB, median copy milliseconds (host-to-device copies alone,
        CUDA events) and median pinning milliseconds (host clock) per step;
        empty on CPU (n/a)."""
        if not self.cuda or not self._events:
            return {}
        torch.cuda.synchronize(self.device)
        copy_ms = [start.elapsed_time(end) for start, end in self._events]
        return {"transfer_mib_per_step": statistics.fmean(self.bytes_per_step) / 2 ** 20,
                "copy_ms_per_step": statistics.median(copy_ms),
                "pin_ms_per_step": statistics.median(self.pin_seconds) * 1e3}


def _pinned(host: Tensor) -> Tensor:
    return host if host.is_pinned() else host.pin_memory()


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
