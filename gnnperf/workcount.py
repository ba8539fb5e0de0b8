"""Noise-free work metrics of one training step, for exact CI comparison.

Wall-clock time on a shared CI machine moves by several percent between
identical runs; the amount of *work* a step does does not. For one training
step of a variant this module counts:

* ``aten_ops``: ATen operator calls (a :class:`TorchDispatchMode` counter,
  forward, backward and optimiser included);
* ``flops``: floating-point operations (:class:`torch.utils.flop_counter.FlopCounterMode`;
  matrix products and convolutions, as that module counts them);
* ``bytes_allocated`` and ``peak_bytes``: the sum of allocations and the peak
  of live bytes above the step's start, from the torch profiler's memory events;
* ``profiled_ops``: operator events the torch profiler records (dispatcher ops
  at every nesting level, autograd nodes, compiled regions);
* ``compiled_graphs``, ``graph_breaks`` and ``recompiles`` for compiled variants.

Dynamo does not run compiled code under a Python dispatch mode: under the op
and FLOP counters a compiled module runs its eager equivalent, so for compiled
variants ``aten_ops`` and ``flops`` are those of the eager model (the same
maths); ``profiled_ops`` and the memory figures come from the profiler, which
sees the compiled code itself.

With a fixed seed, thread count and batch these are identical on every run, so
any change is a structural change of the step. Everything here returns data
and never prints. The module depends only on the stable variant API (a prepared
:mod:`gnnperf.case`), so the A/B gate can load it from the working tree and
use it on an older checkout.
"""
from __future__ import annotations

import gc
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import torch
# Private module, public class: the documented way to write a dispatch mode
# (PyTorch's own FlopCounterMode and DebugMode derive from it); a canary
# test (tests/test_workcount.py) counts known ops through it.
from torch.utils._python_dispatch import TorchDispatchMode

if TYPE_CHECKING:
    from gnnperf.case import PreparedCase

#: The metrics an exact gate compares (all integers, or None where they do not apply).
EXACT_FIELDS = ("aten_ops", "flops", "profiled_ops", "bytes_allocated", "peak_bytes",
                "compiled_graphs", "graph_breaks", "recompiles")


@dataclass
class WorkMetrics:
    r"""The work of one training step of :obj:`variant` on :obj:`dataset`.

    Args:
        aten_ops (int): ATen operator calls in one step.
        flops (int): FLOPs of one step (FlopCounterMode's count).
        bytes_allocated (int): Bytes allocated during one step (profiler
            memory events); :obj:`None` if the profiler recorded none.
        peak_bytes (int): Peak live bytes above the step's start (above the
            lowest level before the peak, see :func:`profile_work`).
        profiled_ops (int): Operator events the profiler recorded in one step.
        compiled_graphs (int): Dynamo graphs since the run was built
            (compiled variants only, else :obj:`None`).
        graph_breaks (int): Dynamo graph breaks since the run was built.
        recompiles (int): Graphs compiled during the second epoch, when the
            first epoch has already compiled everything it needs.
        op_counts (dict): Calls per ATen operator (for diagnosing a change).
    """
    variant: str
    dataset: str
    device: str
    threads: int
    aten_ops: int
    flops: int
    bytes_allocated: int | None
    peak_bytes: int | None
    profiled_ops: int = 0
    compiled_graphs: int | None = None
    graph_breaks: int | None = None
    recompiles: int | None = None
    op_counts: dict[str, int] = field(default_factory=dict)

    def exact(self) -> dict[str, int | None]:
        """The metrics an exact gate compares."""
        return {name: getattr(self, name) for name in EXACT_FIELDS}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class OpCounter(TorchDispatchMode):
    """Counts ATen operator calls by overload packet (``aten.mm``, ...)."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[str(func.overloadpacket)] += 1
        return func(*args, **(kwargs or {}))

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def count_ops(fn: Callable[[], object]) -> Counter[str]:
    """ATen calls made by :obj:`fn`, per operator."""
    counter = OpCounter()
    with counter:
        fn()
    return counter.counts


def count_flops(fn: Callable[[], object]) -> int:
    """FLOPs of :obj:`fn` as :class:`FlopCounterMode` counts them."""
    from torch.utils.flop_counter import FlopCounterMode

    mode = FlopCounterMode(display=False)
    with mode:
        fn()
    return int(mode.get_total_flops())


@dataclass
class ProfiledWork:
    """What the profiler saw of one call: operator events, and the bytes
    allocated and peak live bytes (:obj:`None` without memory events)."""
    ops: int
    bytes_allocated: int | None
    peak_bytes: int | None


def profile_work(fn: Callable[[], object]) -> ProfiledWork:
    """Operator events of :obj:`fn`, its bytes allocated and its peak of live
    bytes above its start, from the torch profiler's events."""
    from torch.profiler import ProfilerActivity, profile

    gc.collect()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    all_events = prof.profiler.kineto_results.events()
    events = [e for e in all_events if e.name() == "[memory]"]
    ops = len(all_events) - len(events)
    if not events:
        return ProfiledWork(ops, None, None)
    # Events of one thread; their start times order them (ties keep record order).
    events.sort(key=lambda e: e.start_ns())
    # The peak is the largest rise of live bytes above their lowest level
    # before it: frees of blocks allocated before the call are reported only
    # when an earlier profiling session saw the allocation, so the level
    # before the step's own allocations is not reliably zero.
    live = low = peak = allocated = 0
    for event in events:
        nbytes = int(event.nbytes())
        live += nbytes
        low = min(low, live)
        peak = max(peak, live - low)
        if nbytes > 0:
            allocated += nbytes
    return ProfiledWork(ops, allocated, peak)


