"""A step's time over a fixed reference step's, both timed in one process,
block after block (:class:`~benchmarks.training.TrainStepOverReference`).

One asv value of a raw step time carries the speed of the machine at that
minute and of the CPU its process landed on: between identical commits it
moves by several percent on a shared runner (docs/results.md), more than a
1% a commit drift. Timed in the same process, alternating with the step
under test, a fixed reference workload runs at that same speed, so the
ratio of the two cancels it, as the gate's interleaved pairs cancel it
between two arms. The reference is plain torch and lives in the suite, which
is one version for every commit of an ``asv run``: a commit of gnnperf or of
the library under test cannot move it; a torch upgrade can (the ratio then
moves with torch's change to both). An edit of the reference changes every
value of the figure: raise ``TrainStepOverReference.version`` with it, so
asv starts a new history instead of reading the edit as a change point.

What the ratio cancels, it cannot see: a commit that starts a thread
burning CPU beside the step, or leaves a process-wide mode on (anomaly
detection, the autograd profiler, deterministic algorithms, grad mode off,
more intra-op threads), slows the reference as it slows the step, and the
ratio reads as before. :class:`EnvironmentGuard` checks for those around
the timed blocks and fails the figure naming what it found
(:class:`EnvironmentNotClean`): asv then records no value at that commit,
and ``gnnperf history`` reports the gap.
"""
from __future__ import annotations

import random
import statistics
import sys
import threading
import time
import warnings
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from .suite import CASES, THREADS

#: Cora's shape: nodes, directed edges, features, hidden units, classes.
NODES, EDGES, FEATURES, HIDDEN, CLASSES = 2708, 10556, 1433, 16, 7
#: Share of non-zero features (Cora's bag of words: about 18 words a paper).
FEATURE_DENSITY = 0.0127


class ReferenceStep:
    r"""A two-layer GCN training step in plain torch on a fixed random graph
    of Cora's shape: sparse aggregation (:func:`torch.sparse.mm`), dense
    transforms, cross-entropy, backward and an SGD update. No PyG and no
    gnnperf, so no commit of either changes it (an edit of it: raise
    ``TrainStepOverReference.version``).

    A change of the machine's state (the other core's load, another
    tenant's use of the memory bus and the shared cache) slows work of
    different kinds by different amounts: many small kernels more than a
    few large dense ones, passes over more memory than the cache holds
    more than work that stays in it. The ratio cancels such a change only
    as far as the reference does the case's kind of work, so each case
    gets the reference of its kind (:func:`reference_for`): features stored
    as the case stores them (dense, or sparse: CSR, one sparse product with
    the first weight), and for a full-graph dense step the same input
    dropout over the whole feature matrix: each choice narrows the spread
    between processes (docs/results.md).

    Args:
        device (torch.device): Where its tensors live and it runs.
        sparse_features (bool, optional): Store the features sparse (CSR).
            (default: :obj:`False`)
        input_dropout (bool, optional): Drop out half of the dense features
            each step, as a full-graph step's first layer does.
            (default: :obj:`False`)
    """

    def __init__(self, device: torch.device, sparse_features: bool = False,
                 input_dropout: bool = False):
        if sparse_features and input_dropout:
            raise ValueError("input_dropout drops dense features out; a sparse-features "
                             "reference has none")
        gen = torch.Generator().manual_seed(0)
        src = torch.randint(NODES, (EDGES,), generator=gen)
        dst = torch.randint(NODES, (EDGES,), generator=gen)
        # Indices drawn in range: no invariant check (torch warns when it is left implicit).
        adj = torch.sparse_coo_tensor(torch.stack([dst, src]), torch.full((EDGES,), 0.25),
                                      (NODES, NODES), check_invariants=False).coalesce()
        self.adj = adj.to(device)
        x = (torch.rand(NODES, FEATURES, generator=gen) < FEATURE_DENSITY).float().to(device)
        self.sparse_features, self.input_dropout = sparse_features, input_dropout
        with warnings.catch_warnings():  # torch's "CSR support is in beta", on its first CSR
            warnings.filterwarnings("ignore", message=".*[Ss]parse CSR tensor support")
            self.x = x.to_sparse_csr() if sparse_features else x
        self.y = torch.randint(CLASSES, (NODES,), generator=gen).to(device)
        self.weights = [(torch.randn(FEATURES, HIDDEN, generator=gen) * 0.03).to(device),
                        (torch.randn(HIDDEN, CLASSES, generator=gen) * 0.3).to(device)]
        for w in self.weights:
            w.requires_grad_()

    def __call__(self) -> None:
        w1, w2 = self.weights
        x = _half_dropped(self.x) if self.input_dropout else self.x
        projected = torch.sparse.mm(x, w1) if self.sparse_features else x @ w1
        hidden = torch.relu(torch.sparse.mm(self.adj, projected))
        loss = F.cross_entropy(torch.sparse.mm(self.adj, hidden @ w2), self.y)
        loss.backward()
        with torch.no_grad():
            for w in self.weights:
                w -= 0.01 * w.grad
                w.grad = None


