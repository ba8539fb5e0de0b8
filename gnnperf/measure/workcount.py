"""Noise-free work metrics of one training step, for exact CI comparison.

Wall-clock time on a shared CI machine moves by several percent between
identical runs; the amount of *work* a step does does not. For one training
step of a variant this module counts:

* ``aten_ops``: ATen operator calls (a :class:`TorchDispatchMode` counter,
  forward, backward and optimiser included);
* ``flops``: floating-point operations (:class:`torch.utils.flop_counter.FlopCounterMode`;
  matrix products and convolutions, as that module counts them);
* ``bytes_moved`` and ``gather_bytes``: the bytes every ATen op's inputs and
  outputs occupy (what the unfused operators move at least), and the part
  of them moved by indexed ops (gathers, scatters, sparse products),
  counted in the op counter's dispatch pass (:class:`OpCounter`,
  :func:`op_accesses`); the counter also keeps the compulsory traffic (each
  memory that existed before the step and that it touches, once:
  :attr:`OpCounter.compulsory_bytes`), what no implementation, fused or
  not, can go below;
* ``bytes_allocated`` and ``peak_bytes``: the sum of allocations and the peak
  of live bytes above the step's start on the device the step runs on, from
  the torch profiler's memory events (on a GPU the host's are reported
  apart, never added in);
* ``profiled_ops``: operator events the torch profiler records (dispatcher ops
  at every nesting level, autograd nodes, compiled regions);
* ``compiled_graphs``, ``graph_breaks`` and ``recompiles`` for compiled variants.

Dynamo does not run compiled code under a Python dispatch mode: the op and
FLOP counters run compiled code forced eager (:func:`eager_counting`), so for
compiled variants ``aten_ops``, ``flops`` and ``bytes_moved`` are those of the
eager code they compile (the same maths); ``profiled_ops`` and the memory
figures come from the profiler, which sees the compiled code itself.

With a fixed seed, thread count and batch these are identical on every run, so
any change is a structural change of the step. Everything here returns data
and never prints. The module depends only on the stable variant API (a prepared
:mod:`gnnperf.measure.case`), so the A/B gate can load it from the working tree and
use it on an older checkout.
"""
from __future__ import annotations

import contextlib
import gc
import os
import statistics
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import torch
# The two private torch uses of this module stay here, not in
# gnnperf.torch_private: the gate loads this file by path as its instrument
# and runs it against older trees, so it imports nothing of gnnperf at module
# level (tests/test_imports.py checks that). torch_private lists them, and
# tests/test_torch_private.py is their canary. A private module, a public
# class: the documented way to write a dispatch mode (PyTorch's own
# FlopCounterMode and DebugMode derive from it).
from torch.utils._python_dispatch import TorchDispatchMode

if TYPE_CHECKING:
    from gnnperf.measure.case import PreparedCase

#: The metrics an exact gate compares (all integers, or None where they do not apply).
EXACT_FIELDS = ("aten_ops", "flops", "bytes_moved", "gather_bytes", "profiled_ops",
                "bytes_allocated", "peak_bytes", "compiled_graphs", "graph_breaks", "recompiles")