def measure_work(case: "PreparedCase") -> WorkMetrics:
    """The work metrics of one step of :obj:`case` (three instrumented steps:
    op count, FLOPs, profiler; each on the same batch)."""
    run = case.run
    ops = count_ops(case.step)
    flops = count_flops(case.step)
    profiled = profile_work(case.step)
    counter = run.compile_counter
    recompiles = case.recompiles
    if counter is not None:
        # Graphs compiled by the instrumented steps count as recompiles too.
        recompiles = counter.graphs - case.graphs_after_first_epoch
    return WorkMetrics(
        variant=case.variant,
        dataset=case.dataset,
        device=str(run.device),
        threads=torch.get_num_threads(),
        aten_ops=sum(ops.values()),
        flops=flops,
        bytes_allocated=profiled.bytes_allocated,
        peak_bytes=profiled.peak_bytes,
        profiled_ops=profiled.ops,
        compiled_graphs=counter.graphs if counter is not None else None,
        graph_breaks=counter.graph_breaks if counter is not None else None,
        recompiles=recompiles,
        op_counts=dict(sorted(ops.items())),
    )


def work_metrics(variant: str, data, config=None, device: torch.device | str = "cpu",
                 threads: int | None = 1) -> WorkMetrics:
    """Builds, warms up and measures :obj:`variant` on :obj:`data` (a
    :class:`~gnnperf.case.Case` with :obj:`threads`; :obj:`config` a
    ``TrainConfig`` or None)."""
    from gnnperf.case import Case, prepare
    from gnnperf.variants import TrainConfig

    defaults = asdict(TrainConfig())
    overrides = tuple(sorted((k, v) for k, v in asdict(config).items() if v != defaults[k])) \
        if config is not None else ()
    case = Case(variant, str(getattr(data, "name", "custom")), overrides, str(device), threads)
    return measure_work(prepare(case, data))


def compare_exact(base: dict[str, Any], head: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """The exact metrics that differ between two :meth:`WorkMetrics.exact`
    dicts, as ``(name, base, head)``."""
    return [(name, base.get(name), head.get(name)) for name in EXACT_FIELDS
            if base.get(name) != head.get(name)]


__all__ = ["EXACT_FIELDS", "OpCounter", "ProfiledWork", "WorkMetrics", "compare_exact",
           "count_flops", "count_ops", "measure_work", "profile_work", "work_metrics"]
