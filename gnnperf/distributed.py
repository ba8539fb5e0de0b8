"""Data-parallel runs across processes with ``torch.distributed``, above the
measurement: local launch through PyTorch's elastic launcher (what
``torchrun`` runs), each rank measuring its variants, the ranks' results
combined. The process-group layer the techniques use (groups, seed shards,
the all-reduce timer) is :mod:`gnnperf.ranks`, re-exported here. No
communication layer of our own."""
from __future__ import annotations

import logging
import os
import socket
import tempfile
import time
import uuid
from typing import Any, Callable

import torch.distributed as dist

from gnnperf import warm
from gnnperf.errors import GnnperfError
# The process-group layer the techniques use, re-exported: the launcher's API too.
from gnnperf.ranks import (TIMEOUT_S, AllReduceTimer, Shard, ShardedBatches,
                            current_shard, gather_to_rank0, init_from_env,
                            launched_by_torchrun, rank_device, resolve_backend)

LOOPBACK = "127.0.0.1"


def free_port() -> int:
    """A loopback port nobody listens on now (the launcher binds it next)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


def launch(world_size: int, entrypoint: Callable[..., Any], *args: Any) -> dict[int, Any]:
    """Runs :obj:`entrypoint(*args)` in :obj:`world_size` local processes with
    PyTorch's elastic launcher (``torchrun``'s engine) on a loopback
    rendezvous; returns each rank's return value. A rank that raises or dies
    stops the others (no restarts) and becomes a one-line
    :class:`GnnperfError` naming the rank and its error."""
    from torch.distributed.elastic.multiprocessing.api import DefaultLogsSpecs
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    if world_size < 1:
        raise GnnperfError(f"--world-size must be >= 1, got {world_size}")
    # Ranks forked from the warm interpreter (gnnperf.warm) skip importing
    # torch and PyG again, seconds of CPU per rank.
    start_method, handover = warm.rank_context()
    config = LaunchConfig(
        min_nodes=1, max_nodes=1, nproc_per_node=world_size, run_id=uuid.uuid4().hex,
        rdzv_backend="c10d", rdzv_endpoint=f"{LOOPBACK}:{free_port()}",
        rdzv_configs={"timeout": TIMEOUT_S}, max_restarts=0, monitor_interval=0.1,
        start_method=start_method, logs_specs=DefaultLogsSpecs(), local_addr=LOOPBACK,
        shutdown_timeout=5)
    # The launcher logs a failed rank's whole traceback; the one line below says it.
    quiet = [logging.getLogger(name) for name in (
        "torch.distributed.elastic", "torch.multiprocessing", "torch.distributed.launcher")]
    levels = [logger.level for logger in quiet]
    for logger in quiet:
        logger.setLevel(logging.CRITICAL)
    with tempfile.TemporaryDirectory(prefix="gnnperf-ranks-") as report_dir:
        try:
            return elastic_launch(config, _recording_rank)(report_dir, handover, entrypoint,
                                                           *args)
        except ChildFailedError as exc:
            # A rank that fails first takes the others' collectives down with
            # it, and its echo (a closed connection on a rank that exits
            # sooner) can be all the launcher saw before it stopped the rest:
            # name the first rank whose own error is not a lost connection,
            # from what each rank recorded as it raised, then the launcher's.
            seen = {rank: (failure.timestamp, _failure_line(failure))
                    for rank, failure in exc.failures.items()}
            seen.update(_recorded_failures(report_dir))
            rank, (_, line) = min(seen.items(), key=lambda item: (
                _collateral(item[1][1]), item[1][0], item[0]))
            raise GnnperfError(f"rank {rank} of {world_size} failed: {line}; "
                               f"the other ranks were stopped") from None
        except GnnperfError:
            raise
        except Exception as exc:  # rendezvous errors
            raise GnnperfError(f"cannot start {world_size} local ranks ({type(exc).__name__}: "
                               f"{str(exc).strip().splitlines()[0] if str(exc) else ''})"
                               ) from None
        finally:
            for logger, level in zip(quiet, levels):
                logger.setLevel(level)


def _recording_rank(report_dir: str, handover: tuple[dict, dict] | None,
                    entrypoint: Callable[..., Any], *args: Any) -> Any:
    """Runs one rank's :obj:`entrypoint` in the launcher's environment
    (:func:`gnnperf.warm.adopt_environment`); an exception is written to
    ``report_dir/<rank>`` (time and one line) before it propagates, that is
    before this rank's sockets close and its peers fail in turn."""
    warm.adopt_environment(handover)
    try:
        return entrypoint(*args)
    except Exception as exc:
        # A step's crash arrives wrapped as the variant's failure: the rank
        # names what crashed (the wrapper's words are the run's, not the rank's).
        cause = exc.__cause__ if isinstance(exc, GnnperfError) and exc.__cause__ else exc
        text = str(cause).strip().splitlines()
        line = f"{type(cause).__name__}: {text[0]}" if text else type(cause).__name__
        path = os.path.join(report_dir, os.environ.get("RANK", "0"))
        with open(path + ".tmp", "w") as file:
            file.write(f"{time.time()}\n{line[:300]}")
        os.replace(path + ".tmp", path)
        raise