@dataclass
class WorkMetrics:
    r"""The work of one training step of :obj:`variant` on :obj:`dataset`.

    Args:
        aten_ops (int): ATen operator calls in one step.
        flops (int): FLOPs of one step (FlopCounterMode's count).
        bytes_moved (int): Bytes the step's ATen ops read and write, at
            least (:func:`op_accesses`): operator by operator, as the
            unfused (eager) code moves them.
        gather_bytes (int): The part of :obj:`bytes_moved` moved by indexed
            ops (:data:`INDEXED_OPS`), whose roof is the gather bandwidth.
        bytes_allocated (int): Bytes allocated during one step on the
            device it runs on (profiler memory events); :obj:`None` if the
            profiler recorded none there.
        peak_bytes (int): Peak live bytes on that device above the step's
            start (above the lowest level before the peak, see
            :func:`profile_work`).
        profiled_ops (int): Operator events the profiler recorded in one step.
        compiled_graphs (int): Dynamo graphs since the run was built
            (compiled variants only, else :obj:`None`).
        graph_breaks (int): Dynamo graph breaks since the run was built.
        recompiles (int): Graphs compiled during the second epoch, when the
            first epoch has already compiled everything it needs.
        op_counts (dict): Calls per ATen operator (for diagnosing a change).
        host_bytes_allocated (int): For a step on a GPU, the host's own
            bytes allocated (pinned buffers, host-side batch making), apart
            from the device's; :obj:`None` on a CPU step, whose figures
            above are the host's. Not compared exactly (it is not in
            :data:`EXACT_FIELDS`).
        host_peak_bytes (int): For a step on a GPU, the host's peak live
            bytes above the step's start; :obj:`None` on a CPU step.
    """
    variant: str
    dataset: str
    device: str
    threads: int
    aten_ops: int
    flops: int
    bytes_allocated: int | None
    peak_bytes: int | None
    bytes_moved: int = 0
    gather_bytes: int = 0
    profiled_ops: int = 0
    compiled_graphs: int | None = None
    graph_breaks: int | None = None
    recompiles: int | None = None
    op_counts: dict[str, int] = field(default_factory=dict)
    host_bytes_allocated: int | None = None
    host_peak_bytes: int | None = None

    def exact(self) -> dict[str, int | None]:
        """The metrics an exact gate compares."""
        return {name: getattr(self, name) for name in EXACT_FIELDS}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


#: Ops whose memory access is indexed (random rows), not streamed: their
#: bytes are bounded by the gather bandwidth, a fraction of the streaming one.
INDEXED_OPS = frozenset({
    "aten.index_select", "aten.gather", "aten.embedding", "aten.index", "aten.take",
    "aten.index_add", "aten.index_add_", "aten.index_put", "aten.index_put_",
    "aten._index_put_impl_", "aten.scatter", "aten.scatter_", "aten.scatter_add",
    "aten.scatter_add_", "aten.scatter_reduce", "aten.scatter_reduce_",
    "aten.embedding_dense_backward", "gnnperf.csr_mm"})
#: Gathers: their first operand is read only where the index points, so it
#: counts at most as many bytes as the output (a 100-row gather from a
#: million-row table reads 100 rows).
_GATHERS = frozenset({"aten.index_select", "aten.gather", "aten.embedding", "aten.index",
                      "aten.take"})
#: In-place ops that overwrite their first operand without reading it.
_OVERWRITES = frozenset({"aten.copy_", "aten.fill_", "aten.zero_", "aten.uniform_",
                         "aten.normal_", "aten.bernoulli_", "aten.random_",
                         "aten.exponential_", "aten.index_fill_"})
#: Ops that allocate and write nothing.
_ALLOCATES = frozenset({"aten.empty", "aten.empty_like", "aten.new_empty",
                        "aten.empty_strided", "aten.new_empty_strided"})
_SPARSE_COMPRESSED = (torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc)
#: Products that, with a sparse operand, are sparse-dense products: indexed.
_PRODUCTS = frozenset({"aten.mm", "aten.addmm"})


def tensor_bytes(tensor: torch.Tensor) -> int:
    """Bytes a tensor's elements occupy; for sparse tensors those of its
    indices and values."""
    if tensor.layout in _SPARSE_COMPRESSED:
        rows, cols = ((tensor.crow_indices(), tensor.col_indices())
                      if tensor.layout in (torch.sparse_csr, torch.sparse_bsr)
                      else (tensor.ccol_indices(), tensor.row_indices()))
        return sum(t.numel() * t.element_size() for t in (rows, cols, tensor.values()))
    if tensor.is_sparse:
        tensor = tensor if tensor.is_coalesced() else tensor.coalesce()
        return sum(t.numel() * t.element_size() for t in (tensor.indices(), tensor.values()))
    # A broadcast dimension (stride 0, PyG's index.view(-1, 1).expand_as(src)
    # for scatter) repeats the same bytes: only the others occupy memory.
    distinct = 1
    for size, stride in zip(tensor.shape, tensor.stride()):
        if stride != 0:
            distinct *= size
    if tensor.numel() == 0:
        return 0
    return min(distinct * tensor.element_size(), tensor.untyped_storage().nbytes())