def _half_dropped(x: torch.Tensor) -> torch.Tensor:
    """Inverted dropout at p = 0.5, drawn as the suite's steps draw it: on a
    CPU two 15-bit lanes from each int32 of ``random_``, turned into the
    mask in place (``gnnperf/models/kernels.py``'s passes over memory,
    written out here so that no commit of gnnperf changes them); elsewhere
    torch's fused kernel."""
    if x.device.type != "cpu":
        return F.dropout(x, p=0.5, training=True)
    bits = torch.empty((x.numel() + 1) // 2, dtype=torch.int32, device=x.device).random_()
    lanes = bits.view(torch.int16).bitwise_and_(0x7FFF)[:x.numel()].view_as(x)
    return lanes.to(x.dtype).ge_(1 << 14).mul_(x).mul_(2.0)


#: Techniques whose steps train on sampled subgraphs: a batch's input
#: dropout runs over its own rows, which stay in cache. Fixed here, not read
#: from the registry (``makes_batches``), so that no gnnperf commit changes
#: which reference a case gets; tests/test_asv_suite.py checks the two agree.
MINIBATCH_TECHNIQUES = frozenset({"sampled", "saint", "cluster"})


def reference_for(variant: str, device: torch.device) -> ReferenceStep:
    """The reference for :obj:`variant` (a registry name, ``+`` between
    techniques), by the kind of work its step does: sparse features where
    it reads them sparse (the ``sparse_features`` technique); dense ones
    otherwise, dropped out over the whole matrix each step for a
    full-graph step (as its first layer does: passes over more memory than
    the cache holds), not for a mini-batch one. By the name, so that no
    commit changes the reference: on a graph whose features the
    ``sparse_features`` technique keeps dense (density over 0.1), the case
    and its reference differ in kind, and the figure's curve there is not
    measured (docs/history.md)."""
    techniques = {name.strip().lower() for name in variant.split("+")}
    sparse = "sparse_features" in techniques
    full_graph = not techniques & MINIBATCH_TECHNIQUES
    return ReferenceStep(device, sparse_features=sparse, input_dropout=full_graph and not sparse)


def step_over_reference(step: Callable[[], object], reference: Callable[[], object],
                        device: torch.device, rounds: int = 30, block_s: float = 0.012,
                        cpu: CpuAccount | None = None) -> float:
    """The median over :obj:`rounds` of (seconds per :obj:`step`) / (seconds
    per :obj:`reference`), each round one block of each (about
    :obj:`block_s` apiece), the first of the two alternating from round to
    round so neither always follows the other. Each block is timed by the
    suite's one clock (``gnnperf/measure/case.py``'s ``clocked``,
    synchronised on a GPU): its CPU time on a CPU, where another job's load
    stretches wall time but not the work; its wall time on a GPU, whose
    work the host's CPU time does not see. :obj:`cpu`, where given, adds up
    every block's CPU time of this thread and of the whole process
    (:class:`EnvironmentGuard` reads it)."""
    def seconds(fn: Callable[[], object], calls: int) -> float:
        def block() -> None:
            for _ in range(calls):
                fn()
        thread_start, process_start = time.thread_time(), time.process_time()
        clock = CASES.clocked(block, device)
        if cpu is not None:
            cpu.add(time.thread_time() - thread_start, time.process_time() - process_start)
        # A clock coarser than the block reads 0: never a division by it.
        return max(clock.cpu if device.type == "cpu" else clock.wall, 1e-9) / calls

    def calls_per_block(fn: Callable[[], object]) -> int:
        fn()  # first-call costs stay out of the estimate
        return max(1, round(block_s / seconds(fn, 1)))

    step_calls, reference_calls = calls_per_block(step), calls_per_block(reference)
    ratios = []
    for index in range(rounds):
        if index % 2:
            per_reference = seconds(reference, reference_calls)
            ratios.append(seconds(step, step_calls) / per_reference)
        else:
            per_step = seconds(step, step_calls)
            ratios.append(per_step / seconds(reference, reference_calls))
    return statistics.median(ratios)


#: The share of the process's CPU time over the timed blocks that threads
#: other than the timing one may use before the figure fails: a clean step
#: and reference run on the timing thread alone (torch's one intra-op
#: thread is the caller's) and read 0.00% on the project's 2-vCPU machine,
#: where a thread spinning beside them read 54-65% (and the ratio moved by
#: under 4%: it cancelled the slowdown).
BACKGROUND_CPU_TOLERANCE = 0.02


class EnvironmentNotClean(RuntimeError):
    """The process a figure was timed in is not in the suite's clean state
    (:class:`EnvironmentGuard`): a failure, never asv's n/a."""


@dataclass
class CpuAccount:
    r"""CPU seconds over the timed blocks: the timing thread's own
    (:func:`time.thread_time`) and the whole process's
    (:func:`time.process_time`). A thread burning CPU beside the timed one
    makes the second exceed the first.

    Args:
        thread_s (float, optional): The timing thread's CPU seconds.
            (default: :obj:`0.0`)
        process_s (float, optional): The process's CPU seconds, every
            thread's. (default: :obj:`0.0`)
    """
    thread_s: float = 0.0
    process_s: float = 0.0

    def add(self, thread_s: float, process_s: float) -> None:
        """Adds one timed block's CPU seconds."""
        self.thread_s += thread_s
        self.process_s += process_s

    @property
    def background_share(self) -> float:
        """The share of the process's CPU time that other threads used; 0
        before anything was timed."""
        if self.process_s <= 0:
            return 0.0
        return max(0.0, (self.process_s - self.thread_s) / self.process_s)


def _function_modes() -> int:
    from torch.overrides import _get_current_function_mode_stack
    return len(_get_current_function_mode_stack())


def _dispatch_modes() -> int:
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack
    return len(_get_current_dispatch_mode_stack())


def _autocast(device: torch.device) -> bool:
    try:
        return torch.is_autocast_enabled(device.type)
    except TypeError:  # torch < 2.4 takes no device: the CPU's and CUDA's apart
        return (torch.is_autocast_cpu_enabled() if device.type == "cpu"
                else torch.is_autocast_enabled())


#: The process-wide modes that change how fast every torch computation runs,
#: the reference's with the step's: the call that reads each (its name in a
#: finding), how, and its value in the suite's clean state.
MODES: tuple[tuple[str, Callable[[torch.device], object], object], ...] = (
    ("torch.is_grad_enabled()", lambda d: torch.is_grad_enabled(), True),
    ("torch.is_inference_mode_enabled()", lambda d: torch.is_inference_mode_enabled(), False),
    ("torch.is_anomaly_enabled()", lambda d: torch.is_anomaly_enabled(), False),
    ("torch.autograd._profiler_enabled()", lambda d: torch.autograd._profiler_enabled(), False),
    ("torch.are_deterministic_algorithms_enabled()",
     lambda d: torch.are_deterministic_algorithms_enabled(), False),
    ("torch.get_num_threads()", lambda d: torch.get_num_threads(), THREADS),
    ("torch.get_default_dtype()", lambda d: torch.get_default_dtype(), torch.float32),
    ("torch.get_float32_matmul_precision()",
     lambda d: torch.get_float32_matmul_precision(), "highest"),
    ("torch.is_autocast_enabled(device)", _autocast, False),
    ("torch function modes active", lambda d: _function_modes(), 0),
    ("torch dispatch modes active", lambda d: _dispatch_modes(), 0),
    ("a Python tracer (sys.gettrace())", lambda d: sys.gettrace() is not None, False),
    ("a Python profiler (sys.getprofile())", lambda d: sys.getprofile() is not None, False),
)


def global_modes(device: torch.device) -> dict[str, object]:
    """A snapshot of :data:`MODES` on :obj:`device`: name -> value; a mode
    this torch cannot read is ``"unreadable"`` (named, never guessed)."""
    out = {}
    for name, read, _ in MODES:
        try:
            out[name] = read(device)
        except (AttributeError, ImportError):  # an older torch without the call
            out[name] = "unreadable"
    return out


class EnvironmentGuard:
    r"""What the step over the reference cannot see, checked around its
    timed blocks. The ratio cancels whatever slows the step and the
    reference alike, so a commit that starts a thread burning CPU beside the
    step, or leaves a process-wide mode on, would read as no change while
    every user's step pays for it. Made where asv's ``setup`` begins, before
    the commit's code builds anything, so the threads alive then are the
    harness's; a thread the commit starts earlier (at import, under asv's
    spawn launch) is seen by the CPU it takes.

    It finds, each named in :meth:`findings`:

    * other threads' share of the process's CPU time over the timed blocks
      (:attr:`cpu`) past :data:`BACKGROUND_CPU_TOLERANCE`;
    * Python threads alive that were not when the guard was made
      (:func:`threading.enumerate`);
    * a mode of :data:`MODES` (torch's intra-op threads among them) off its
      clean value.
    """

    def __init__(self):
        self.threads_at_start = set(threading.enumerate())
        self.cpu = CpuAccount()

    def new_threads(self) -> list[threading.Thread]:
        """The Python threads alive now that were not when the guard was made."""
        return [t for t in threading.enumerate() if t not in self.threads_at_start]

    def record(self, device: torch.device) -> dict[str, object]:
        """What the guard reads now: the CPU seconds over the timed blocks
        and the background share, the thread counts and the modes."""
        return {"thread_cpu_s": self.cpu.thread_s, "process_cpu_s": self.cpu.process_s,
                "background_cpu_share": self.cpu.background_share,
                "python_threads": threading.active_count(),
                "new_python_threads": [t.name for t in self.new_threads()],
                "modes": global_modes(device)}

    def findings(self, device: torch.device, modes_only: bool = False) -> list[str]:
        """What differs from the clean state, one phrase each; empty when
        clean. :obj:`modes_only`: the modes alone (before any timing, when a
        thread's CPU share is not known yet and the thread is best named
        beside it)."""
        found = []
        share = self.cpu.background_share
        # On CUDA the autograd engine runs backward on a device thread of its
        # own, whose CPU time is the step's: the share is judged on CPU only
        # (the thread count and the modes still are on every device;
        # unverified on a GPU).
        if share > BACKGROUND_CPU_TOLERANCE and not modes_only and device.type == "cpu":
            found.append(f"other threads used {share:.0%} of the process's CPU time over the "
                         f"timed blocks (process {self.cpu.process_s:.3g} s, the timing "
                         f"thread {self.cpu.thread_s:.3g} s; tolerance "
                         f"{BACKGROUND_CPU_TOLERANCE:.0%})")
        started = [] if modes_only else self.new_threads()
        if started:
            names = ", ".join(f"{t.name!r}{' (daemon)' if t.daemon else ''}" for t in started)
            found.append(f"{len(started)} Python thread{'s' if len(started) > 1 else ''} "
                         f"started since setup began and still alive: {names} "
                         f"(threading.active_count() {threading.active_count()})")
        modes = global_modes(device)
        for name, _, clean in MODES:
            if modes[name] != clean:
                found.append(f"{name} is {modes[name]!r} (clean: {clean!r})")
        return found

    def check(self, device: torch.device, what: str = "the figure",
              modes_only: bool = False) -> None:
        """Raises :class:`EnvironmentNotClean` naming every finding
        (:meth:`findings`), if any; :obj:`what` names the figure. With
        :obj:`modes_only`, only a mode fails, but the failure names every
        finding."""
        if modes_only and not self.findings(device, modes_only=True):
            return
        found = self.findings(device)
        if found:
            raise EnvironmentNotClean(
                f"{what}: the process is not in the suite's clean state, and the step over "
                "the reference would cancel what slows both, so no value is recorded: "
                + "; ".join(found) + ". A user's step pays for it too: find the code of "
                "this commit that starts or sets it (docs/history.md, the figure's guard)")


def over_builds(measure: Callable[[int], float], builds: int) -> float:
    """The mean of :obj:`measure` over :obj:`builds` builds, ``measure(i)``
    building (from the second on) its own case and reference. A build's
    layout (cache sets, page boundaries, the allocator's bins) sets how its
    step runs: an offset of a few percent that stays for the process's life
    and that no number of rounds averages out (docs/results.md, "A figure's
    spread between processes"). A new build allocates its model, optimiser state,
    batches and reference anew (the graph's own tensors are shared between
    builds), and spacers of random size, kept until the last build, shift
    the host heap under it, in the spirit of Stabilizer's re-randomised
    layout (Curtsinger and Berger, ASPLOS 2013). The builds' offsets are
    then partly independent draws, and their mean spreads less between
    processes than one build's value: by how much is measured
    (``tools/figure_spread.py``), not assumed."""
    if builds < 1:
        raise ValueError(f"builds must be at least 1, got {builds}")
    spacers, values = [], []
    for index in range(builds):
        if index:
            # One small and one large, so that both malloc's small bins and its top move.
            spacers += [bytearray(random.randrange(1, 4096)),
                        bytearray(random.randrange(1 << 17, 1 << 21))]
        values.append(measure(index))
    return statistics.fmean(values)