def _recorded_failures(report_dir: str) -> dict[int, tuple[float, str]]:
    """What :func:`_recording_rank` wrote: rank -> (time, error line)."""
    found = {}
    for name in os.listdir(report_dir):
        if name.isdigit():
            with open(os.path.join(report_dir, name)) as file:
                stamp, _, line = file.read().partition("\n")
            found[int(name)] = (float(stamp), line)
    return found


_COLLATERAL = ("Connection closed by peer", "Connection reset by peer", "DistNetworkError",
               "Socket Timeout", "timed out", "killed by signal",
               "got signal")  # SignalException: the launcher stopping a rank


def _collateral(line: str) -> bool:
    """Whether a rank's error is the echo of another rank's failure."""
    return any(text in line for text in _COLLATERAL)


def _failure_line(failure) -> str:
    """The rank's own exception, one line, from the elastic error file."""
    message = failure.message
    if isinstance(message, dict):
        message = message.get("message", "")
    lines = [line.strip() for line in str(message).splitlines() if line.strip()]
    if lines:
        # The error file's message is "ExcType: text" followed by a traceback.
        head = lines[0]
        return head if len(head) < 300 else head[:300] + "..."
    if failure.exitcode is not None and failure.exitcode < 0:
        return f"killed by signal {-failure.exitcode}"
    return f"exit code {failure.exitcode}"


def _measure_rank(variants: tuple, dataset, config, device_name: str, warmup: int,
                  threads: int, backend: str, track_accuracy: bool = True) -> dict:
    """One launched rank: join the group and measure each variant on the
    graph the launcher loaded (passed in, never loaded again by name),
    in turn (variant -> result)."""
    from gnnperf.measure.runner import measure_variant, resolve_device, set_threads

    device = rank_device(resolve_device(device_name))
    init_from_env(resolve_backend(backend, device), device)
    try:
        set_threads(threads)
        return {variant: measure_variant(variant, dataset, config, device, warmup,
                                         track_accuracy=track_accuracy)
                for variant in variants}
    finally:
        dist.destroy_process_group()


def _slowest_clock(results: list) -> dict | None:
    """Rank 0's accuracy curve (every rank holds the same model) on the
    clock of the slowest rank, epoch by epoch: a step waits for all."""
    curves = [r.convergence for r in results]
    if any(curve is None for curve in curves):
        return None
    return {**curves[0], "setup_s": max(c["setup_s"] for c in curves),
            "epoch_s": [max(epoch) for epoch in zip(*(c["epoch_s"] for c in curves))]}