def _tensors(tree) -> list[torch.Tensor]:
    """The tensors in an op's (nested lists, tuples and dicts of) arguments."""
    if isinstance(tree, torch.Tensor):
        return [tree]
    if isinstance(tree, dict):
        tree = tuple(tree.values())
    if isinstance(tree, (list, tuple)):
        return [tensor for item in tree for tensor in _tensors(item)]
    return []


def _sparse_operand(args) -> torch.Tensor | None:
    return next((a for a in args if isinstance(a, torch.Tensor)
                 and (a.is_sparse or a.layout in _SPARSE_COMPRESSED)), None)


def _mutated_arguments(func, args, kwargs) -> list[torch.Tensor]:
    """The tensors :obj:`func`'s schema marks as written (``Tensor(a!)``)."""
    # OpOverload._schema is private (see the imports); tests/test_roofline.py's
    # canary counts fused Adam's writes through it.
    mutated = []
    for position, argument in enumerate(func._schema.arguments):
        if argument.alias_info is None or not argument.alias_info.is_write:
            continue
        if argument.name in kwargs:
            value = kwargs[argument.name]
        elif position < len(args) and not argument.kwarg_only:
            value = args[position]
        else:
            continue
        if argument.name != "out":
            mutated += _tensors(value)
    return mutated


def op_flops(name: str, func, args, kwargs, out) -> int:
    """FLOPs of one op for the roofline: FlopCounterMode's formula, except
    that a product with a sparse operand (or ``gnnperf::csr_mm``) does
    2 x nnz x columns, not the dense product's count."""
    from torch.utils.flop_counter import flop_registry
    if name == "gnnperf.csr_mm":  # (crow, col, values, num_cols, dense)
        return 2 * args[1].numel() * args[4].size(-1)
    sparse = _sparse_operand(args) if name in _PRODUCTS else None
    if sparse is not None:
        values = (sparse if sparse.layout in _SPARSE_COMPRESSED else sparse.coalesce()).values()
        # sparse @ dense: each stored value meets a row of the dense operand
        # (out's columns); dense @ sparse: a column of it (out's rows).
        width = out.size(-1) if sparse is args[-2] else out.size(0)
        return 2 * values.numel() * width
    formula = flop_registry.get(func.overloadpacket)
    return int(formula(*args, **kwargs, out_val=out)) if formula is not None else 0


def op_accesses(name: str, func, args, kwargs, out) -> list[tuple[torch.Tensor, int]]:
    """The tensors one op touches, each with the bytes it moves of it at
    least: its inputs once and its outputs once (views, aliases and bare
    allocations move none; an operand an op only overwrites is not read; a
    gathered operand counts at most the output's size, an in-place
    scatter's target at most its source's, read and written)."""
    if func.is_view or name in _ALLOCATES or name == "aten.detach":
        return []
    kwargs = dict(kwargs)
    written = kwargs.pop("out", None)
    outputs = _tensors(out)
    returned = {id(t) for t in outputs}
    # In-place ops that return nothing (fused Adam, the _foreach_*_ ops)
    # write their mutated arguments all the same.
    outputs += [t for t in _mutated_arguments(func, args, kwargs) if id(t) not in returned]
    out_bytes = [tensor_bytes(t) for t in outputs]
    inputs = []
    seen: set[int] = set()
    for tensor in _tensors((args, kwargs)):
        if id(tensor) not in seen:
            seen.add(id(tensor))
            inputs.append(tensor)
    if written is not None or name in _OVERWRITES:
        target = written if written is not None else args[0]
        inputs = [t for t in inputs if t is not target]
    if name == "aten.addmm" and kwargs.get("beta", 1) == 0:  # its self is never read
        inputs = [t for t in inputs if t is not args[0]]
    in_bytes = [tensor_bytes(t) for t in inputs]
    if name in _GATHERS and inputs and inputs[0] is args[0]:
        in_bytes[0] = min(in_bytes[0], sum(out_bytes))
    elif name == "aten.index_fill_" and outputs:
        # index_fill_(self, dim, index, value) writes the rows index names only.
        target, dim, index = args[0], args[1], args[2]
        row = target.numel() // max(target.size(dim), 1) * target.element_size()
        out_bytes[0] = min(out_bytes[0], index.numel() * row)
    elif name in INDEXED_OPS and name.endswith("_") and len(inputs) > 1:
        # index_add_(self, dim, index, source): self is touched where source lands.
        source = max(in_bytes[1:])
        in_bytes[0] = min(in_bytes[0], source)
        outputs, out_bytes = [inputs[0]], [in_bytes[0]]
    return list(zip(inputs, in_bytes)) + list(zip(outputs, out_bytes))


