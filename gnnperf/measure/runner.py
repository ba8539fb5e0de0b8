"""Honest measurement of a variant: steady-state epoch time (CUDA synchronised)
apart from warm-up and compilation, a step's peak memory, accuracy and
throughput. Returns dataclasses and never prints."""
from __future__ import annotations

import contextlib
import gc
import time
import traceback
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterator

import torch
from torch_geometric.data import Data

from gnnperf.data import Dataset
from gnnperf.errors import GnnperfError, Unavailable, is_unavailable
from gnnperf.models import DEFAULT_MODEL
from gnnperf.measure.probes import GpuMonitor, MemoryTimeline
from gnnperf.measure.roofline import StepWork
from gnnperf.measure.spread import quartiles, relative_iqr
from gnnperf.measure.case import check_losses, collector_skips_existing, synchronize, timed
from gnnperf.measure.convergence import Convergence, ConvergenceRecorder
from gnnperf.variants import TrainConfig, TrainingRun, Variant

def resolve_device(name: str) -> torch.device:
    """``auto`` (CUDA when present, else CPU), ``cpu``, ``cuda`` or ``cuda:N``."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise GnnperfError(f"unknown device {name!r}; use auto, cpu or cuda[:N]") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise GnnperfError(f"device {name!r} requested but this machine has no CUDA "
                           f"(torch {torch.__version__}); use --device cpu or auto")
    if device.type not in ("cpu", "cuda"):
        raise GnnperfError(f"unsupported device {name!r}; use auto, cpu or cuda[:N]")
    return device


def measure_cpu_peak(fn: Callable[[], object]) -> int | None:
    """Peak bytes of torch CPU tensors live during :obj:`fn` above its start,
    from the profiler's memory events (``tracemalloc`` does not see torch's
    allocations; the process RSS would need allocator settings that slow
    the timed steps down)."""
    from gnnperf.measure.workcount import profile_work
    return profile_work(fn).peak_bytes  # the host's figures: profile_work's default device


@dataclass
class Timing:
    """Summary of repeated wall-clock samples in seconds."""
    median: float
    q1: float
    q3: float
    minimum: float
    samples: list[float]

    @classmethod
    def of(cls, samples: list[float]) -> "Timing":
        q1, median, q3 = quartiles(samples)
        return cls(median, q1, q3, min(samples), samples)

    @property
    def spread(self) -> float:
        """Interquartile range relative to the median."""
        return relative_iqr(self.samples)


@dataclass
class VariantResult:
    r"""What one variant measured. Metrics that do not apply are :obj:`None`.

    Args:
        epoch_time (Timing): Steady-state epoch times (after warm-up).
        first_epoch_s (float): The first epoch, compilation included, the
            device's first-use costs not (:obj:`device_warmup_s`).
        device_warmup_s (float): The device's one-off first-use costs paid
            before the build (:func:`warm_device`): CUDA context and library
            handles, reported apart from the first epoch.
        compile_s (float): For compiled runs, what the first epoch took
            beyond a steady one (compilation, and this run's own first
            kernel loads), compiled cold in a private, fresh cache whatever
            compiled before (``extra["compile_cache"]`` says so, with the
            cache hits seen), the process's compiler one-offs paid before
            the build (``setup_seconds["compiler_warmup"]``); :obj:`None`
            for eager runs.
        step_peak_bytes (int): Peak memory of a training step: CUDA allocated
            bytes on GPUs (:obj:`torch.cuda.max_memory_allocated`, this run's
            data and model included, above what the process held before the
            run was built: earlier variants' leftovers are freed first and
            the rest excluded); on CPU the peak of torch tensors allocated by
            the step above its start (profiler memory events).
        cuda_peak_bytes (int): The CUDA figure; :obj:`None` on CPU runs.
        setup_seconds (dict): One-off work before training, by name
            (``partition``, ``presample``), apart from the epochs.
        memory_timeline (dict): Memory after every warm-up step of the run
            (never probed in a timed steady epoch)
            (:class:`~gnnperf.measure.probes.MemoryTimeline`).
        gpu_monitor (dict): NVML mean and max of GPU utilisation, memory
            used, power and SM clock over the timed epochs, with the sample
            count and the window; :obj:`None` (with the reason in
            :obj:`gpu_monitor_note`) without a GPU or NVML, or with too few
            samples (:meth:`~gnnperf.measure.probes.GpuMonitor.figures`).
        chance_acc (float): What guessing the test nodes' most frequent class
            scores (:func:`chance_level`).
        at_chance (bool): The test accuracy is not above chance by two
            binomial standard errors: the variant learned nothing.
        work (dict): The work of the second (warm-up, untimed) epoch, batch
            making included (:class:`~gnnperf.measure.roofline.StepWork`: roofline
            FLOPs, bytes moved, gather bytes, working set, steps), counted
            eagerly (compiled code runs as its eager equivalent there);
            :obj:`None` with fewer than 3 warm-up epochs
            (:obj:`roofline_note` says so).
        roofline (dict): The steady epoch against this machine's roofs
            (:func:`~gnnperf.measure.roofline.assess`), set by the caller that has
            the roofs; :obj:`None` until then.
        roofline_note (str): Why :obj:`roofline` is :obj:`None`, if it is.
        seed (int): The seed of the weights, dropout and sampling.
        convergence (dict): Validation and test accuracy after every epoch,
            evaluated off the clock, against the training time with the
            one-off work counted once at the start
            (:class:`~gnnperf.measure.convergence.Convergence`);
            :obj:`None` when the run did not track it.
    """
    variant: str
    dataset: str
    device: str
    epochs: int
    warmup_epochs: int
    steps_per_epoch: int
    epoch_time: Timing
    first_epoch_s: float
    step_peak_bytes: int | None
    cuda_peak_bytes: int | None
    memory_method: str
    test_acc: float
    val_acc: float
    train_acc: float
    losses: list[float]
    seed_nodes_per_s: float
    sampled_edges_per_s: float | None
    compiled_graphs: int | None = None
    graph_breaks: int | None = None
    recompiles: int | None = None
    setup_seconds: dict = field(default_factory=dict)
    memory_timeline: dict = field(default_factory=dict)
    gpu_monitor: dict | None = None
    gpu_monitor_note: str = ""
    extra: dict = field(default_factory=dict)
    chance_acc: float | None = None
    at_chance: bool = False
    device_warmup_s: float | None = None
    compile_s: float | None = None
    work: dict | None = None
    roofline: dict | None = None
    roofline_note: str = ""
    model: str = DEFAULT_MODEL
    seed: int = 0
    convergence: dict | None = None

    @property
    def label(self) -> str:
        """The variant, with its model when that is not the default."""
        return result_label(self.variant, self.model)

    def to_dict(self) -> dict:
        return asdict(self)


def result_label(variant: str, model: str) -> str:
    """How a run names a (variant, model) pair: ``sampled`` for GCN,
    ``sampled [sage]`` otherwise (failures and n/a rows are keyed so)."""
    return variant if model == DEFAULT_MODEL else f"{variant} [{model}]"


def label_parts(label: str) -> tuple[str, str]:
    """The (variant, model) a :func:`result_label` names."""
    variant, bracket, model = label.partition(" [")
    return (variant, model[:-1]) if bracket and model.endswith("]") else (label, DEFAULT_MODEL)


class _EpochCounter:
    def __init__(self) -> None:
        self.steps = self.seeds = self.edges = 0
        self.losses: list[float] = []


def release_memory(device: torch.device) -> None:
    """Frees what earlier runs in this process left before the next one is
    built: their reference cycles (the closures of the sampled, saint,
    compiled and offload runs are freed by the collector only), Dynamo's
    compiled code and the CUDA caching allocator's free blocks. A compiled
    run built before this call recompiles at its next step (no caller keeps
    one across :func:`measure_variant`).

    In a process whose collector is frozen (:func:`freeze_collector`: the
    run command, asv's and the gate's workers) what survives is frozen too,
    so each variant's collections walk only what was made since (a full
    pass over torch's and Inductor's objects costs a tenth of a second)."""
    torch.compiler.reset()  # first: what it drops is collected below
    freeze_survivors()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()


def freeze_survivors() -> None:
    """Collects; in a process whose collector is frozen, freezes what
    survives (what lives as long as the process: Inductor's import, the
    compiler's one-offs), so the steps' collections do not walk it."""
    gc.collect()
    if gc.get_freeze_count():
        gc.freeze()


def warm_dtypes(device: torch.device) -> tuple[torch.dtype, ...]:
    """The half precisions :func:`warm_device` multiplies in on
    :obj:`device`, those ``amp`` can pick: bf16 where the GPU supports it,
    fp16 always; on CPU both (oneDNN's kernels for each)."""
    if device.type == "cuda":
        # Emulated bf16 counts: amp runs it where --amp-dtype bf16 forces it.
        # The question is the current device's: the run's is made current.
        on_device = (torch.cuda.device(device) if device.index is not None
                     else contextlib.nullcontext())
        with on_device:
            if not torch.cuda.is_bf16_supported():
                return (torch.float16,)
    return (torch.bfloat16, torch.float16)


def warm_device(device: torch.device) -> float:
    """Seconds of the device's one-off first-use costs, paid here and not in
    a variant's first epoch or peak: on CUDA the context, the caching
    allocator's first blocks and each library path a variant's step takes,
    with the workspace it keeps: cuBLAS (a plain product), cuBLASLt (a
    product with a bias, what SAGE's and GIN's linear layers run), both in
    bf16 and fp16 (``amp``, with and without autocast), and cuSPARSE's SpMM
    (the models' CSR product, forward and backward, and a COO product); on
    CPU the same ops (oneDNN's and the thread pool's first use). Forward and
    backward each. Cheap once paid: later calls in the process take
    milliseconds."""
    from gnnperf.models import SparseAdjacency, aggregate
    start = time.perf_counter()
    # Constants, not random draws: the global generator stays where it was.
    weight = torch.full((64, 64), 0.5, device=device, requires_grad=True)
    bias = torch.full((64,), 0.5, device=device, requires_grad=True)
    ones = torch.ones(64, 64, device=device)
    index = torch.arange(64, device=device)
    coo = torch.sparse_coo_tensor(torch.stack([index, index.flip(0)]),
                                  torch.ones(64, device=device), (64, 64),
                                  check_invariants=False)
    csr = SparseAdjacency(torch.arange(65, device=device), index.flip(0),
                          torch.ones(64, device=device), (64, 64))
    hidden = torch.nn.functional.linear(ones, weight, bias)  # addmm with a bias
    out = aggregate(csr, torch.sparse.mm(coo, ones @ weight) + hidden)
    out.index_add(0, index, out).sum().backward()
    for dtype in warm_dtypes(device):
        # The half-precision products themselves, then under autocast (the
        # amp variant's casts, forward and backward).
        half_ones, half_weight = ones.to(dtype), weight.detach().to(dtype)
        torch.nn.functional.linear(half_ones, half_weight, bias.detach().to(dtype))
        half_ones @ half_weight
        with torch.autocast(device.type, dtype=dtype):
            amp_out = torch.nn.functional.linear(ones, weight, bias) @ weight
        amp_out.float().sum().backward()
    synchronize(device)
    return time.perf_counter() - start


def held_bytes(device: torch.device) -> int:
    """Device memory allocated now (CUDA; 0 on CPU, whose step peak is taken
    above each step's start): what a later peak is reported above."""
    return torch.cuda.memory_allocated(device) if device.type == "cuda" else 0


def step_peak_bytes(step: Callable[[], object], device: torch.device, held: int = 0
                    ) -> int | None:
    """Peak memory of one call of :obj:`step`, reset before it; on CUDA the
    allocated peak less :obj:`held`, what the process held before this run
    was built (:func:`held_bytes`)."""
    if device.type == "cuda":
        synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        step()
        synchronize(device)
        return max(torch.cuda.max_memory_allocated(device) - held, 0)
    return measure_cpu_peak(step)


def chance_level(data: Data) -> tuple[float, float]:
    """The majority-class share of the test nodes (what a constant guess
    scores) and the accuracy a variant must exceed not to count as chance:
    that share plus two binomial standard errors over the test nodes."""
    labels = data.y[data.test_mask]
    n = max(int(labels.numel()), 1)
    share = float(torch.bincount(labels).max()) / n if labels.numel() else 0.0
    return share, share + 2 * (share * (1 - share) / n) ** 0.5


def _run_epoch(run: TrainingRun, counter: _EpochCounter,
               measure_peak: Callable[[Callable[[], object]], None] | None = None,
               timeline: MemoryTimeline | None = None,
               after_step: Callable[[], None] | None = None) -> None:
    batches: Iterator = iter(run.batches())
    losses = []
    for batch in batches:
        if timeline is not None:
            timeline.before_step()
        if measure_peak is None:
            losses.append(run.step(batch))
        else:
            measure_peak(lambda: losses.append(run.step(batch)))
        if timeline is not None:
            timeline.after_step()
        counter.steps += 1
        counter.seeds += batch.num_seeds
        counter.edges += batch.num_edges
        if after_step is not None:
            after_step()
    # One host sync per epoch, after the timing-relevant work is queued.
    counter.losses.append(check_losses(losses, f"epoch {len(counter.losses) + 1}",
                                       counter.steps - len(losses) + 1))


def measure_variant(variant: Variant, dataset: Dataset, config: TrainConfig | None = None,
                    device: torch.device | str = "cpu", warmup_epochs: int = 3,
                    on_epoch: Callable[[], None] | None = None,
                    track_accuracy: bool = True) -> VariantResult:
    """Trains :obj:`variant` on :obj:`dataset` for :obj:`config.epochs`
    epochs and measures it. Both are objects, parsed and loaded once by the
    caller (:func:`gnnperf.variants.get_variant`,
    :func:`gnnperf.data.load_dataset`).

    The first epoch (compilation included) is reported as
    :obj:`first_epoch_s`; the last warm-up epoch measures peak memory with a
    reset before every step; the epochs after warm-up are timed one by one.
    With :obj:`track_accuracy`, the accuracy after every epoch is evaluated
    off the clock (:attr:`VariantResult.convergence`, time to accuracy).
    """
    if not isinstance(variant, Variant):
        raise TypeError(f"measure_variant takes a Variant (gnnperf.get_variant({variant!r})), "
                        f"not a {type(variant).__name__}")
    if not isinstance(dataset, Dataset):
        raise TypeError(f"measure_variant takes a Dataset (gnnperf.load_dataset(name), or "
                        f"gnnperf.Dataset(graph) for a graph in memory), not a "
                        f"{type(dataset).__name__}")
    config = config or TrainConfig()
    device = resolve_device(device) if isinstance(device, str) else device
    # Epoch 1 is timed as the first (compiling) epoch and the last warm-up
    # epoch measures memory, so there are at least two.
    if not 2 <= warmup_epochs < config.epochs:
        raise GnnperfError(f"warm-up epochs must be in [2, epochs), got {warmup_epochs} "
                           f"with {config.epochs} epochs; raise --epochs")
    spec = variant
    label = result_label(spec.name, config.model)  # how errors name it
    # An earlier variant's graph, model and optimiser state must not count
    # in this one's peak: freed first, and what is still held subtracted.
    release_memory(device)
    # The device's first-use costs are paid (and reported) before the first
    # epoch, which then holds compilation and this run's own first use; what
    # they keep (cuBLAS's workspace) is in what is held.
    try:
        device_warmup_s = warm_device(device)
    except torch.OutOfMemoryError:
        raise GnnperfError(f"out of memory on {device} before variant {label} was built "
                           f"(the device's first use): free the GPU or use another") from None
    compiles = spec.uses("compiled")
    # Before what is held is read: what the compiler's one-offs keep on the
    # device is theirs, like the device's first use, not this run's peak.
    with _named_failures(label, device):
        compiler_setup = _compiler_setup(device) if compiles else {}
    if compiles:
        freeze_survivors()  # before the build: the run's own cycles stay collectable
    held = held_bytes(device)
    with _compile_cache(compiles) as cache_state:
        run, build_s = _timed_build(spec, dataset, config, device)
        recorder = (ConvergenceRecorder(run.evaluate,
                                        _one_off_seconds(run, build_s, compiles, device))
                    if track_accuracy else None)
        counter = _EpochCounter()
        timeline = MemoryTimeline(str(device), held_bytes=held)
        monitor, monitor_note = GpuMonitor.for_device(device)
        try:
            # The objects alive once the run is built (torch's, PyG's, its model
            # and graph) are frozen for its epochs: the memory epoch collects
            # before every profiled step, and those passes walk only the steps'.
            # In a frozen process (the run command) they already are, but the
            # run's own few, which stay collectable (release_memory frees them).
            with _named_failures(label, device), collector_skips_existing():
                epochs = _train_epochs(run, config.epochs, warmup_epochs, device, held,
                                       counter, timeline, monitor, on_epoch, recorder)
                for finish in run.on_finish:
                    finish()
                accuracy = run.evaluate()
        finally:
            timeline.close()
            if monitor is not None:
                monitor.close()
    run.setup_seconds.update(compiler_setup)
    if cache_state is not None:
        run.stats["compile_cache"] = cache_state()
    gpu = monitor.figures() if monitor is not None else (None, monitor_note)
    result = _result(spec, run, dataset, config, device, warmup_epochs, epochs, counter,
                     accuracy, timeline, gpu, device_warmup_s)
    if recorder is not None:
        result.convergence = recorder.finish(epochs.times).to_dict()
    return result


def train_to_target(variant: Variant, dataset: Dataset, config: TrainConfig,
                    device: torch.device | str, target_acc: float) -> Convergence:
    """Trains :obj:`variant` until its validation accuracy reaches
    :obj:`target_acc` or :obj:`config.epochs` end, every epoch timed (none
    instrumented), the accuracy evaluated after each off the clock; the
    clock starts with the build and the compiler's one-offs, and a compiled
    run compiles cold (:func:`measure_variant`'s private cache). What asv's
    time to accuracy measures; :meth:`Convergence.reached` says when."""
    device = resolve_device(device) if isinstance(device, str) else device
    label = result_label(variant.name, config.model)
    release_memory(device)
    warm_device(device)
    compiles = variant.uses("compiled")
    if compiles:  # the one-offs' seconds reach the clock through _one_off_seconds
        with _named_failures(label, device):
            _compiler_setup(device)
        freeze_survivors()
    with _compile_cache(compiles):
        run, build_s = _timed_build(variant, dataset, config, device)
        recorder = ConvergenceRecorder(run.evaluate,
                                       _one_off_seconds(run, build_s, compiles, device))
        counter = _EpochCounter()
        with _named_failures(label, device), collector_skips_existing():
            for _ in range(config.epochs):
                seconds = timed(lambda: _run_epoch(run, counter), device)
                if recorder.epoch(seconds)["val"] >= target_acc:
                    break
    return recorder.finish([])


def _timed_build(variant: Variant, dataset: Dataset, config: TrainConfig,
                 device: torch.device) -> tuple[TrainingRun, float]:
    """The run of :obj:`variant` and the seconds its build took, the
    device's queued work included."""
    start = time.perf_counter()
    run = variant.build(dataset.graph, config, device)
    synchronize(device)
    return run, time.perf_counter() - start


#: Per device, what the compiler's one-offs cost the first compiled run of
#: this process: every compiled run's clock is charged it (later runs find
#: them paid), so time to accuracy does not depend on the variants' order.
_COMPILER_ONE_OFF: dict[str, float] = {}


def _one_off_seconds(run: TrainingRun, build_s: float, compiles: bool,
                     device: torch.device) -> float:
    """Where time to accuracy's clock starts: the build, a partition read
    from gnnperf's cache counted at what it cost to compute (a user's first
    run pays it), and for a compiled run the compiler's one-offs."""
    seconds = build_s
    if run.stats.get("partition_cached"):
        seconds += run.setup_seconds.get("partition", 0.0)
    if compiles:
        seconds += _COMPILER_ONE_OFF.get(str(device), 0.0)
    return seconds


def _compiler_setup(device: torch.device) -> dict[str, float]:
    """The compiler's one-off costs in this process
    (:func:`gnnperf.torch_private.warm_compiler`: Inductor's import, the ISA
    pick, the compile workers), paid before a compiled run is built and
    reported as its ``compiler_warmup`` setup, never in its ``compile_s``;
    none where the variant is n/a here (no C++ compiler on CPU: the build
    says why)."""
    from gnnperf import torch_private
    from gnnperf.variants.compiled import compile_unavailable_because
    if compile_unavailable_because(device):
        return {}
    start = time.perf_counter()
    torch_private.warm_compiler(device)
    seconds = time.perf_counter() - start
    _COMPILER_ONE_OFF.setdefault(str(device), seconds)
    return {"compiler_warmup": seconds}


@contextlib.contextmanager
def _compile_cache(compiles: bool) -> Iterator[Callable[[], str] | None]:
    """For a compiled run, a private, fresh compile cache from its build to
    the end of its training (:func:`gnnperf.torch_private.fresh_compile_cache`),
    so its ``compile_s`` is a cold compile whatever compiled before (the
    doctor's, an earlier variant's, an earlier process's on this machine).
    Yields what says, after the run, how fresh it was and the cache hits it
    saw (none expected); None for an eager run."""
    if not compiles:
        yield None
        return
    from gnnperf import torch_private
    hits_before = torch_private.compile_cache_hits()
    with torch_private.fresh_compile_cache() as freshness:
        yield lambda: (f"{freshness}: private, emptied before the build "
                       f"({torch_private.compile_cache_hits() - hits_before} cache hits)")


@dataclass
class _Epochs:
    """What the epoch loop of :func:`measure_variant` measured."""
    first_s: float = 0.0
    graphs_after_first: int | None = None
    work: dict | None = None
    times: list[float] = field(default_factory=list)  # the steady (timed) epochs
    step_peaks: list[int] = field(default_factory=list)  # the memory epoch's steps
    steady_start: tuple[int, int, int] = (0, 0, 0)  # steps, seeds, edges before them


def _train_epochs(run: TrainingRun, num_epochs: int, warmup_epochs: int, device: torch.device,
                  held: int, counter: _EpochCounter, timeline: MemoryTimeline,
                  monitor: GpuMonitor | None,
                  on_epoch: Callable[[], None] | None,
                  recorder: ConvergenceRecorder | None = None) -> _Epochs:
    """The one epoch loop: epoch 0 timed as the first, the last warm-up
    epoch measuring memory, :data:`COUNTED_EPOCH` counting the work, the
    epochs after warm-up timed; after each, the :obj:`recorder` evaluates
    the run, off the clock."""
    out = _Epochs()
    for epoch in range(num_epochs):
        seconds = None  # an instrumented epoch is not timed
        if epoch == warmup_epochs - 1:
            # What the evaluation keeps (a mini-batch run's full graph) is
            # not held while the steps' peaks are taken; it is built again after.
            run.release_evaluation()
            # Not timed: profiling (CPU) or a sync per step (CUDA) costs time.
            _run_epoch(run, counter, measure_peak=lambda step: out.step_peaks.append(
                step_peak_bytes(step, device, held)), timeline=timeline)
        elif epoch == COUNTED_EPOCH:
            # Neither timed nor the memory epoch: the op counter (it slows
            # steps several-fold) counts the work the roofline holds steps to.
            out.work = _counted_epoch(run, counter, timeline).to_dict()
        else:
            # The GPU monitor samples the timed (steady) epochs only.
            watching = monitor.active() if monitor and epoch >= warmup_epochs \
                else contextlib.nullcontext()
            # The timeline's per-step probes (a /proc write and read: a share
            # of a small graph's step) stay off the steady, timed epochs.
            probe = timeline if epoch < warmup_epochs else None
            with watching:
                seconds = timed(lambda: _run_epoch(run, counter, timeline=probe), device)
            if epoch == 0:
                out.first_s = seconds
                if run.compile_counter is not None:
                    out.graphs_after_first = run.compile_counter.graphs
            elif epoch >= warmup_epochs:
                out.times.append(seconds)
        if epoch == warmup_epochs - 1:
            out.steady_start = (counter.steps, counter.seeds, counter.edges)
        if recorder is not None:
            recorder.epoch(seconds)
        if on_epoch is not None:
            on_epoch()
    return out


@contextlib.contextmanager
def _named_failures(label: str, device: torch.device) -> Iterator[None]:
    """A failure while training becomes one line naming the variant and the fix."""
    try:
        yield
    except GnnperfError as exc:  # the same kind (a declared n/a stays one), named
        raise type(exc)(f"variant {label}: {exc}") from None
    except torch.OutOfMemoryError:
        raise GnnperfError(
            f"out of memory in variant {label} on {device}: lower --hidden or "
            f"--batch-size, or use the sampled or checkpointed variants") from None
    except NotImplementedError as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if is_unavailable(exc):  # torch lacks the kernel here: no bf16 sparse matmul on CPU
            raise Unavailable(f"variant {label} is not supported on {device} by torch "
                              f"{torch.__version__} ({reason}); drop one of its "
                              f"techniques") from None
        raise GnnperfError(f"variant {label} failed: NotImplementedError ({reason})") from None
    except Exception as exc:  # a crash in a step (a user's model, a bug): a failed row
        reason = str(exc).splitlines()[0] if str(exc) else ""
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        raise GnnperfError(f"variant {label} failed: {type(exc).__name__}: {reason} (at "
                           f"{frame.filename}:{frame.lineno} in {frame.name})") from exc


def _result(spec: Variant, run: TrainingRun, dataset: Dataset, config: TrainConfig,
            device: torch.device,
            warmup_epochs: int, epochs: _Epochs, counter: _EpochCounter,
            accuracy: dict[str, float], timeline: MemoryTimeline,
            gpu: tuple[dict | None, str], device_warmup_s: float) -> VariantResult:
    """The figures of one measured variant."""
    chance, chance_bound = chance_level(dataset.graph)
    steady_epochs = len(epochs.times)
    steps, seeds, edges = (now - before for now, before in
                           zip((counter.steps, counter.seeds, counter.edges), epochs.steady_start))
    timing = Timing.of(epochs.times)
    compile_counter = run.compile_counter
    step_peaks = epochs.step_peaks
    return VariantResult(
        variant=spec.name,
        model=config.model,
        seed=config.seed,
        dataset=dataset.name,
        device=str(device),
        epochs=config.epochs,
        warmup_epochs=warmup_epochs,
        steps_per_epoch=steps // steady_epochs,
        epoch_time=timing,
        first_epoch_s=epochs.first_s,
        step_peak_bytes=max(step_peaks) if step_peaks else None,
        cuda_peak_bytes=max(step_peaks) if device.type == "cuda" and step_peaks else None,
        memory_method=("cuda max_memory_allocated above what was held before the build"
                       if device.type == "cuda"
                       else "torch CPU allocations above step start (profiler)"),
        test_acc=accuracy["test"],
        val_acc=accuracy["val"],
        train_acc=accuracy["train"],
        losses=counter.losses,
        seed_nodes_per_s=seeds / steady_epochs / timing.median,
        sampled_edges_per_s=(edges / steady_epochs / timing.median if spec.minibatch
                             else None),
        compiled_graphs=compile_counter.graphs if compile_counter else None,
        graph_breaks=compile_counter.graph_breaks if compile_counter else None,
        recompiles=((compile_counter.graphs - epochs.graphs_after_first)
                    if compile_counter else None),
        setup_seconds=dict(run.setup_seconds),
        memory_timeline=timeline.to_dict(),
        gpu_monitor=gpu[0],
        gpu_monitor_note=gpu[1],
        extra=dict(run.stats),
        chance_acc=chance,
        at_chance=accuracy["test"] <= chance_bound,
        device_warmup_s=device_warmup_s,
        compile_s=(max(epochs.first_s - timing.median, 0.0) if compile_counter is not None
                   else None),
        work=epochs.work,
        roofline_note="" if epochs.work is not None else (
            f"no roofline with {warmup_epochs} warm-up epochs: the work is counted in a "
            f"warm-up epoch apart from the first (timed) and the memory one; use --warmup 3"),
    )


#: The warm-up epoch whose work is counted (epoch 0 is timed as the first
#: epoch, the last warm-up one measures memory): runs need 3 warm-up epochs.
COUNTED_EPOCH = 1


def _counted_epoch(run: TrainingRun, counter: _EpochCounter,
                   timeline: MemoryTimeline) -> StepWork:
    """One epoch under the op counter: its work (compiled code counted as
    the eager code it compiles, and compiled again after: eager_counting)."""
    from gnnperf.measure.workcount import OpCounter, eager_counting
    steps_before = counter.steps
    with eager_counting(OpCounter()) as ops:
        # Step by step: what each step must read, it reads again (the
        # compulsory traffic is a step's, summed over the epoch's steps).
        _run_epoch(run, counter, timeline=timeline, after_step=ops.end_step)
    return StepWork.of(ops, counter.steps - steps_before, run.device)


def with_roofline(result: VariantResult, roofs) -> VariantResult:
    """Sets :obj:`result.roofline`: its steady epoch (the median) against
    :obj:`roofs` (:class:`~gnnperf.measure.roofline.Roofs`), per step the same
    ratio; left :obj:`None` where no work was counted."""
    from gnnperf.measure.roofline import assess
    if result.work and not result.work.get("compulsory_bytes"):
        result.roofline_note = ("no roofline: the counted epoch touched no memory that existed "
                                "before it (no compulsory traffic to bound it by)")
        return result
    if result.work and result.work["bytes_moved"] > 0:
        # The counted epoch's steps can differ from a steady one's (a sampled
        # epoch's last batch): both are scaled to one step.
        per_step = result.epoch_time.median / result.steps_per_epoch
        result.roofline = assess(StepWork(**result.work).per_step(), per_step, roofs)
    return result


class LoaderClock:
    """Timers around a loader's sampler call and its pooled feature gather
    (one of :func:`~gnnperf.sampling.neighbor.make_neighbor_loader`'s),
    installed for a ``with`` block and then taken off: each batch timed in
    it (:meth:`batch`) is also taken apart, at a few microseconds a batch,
    into :class:`LoaderParts` (:meth:`parts`)."""

    def __init__(self, loader, device: torch.device) -> None:
        if getattr(loader, "num_workers", 0) > 0:  # they sample and gather out of its sight
            raise ValueError("LoaderClock times a loader's own process; give it one "
                             "without worker processes (num_workers=0)")
        self.device = device
        pool = getattr(loader, "_feature_pool", None)
        self._wrapped = [(loader.node_sampler, "sample_from_nodes", "sampling")]
        if pool is not None:
            self._wrapped.append((pool, "index_select", "gather"))
        self._table_bytes = (loader._features.numel() * loader._features.element_size()
                             if pool is not None else 0)
        self._gathers = pool is not None
        self._spent: dict[str, float] = {}
        self._parts: dict[str, list[float]] = {"sampling": [], "gather": [], "rest": []}
        self._gathered_bytes: list[int] = []
        self._working_set = 0

    def _timed(self, part: str, fn: Callable) -> Callable:
        def call(*args, **kwargs):
            synchronize(self.device)
            start = time.perf_counter()
            out = fn(*args, **kwargs)
            synchronize(self.device)
            self._spent[part] = self._spent.get(part, 0.0) + time.perf_counter() - start
            return out
        return call

    def __enter__(self) -> "LoaderClock":
        # What each object held itself (a wrapper of its own, say): put back after.
        self._held = [vars(owner).get(name) for owner, name, _ in self._wrapped]
        for owner, name, part in self._wrapped:
            setattr(owner, name, self._timed(part, getattr(owner, name)))
        return self

    def __exit__(self, *exc) -> None:
        for (owner, name, _), before in zip(self._wrapped, self._held):
            if before is None:
                delattr(owner, name)  # the class's method again
            else:
                setattr(owner, name, before)

    def batch(self, next_batch: Callable[[], object]) -> tuple[object, float]:
        """:obj:`next_batch()` timed whole and by part: the batch and its seconds."""
        self._spent.clear()
        synchronize(self.device)
        start = time.perf_counter()
        batch = next_batch()
        synchronize(self.device)
        seconds = time.perf_counter() - start
        self._parts["sampling"].append(self._spent.get("sampling", 0.0) * 1e3)
        self._parts["gather"].append(self._spent.get("gather", 0.0) * 1e3)
        self._parts["rest"].append((seconds - sum(self._spent.values())) * 1e3)
        if self._gathers:
            rows = batch.x.numel() * batch.x.element_size()
            self._gathered_bytes.append(2 * rows
                                        + batch.n_id.numel() * batch.n_id.element_size())
            self._working_set = max(self._working_set, self._table_bytes + rows)
        return batch, seconds

    def parts(self, skip: int = 0, roofs=None) -> LoaderParts:
        """The parts of the batches timed, less the first :obj:`skip`."""
        parts = {name: samples[skip:] for name, samples in self._parts.items()}
        gather_s = sum(parts["gather"]) / 1e3
        bytes_per_s = (sum(self._gathered_bytes[skip:]) / gather_s
                       if self._gathers and gather_s > 0 else None)
        roof_pct = (100 * bytes_per_s / roofs.bandwidth("gather", self._working_set)
                    if bytes_per_s is not None and roofs is not None else None)
        return LoaderParts(Timing.of(parts["sampling"]),
                           Timing.of(parts["gather"]) if self._gathers else None,
                           Timing.of(parts["rest"]), bytes_per_s, roof_pct)


def set_threads(threads: int | None) -> int:
    """Sets torch's intra-op threads (``None`` keeps the default); returns it."""
    if threads is not None:
        if threads < 1:
            raise GnnperfError(f"threads must be >= 1, got {threads}")
        torch.set_num_threads(threads)
    return torch.get_num_threads()


@dataclass
class SamplerThroughput:
    """Neighbor-sampling speed: the sampler alone, and PyG's loader around it
    (sampling plus relabelling and feature/label gathering); with roofs, the
    loader's counted bytes per batch (:attr:`loader_work`) over its median
    batch time against them (:attr:`loader_roofline`) and as a share of the
    gather roof (:attr:`gather_roof_pct`)."""
    dataset: str
    device: str
    fanout: list[int]
    batch_size: int
    batches: int
    edges_per_batch: float
    sampler_edges_per_s: float
    loader_edges_per_s: float
    sampler_batch_ms: Timing
    loader_batch_ms: Timing
    loader_work: dict | None = None
    loader_roofline: dict | None = None
    gather_roof_pct: float | None = None
    #: Where a loader batch's time goes (:class:`LoaderClock`).
    loader_parts: LoaderParts | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class LoaderParts:
    """A loader batch's time taken apart, on the timed batches
    (:class:`LoaderClock`: a timer around each part, a few microseconds a
    batch): the sampler's call, the feature gather into the batch, and the rest
    (PyG's relabelling, the labels, the batch object); the gather's bytes
    (its rows read and written, its index) per second, and as a share of the
    gather roof at its working set (the feature table and the batch's rows)
    where roofs were measured.

    Args:
        sampling_ms (Timing): The sampler's call, per batch.
        feature_gather_ms (Timing | None): The feature gather, per batch
            (:obj:`None` where PyG's own filter gathers them: features not
            on the host).
        rest_ms (Timing): The batch's time less the two.
        feature_gather_bytes_per_s (float | None): The gather's bytes over
            its time, summed over the batches.
        feature_gather_roof_pct (float | None): That against the gather roof.
    """
    sampling_ms: Timing
    feature_gather_ms: Timing | None
    rest_ms: Timing
    feature_gather_bytes_per_s: float | None = None
    feature_gather_roof_pct: float | None = None


def measure_sampler(dataset: Dataset, fanout: list[int], batch_size: int = 1024,
                    batches: int = 30, device: torch.device | str = "cpu", seed: int = 0,
                    roofs=None) -> SamplerThroughput:
    """Times :class:`~gnnperf.sampling.neighbor.VectorizedNeighborSampler` on random
    seed batches, alone and inside PyG's loader; one warm-up batch each.
    With :obj:`roofs` (:class:`~gnnperf.measure.roofline.Roofs`) one more loader
    batch, untimed, counts the bytes it moves."""
    from gnnperf.sampling.neighbor import VectorizedNeighborSampler, make_neighbor_loader
    device = resolve_device(device) if isinstance(device, str) else device
    if batches < 1:
        raise GnnperfError(f"batches must be >= 1, got {batches}")
    data = dataset.graph
    # Only what a training batch needs travels with it.
    lean = Data(x=data.x, y=data.y, edge_index=data.edge_index,
                   num_nodes=data.num_nodes).to(device)
    sampler = VectorizedNeighborSampler(lean, fanout, seed=seed, edge_ids=False)
    generator = torch.Generator().manual_seed(seed)
    seed_batches = [torch.randperm(data.num_nodes, generator=generator)[:batch_size].to(device)
                    for _ in range(batches + 1)]
    sampler.sample(seed_batches[0])
    sampler_s, edges = [], 0
    for seeds in seed_batches[1:]:
        synchronize(device)
        start = time.perf_counter()
        edges += sampler.sample(seeds)[1].numel()
        synchronize(device)
        sampler_s.append(time.perf_counter() - start)

    loader = make_neighbor_loader(lean, fanout, batch_size, shuffle=True, seed=seed,
                                  backend="vectorized", edge_ids=False)
    loader_s, loader_edges = [], 0
    iterator = iter(loader)

    def next_batch():
        nonlocal iterator
        batch = next(iterator, None)
        if batch is None:  # fewer nodes than batches * batch_size: start over
            iterator = iter(loader)
            batch = next(iterator)
        return batch

    with LoaderClock(loader, device) as clock:
        for index in range(batches + 1):
            batch, seconds = clock.batch(next_batch)
            if index > 0:
                loader_s.append(seconds)
                loader_edges += batch.edge_index.size(1)
    result = SamplerThroughput(
        dataset=dataset.name, device=str(device), fanout=list(fanout),
        batch_size=batch_size, batches=batches, edges_per_batch=edges / batches,
        sampler_edges_per_s=edges / sum(sampler_s),
        loader_edges_per_s=loader_edges / sum(loader_s),
        sampler_batch_ms=Timing.of([s * 1e3 for s in sampler_s]),
        loader_batch_ms=Timing.of([s * 1e3 for s in loader_s]))
    result.loader_parts = clock.parts(skip=1, roofs=roofs)  # the warm-up batch left out
    if roofs is not None:
        from gnnperf.measure.roofline import assess
        from gnnperf.measure.workcount import count_work
        # The first batch of a fresh pass: a full one (a pass's last can be short).
        work = StepWork.of(count_work(lambda: next(iter(loader))), 1, device)
        median_s = result.loader_batch_ms.median / 1e3
        result.loader_work = work.to_dict()
        result.loader_roofline = assess(work, median_s, roofs)
        result.gather_roof_pct = 100 * work.bytes_moved / median_s / roofs.bandwidth(
            "gather", work.working_set_bytes)
    return result