def combine_ranks(results: list, reference_epoch_s: float | None = None):
    """One result from every rank's: the epoch takes the slowest rank's time,
    throughput counts every rank's seeds and edges, and with a one-rank
    :obj:`reference_epoch_s` the strong-scaling efficiency
    ``T1 / (W * T_W)`` (the epoch's work is fixed and split across ranks)."""
    import dataclasses

    world = len(results)
    slowest = max(results, key=lambda r: r.epoch_time.median)
    seconds = slowest.epoch_time.median
    seeds = sum(r.seed_nodes_per_s * r.epoch_time.median for r in results)
    edges = (sum(r.sampled_edges_per_s * r.epoch_time.median for r in results)
             if results[0].sampled_edges_per_s is not None else None)
    # A rank without the figure leaves it n/a, never 0.
    per_rank_ms = [r.extra.get("allreduce_ms_per_step") for r in results]
    allreduce_ms = None if None in per_rank_ms else max(per_rank_ms)
    steps = results[0].steps_per_epoch
    extra = {**results[0].extra,
             "world_size": world,
             "per_rank_epoch_ms": [r.epoch_time.median * 1e3 for r in results],
             "allreduce_ms_per_step": allreduce_ms,
             "allreduce_share": (allreduce_ms * 1e-3 * steps / seconds
                                 if seconds and allreduce_ms is not None else None),
             "scaling": "strong: each epoch's work fixed, split across ranks",
             "scaling_efficiency": (reference_epoch_s / (world * seconds)
                                    if reference_epoch_s and seconds else None),
             "one_rank_epoch_ms": reference_epoch_s * 1e3 if reference_epoch_s else None}
    extra.pop("rank", None)
    return dataclasses.replace(results[0], epoch_time=slowest.epoch_time,
                               convergence=_slowest_clock(results),
                               seed_nodes_per_s=seeds / seconds,
                               sampled_edges_per_s=None if edges is None else edges / seconds,
                               extra=extra)


def measure_data_parallel_many(variants: list, world_size: int, dataset, config,
                               device_name: str, warmup: int, threads: int,
                               backend: str = "auto", one_rank_epoch_s: dict | None = None,
                               track_accuracy: bool = True) -> dict:
    """Measures each of :obj:`variants` (:class:`~gnnperf.variants.Variant`)
    on :obj:`dataset` (a loaded :class:`~gnnperf.data.Dataset`, handed to
    every rank) on the same :obj:`world_size` local ranks, one after the
    other (a rank's start, torch's import and the group's set-up, is paid
    once per launch, more with CUDA's), and those
    :obj:`one_rank_epoch_s` (variant -> seconds) has no figure for on one
    rank, launched alike, for the scaling efficiency; variant -> result. A
    rank that fails fails them all (:func:`launch`):
    :func:`measure_each_data_parallel` keeps the others' results."""
    args = (dataset, config, device_name, warmup, threads, backend, track_accuracy)
    ranks = launch(world_size, _measure_rank, tuple(variants), *args)
    per_variant = {variant: [ranks[rank][variant] for rank in sorted(ranks)]
                   for variant in variants}
    reference = dict(one_rank_epoch_s or {})
    if world_size == 1:
        reference = {variant: results[0].epoch_time.median
                     for variant, results in per_variant.items()}
    missing = tuple(variant for variant in variants if variant not in reference)
    if missing:
        one = launch(1, _measure_rank, missing, *args)[0]
        reference.update({variant: one[variant].epoch_time.median for variant in missing})
    return {variant: combine_ranks(results, reference[variant])
            for variant, results in per_variant.items()}


def measure_each_data_parallel(variants: list, *args, **kwargs) -> dict:
    """:func:`measure_data_parallel_many`, and where that shared launch
    fails, each variant in a launch of its own: variant -> its result or the
    :class:`GnnperfError` it alone failed with (the others keep theirs)."""
    if len(variants) > 1:
        try:
            return measure_data_parallel_many(variants, *args, **kwargs)
        except GnnperfError:
            pass  # which variant failed is found by launching each alone
    reference = kwargs.pop("one_rank_epoch_s", None) or {}
    found = {}
    for variant in variants:
        try:
            found[variant] = measure_data_parallel(
                variant, *args, **kwargs, one_rank_epoch_s=reference.get(variant))
        except GnnperfError as exc:
            found[variant] = exc
    return found


def measure_data_parallel(variant, world_size: int, dataset, config, device_name: str,
                          warmup: int, threads: int, backend: str = "auto",
                          one_rank_epoch_s: float | None = None, track_accuracy: bool = True):
    """:func:`measure_data_parallel_many` of one variant."""
    return measure_data_parallel_many(
        [variant], world_size, dataset, config, device_name, warmup, threads, backend,
        None if one_rank_epoch_s is None else {variant: one_rank_epoch_s},
        track_accuracy)[variant]


__all__ = ["AllReduceTimer", "LOOPBACK", "Shard", "ShardedBatches", "TIMEOUT_S", "combine_ranks",
           "current_shard", "free_port", "gather_to_rank0", "init_from_env", "launch",
           "launched_by_torchrun", "measure_data_parallel", "measure_data_parallel_many",
           "measure_each_data_parallel", "rank_device", "resolve_backend"]