def _has_memory(tensor: torch.Tensor) -> bool:
    return tensor.numel() > 0 and (tensor.layout == torch.strided or tensor.is_sparse
                                   or tensor.layout in _SPARSE_COMPRESSED)


def _storage_key(tensor: torch.Tensor) -> tuple[str, int]:
    """Which memory a tensor lives in: its storage (a sparse tensor's values'
    storage), keyed by device and address."""
    if tensor.layout in _SPARSE_COMPRESSED:
        tensor = tensor.values()
    elif tensor.is_sparse:
        tensor = tensor._values()
    return str(tensor.device), tensor.untyped_storage().data_ptr()


#: Where :func:`op_place` puts an op whose tensors live on more than one
#: device: a copy between them (host to GPU and back), bound by the link
#: between the devices, not by either device's memory.
TRANSFER = "transfer"


def op_place(tensors: list[torch.Tensor]) -> str:
    """Where an op with :obj:`tensors` (its arguments and results) runs: the
    device type they all live on (``cpu``, ``cuda``; 0-dim tensors aside,
    which a kernel on another device takes as a scalar), or
    :data:`TRANSFER` when they live on more than one."""
    kinds = {t.device.type for t in tensors if t.dim() > 0} or \
        {t.device.type for t in tensors}
    if len(kinds) > 1:
        return TRANSFER
    return kinds.pop() if kinds else "cpu"  # no tensor at all: host bookkeeping


@dataclass
class PlaceWork:
    """What an :class:`OpCounter` counted on one device type (or in
    copies between devices): roofline FLOPs, bytes moved and the indexed
    ops' share of them."""
    flops: int = 0
    bytes_moved: int = 0
    gather_bytes: int = 0


class OpCounter(TorchDispatchMode):
    """Counts ATen operator calls by overload packet (``aten.mm``, ...) and,
    in the same pass, the bytes they move (:func:`op_accesses`; the indexed
    ops' share in :attr:`gather_bytes`), their roofline FLOPs
    (:func:`op_flops`), the distinct storage bytes they touch
    (:attr:`working_set_bytes`, which picks the bandwidth roof that applies)
    and the compulsory traffic (:attr:`compulsory_bytes`, the roofline's
    bound: the memories that existed before, each once).
    The same figures per place (:func:`op_place`) in :attr:`places`: a GPU
    step's device work apart from its host work and its copies."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()
        self.bytes_moved = self.gather_bytes = self.flops = 0
        self.places: dict[str, PlaceWork] = {}
        self._storages: dict[tuple[str, int], int] = {}
        # Compulsory traffic: per memory that existed before the counted
        # code (the data, the parameters, the optimiser's state), the most
        # any op moved of it; the memories the code allocated itself; the
        # bytes of earlier memories whose address a new allocation took.
        self._compulsory: dict[tuple[str, int], int] = {}
        self._fresh: set[tuple[str, int]] = set()
        self._settled: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = str(func.overloadpacket)
        self.counts[name] += 1
        out = func(*args, **kwargs)
        tensors = _tensors((args, kwargs, out))
        place = self.places.setdefault(op_place(tensors), PlaceWork())
        accesses = op_accesses(name, func, args, kwargs, out)
        moved = sum(nbytes for _, nbytes in accesses)
        flops = op_flops(name, func, args, kwargs, out)
        self.bytes_moved += moved
        place.bytes_moved += moved
        if name in INDEXED_OPS or (name in _PRODUCTS and _sparse_operand(args) is not None):
            self.gather_bytes += moved
            place.gather_bytes += moved
        self.flops += flops
        place.flops += flops
        for tensor in tensors:
            if tensor.layout == torch.strided and tensor.numel():
                storage = tensor.untyped_storage()
                key = (str(tensor.device), storage.data_ptr())
                self._storages[key] = max(self._storages.get(key, 0), storage.nbytes())
        # The memories an op allocates (outputs sharing no input's storage)
        # are the step's own: a fused implementation need not move them.
        # Those that existed before (first seen as an input) are compulsory.
        # An out= tensor is where the op writes, not what it reads: its
        # memory is the op's output (a buffer the code allocated or reuses
        # as its own workspace), which a fused implementation need not write.
        read = (args, {k: v for k, v in kwargs.items() if k != "out"})
        inputs = {_storage_key(t) for t in _tensors(read) if _has_memory(t)}
        for tensor in _tensors(out):
            if _has_memory(tensor) and (key := _storage_key(tensor)) not in inputs:
                self._allocated(key)
        for tensor, nbytes in accesses:
            if nbytes and (key := _storage_key(tensor)) not in self._fresh:
                self._compulsory[key] = max(self._compulsory.get(key, 0), nbytes)
        return out

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def working_set_bytes(self) -> int:
        """Bytes of the distinct storages the ops touched (a freed block
        reused at the same address counts once)."""
        return sum(self._storages.values())

    def working_set_on(self, device_type: str) -> int:
        """:attr:`working_set_bytes` of the storages on :obj:`device_type`'s devices."""
        return sum(nbytes for (device, _), nbytes in self._storages.items()
                   if torch.device(device).type == device_type)

    def end_step(self) -> None:
        """One step of a loop ended: its compulsory traffic is kept and the
        next step's is counted afresh (what one step reads, the next must
        read again; what a step allocated and left, the next finds there)."""
        for (device, _), nbytes in self._compulsory.items():
            self._settled[torch.device(device).type] += nbytes
        self._compulsory.clear()
        self._fresh.clear()

    def _allocated(self, key: tuple[str, int]) -> None:
        """Memory at :obj:`key` is now the counted code's own allocation."""
        if key[1] == 0:  # no address (meta, fake tensors): no memory to tell apart
            return
        if key in self._compulsory:  # an earlier memory freed, its address reused
            self._settled[torch.device(key[0]).type] += self._compulsory.pop(key)
        self._fresh.add(key)

    @property
    def compulsory_bytes(self) -> int:
        """The traffic no implementation of the counted code can avoid:
        each memory that existed before it (the data, the parameters, the
        optimiser's state) and that it reads or writes, once, at the most
        any one op moves of it (of a gathered table only the rows gathered,
        of a view only its elements). What the code allocates itself
        (activations, gradients, a batch) a fused implementation need not
        move at all, so it is not counted: a lower bound of any
        implementation's traffic, :attr:`bytes_moved` the operators' own."""
        return sum(self._settled.values()) + sum(self._compulsory.values())

    def compulsory_on(self, device_type: str) -> int:
        """:attr:`compulsory_bytes` of the memory on :obj:`device_type`'s devices."""
        return self._settled[device_type] + sum(
            nbytes for (device, _), nbytes in self._compulsory.items()
            if torch.device(device).type == device_type)


@contextlib.contextmanager
def eager_counting(mode):
    """Enters the dispatch :obj:`mode` with compiled code forced eager
    (``torch.compiler.set_stance("force_eager")``, torch >= 2.6): Dynamo
    does not run compiled frames under a dispatch mode, and without the
    stance it skipped the frame for good, so every later step of the run
    ran eager (a compiled step timed after a work count was an eager one)."""
    stance = getattr(torch.compiler, "set_stance", None)
    with (stance("force_eager") if stance is not None else contextlib.nullcontext()), mode:
        yield mode


def count_work(fn: Callable[[], object]) -> OpCounter:
    """The :class:`OpCounter` of one call of :obj:`fn`: ops, bytes moved,
    roofline FLOPs and working set."""
    with eager_counting(OpCounter()) as counter:
        fn()
    return counter


def count_flops(fn: Callable[[], object]) -> int:
    """FLOPs of :obj:`fn` as :class:`FlopCounterMode` counts them."""
    from torch.utils.flop_counter import FlopCounterMode

    with eager_counting(FlopCounterMode(display=False)) as mode:
        fn()
    return int(mode.get_total_flops())


@dataclass
class ProfiledWork:
    """What the profiler saw of one call: operator events, and the bytes
    allocated and peak live bytes on the device it ran on (:obj:`None`
    without memory events there); off the CPU, the host's own figures apart
    (:obj:`None` on a CPU call, whose figures are the host's)."""
    ops: int
    bytes_allocated: int | None
    peak_bytes: int | None
    host_bytes_allocated: int | None = None
    host_peak_bytes: int | None = None


def _event_place(event) -> tuple[str, int]:
    """A memory event's device: its type in lower case and its index (-1
    for the host)."""
    kind = event.device_type()
    return getattr(kind, "name", str(kind).rpartition(".")[2]).lower(), int(event.device_index())


def _device_place(device: torch.device) -> tuple[str, int]:
    """:obj:`device` as :func:`_event_place` names it (a CUDA device without
    an index is the current one)."""
    if device.type == "cpu":
        return "cpu", -1
    index = device.index
    if index is None:
        index = torch.cuda.current_device() if device.type == "cuda" and \
            torch.cuda.is_available() else 0
    return device.type, index


def _memory_figures(events) -> tuple[int | None, int | None]:
    """Bytes allocated and the peak of live bytes of one device's memory
    events, in time order (ties keep record order); :obj:`None` without any.

    The peak is the largest rise of live bytes above their lowest level
    before it: frees of blocks allocated before the call are reported only
    when an earlier profiling session saw the allocation, so the level
    before the step's own allocations is not reliably zero."""
    if not events:
        return None, None
    live = low = peak = allocated = 0
    for event in sorted(events, key=lambda e: e.start_ns()):
        nbytes = int(event.nbytes())
        live += nbytes
        low = min(low, live)
        peak = max(peak, live - low)
        if nbytes > 0:
            allocated += nbytes
    return allocated, peak


def profile_work(fn: Callable[[], object],
                 device: torch.device | str = "cpu") -> ProfiledWork:
    """Operator events of :obj:`fn`, and its bytes allocated and peak of
    live bytes above its start on :obj:`device` (the one the step runs on),
    from the torch profiler's memory events. Each event names its device:
    a GPU step's figures are that GPU's, its host allocations (pinned
    buffers, host-side batch making) reported apart, never added in."""
    from torch.profiler import ProfilerActivity, profile

    # Kineto reads its log level when a profiler first starts (not at torch's
    # import): without this, every profiled step prints its start/stop lines.
    # Set here, where the profiler runs, not when gnnperf is imported; a
    # user's own setting wins.
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    device = torch.device(device)
    gc.collect()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    all_events = prof.profiler.kineto_results.events()
    events = [e for e in all_events if e.name() == "[memory]"]
    by_place: dict[tuple[str, int], list] = {}
    for event in events:
        by_place.setdefault(_event_place(event), []).append(event)
    place = _device_place(device)
    allocated, peak = _memory_figures(by_place.get(place, []))
    host = (None, None) if place[0] == "cpu" else _memory_figures(by_place.get(("cpu", -1), []))
    return ProfiledWork(len(all_events) - len(events), allocated, peak, *host)


#: The pseudo-op of :func:`profile_self_times` for the time a step spends
#: outside every profiled event: Python between the ops (PyG's message
#: passing, the loop), which no operator's self time holds.
BETWEEN_OPS = "(between ops)"


def profile_self_times(fn: Callable[[], object], steps: int = 1) -> dict[str, Any]:
    r"""CPU self time and calls per operator of :obj:`steps` calls of
    :obj:`fn`, per call, from the torch profiler (``key_averages()``: each
    event's time less its children's, so the ops' self times add up to the
    time the profiled events cover).

    Returns ``{"steps": n, "wall_us": µs, "cpu_us": µs, "ops": {name:
    {"self_us": µs, "calls": n}}}``, all per call of :obj:`fn`, with
    :data:`BETWEEN_OPS` for the wall time no event covers; ``cpu_us`` is the
    process's CPU time over the same calls (below ``wall_us`` when the core
    ran other work meanwhile). The profiler's own cost per event is in the
    self times, so two profiles compare fairly only under the same
    profiler: their total beside the unprofiled time says how much it adds.
    """
    from torch.profiler import ProfilerActivity, profile

    os.environ.setdefault("KINETO_LOG_LEVEL", "6")  # see profile_work
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start, start_cpu = time.perf_counter(), time.process_time()
        for _ in range(steps):
            fn()
        cpu_us = (time.process_time() - start_cpu) * 1e6 / steps
        wall_us = (time.perf_counter() - start) * 1e6 / steps
    ops: dict[str, dict[str, float]] = {}
    for event in prof.key_averages():
        ops[event.key] = {"self_us": event.self_cpu_time_total / steps,
                          "calls": event.count / steps}
    covered = sum(op["self_us"] for op in ops.values())
    ops[BETWEEN_OPS] = {"self_us": max(0.0, wall_us - covered), "calls": 0.0}
    return {"steps": steps, "wall_us": wall_us, "cpu_us": cpu_us, "ops": ops}


def empty_op_ns(calls: int = 2000, repeats: int = 7) -> dict[str, Any]:
    r"""The per-op overhead of this process's torch: median nanoseconds per
    call of ops that do next to no work, each timed in :obj:`repeats`
    loops of :obj:`calls` calls on the process's CPU clock (time the core
    gave other processes is not counted: the figure holds on a shared
    machine).

    ``add_ns``: ``torch.add`` of two 1-element tensors (the dispatcher, an
    output's allocation, a one-element kernel); ``empty_ns``:
    ``torch.empty(0)`` (the dispatcher and a tensor's creation);
    ``add_grad_ns``: the add with an operand that requires grad (autograd's
    node on top, as a training step's forward ops pay it). A change in
    these between two environments is a change in every op's fixed cost
    (dispatch, allocator, the build), whatever the op computes.
    """
    a, b = torch.ones(1), torch.ones(1)
    w = torch.ones(1, requires_grad=True)
    add, empty = torch.add, torch.empty

    def median_ns(fn, *args) -> float:
        for _ in range(calls // 10):  # warm: first calls pay lookups and caches
            fn(*args)
        loops = []
        for _ in range(repeats):
            start = time.process_time_ns()
            for _ in range(calls):
                fn(*args)
            loops.append((time.process_time_ns() - start) / calls)
        return statistics.median(loops)

    return {"add_ns": median_ns(add, a, b), "empty_ns": median_ns(empty, 0),
            "add_grad_ns": median_ns(add, w, b), "threads": torch.get_num_threads(),
            "torch": torch.__version__}


def measure_work(case: "PreparedCase") -> WorkMetrics:
    """The work metrics of one step of :obj:`case` (three instrumented steps:
    op count, FLOPs, profiler; each on the same batch)."""
    run = case.run
    work = count_work(case.step)
    ops = work.counts
    flops = count_flops(case.step)
    profiled = profile_work(case.step, run.device)
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
        bytes_moved=work.bytes_moved,
        gather_bytes=work.gather_bytes,
        bytes_allocated=profiled.bytes_allocated,
        peak_bytes=profiled.peak_bytes,
        host_bytes_allocated=profiled.host_bytes_allocated,
        host_peak_bytes=profiled.host_peak_bytes,
        profiled_ops=profiled.ops,
        compiled_graphs=counter.graphs if counter is not None else None,
        graph_breaks=counter.graph_breaks if counter is not None else None,
        recompiles=recompiles,
        op_counts=dict(sorted(ops.items())),
    )


__all__ = ["BETWEEN_OPS", "EXACT_FIELDS", "INDEXED_OPS", "OpCounter", "PlaceWork", "ProfiledWork",
           "TRANSFER", "WorkMetrics", "count_flops", "count_work", "eager_counting", "empty_op_ns",
           "measure_work", "op_accesses", "op_flops", "op_place", "profile_self_times",
           "profile_work", "tensor_bytes"]
