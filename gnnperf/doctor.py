"""``gnnperf doctor``: does this machine run the suite right? An ordered set of
short checks, each pass / fail / skipped-with-reason with a figure; on CPU the
CUDA-only ones are skipped and named."""
from __future__ import annotations

import importlib.util
import math
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterator

import torch

PASS, FAIL, SKIP = "pass", "fail", "skipped"
# Optional parts and what each enables.
OPTIONAL = {
    "pyg_lib": "PyG's native neighbor sampler (--sampler native)",
    "torch_sparse": "PyG's native neighbor sampler (--sampler native)",
    "pymetis": "the cluster technique (METIS partitions)",
    "pynvml": "GPU monitoring columns (nvidia-ml-py)",
    "ogb": "ogbn-* datasets",
    "asv": "the asv benchmark suite",
}
# The asv benchmarks (class names) that need a package no variant does.
BENCHMARK_PACKAGES: dict[str, tuple[str, ...]] = {"OffloadGpuIdle": ("pynvml",)}
# What pip installs for an import name, where the two differ (a reason may name either).
DISTRIBUTIONS = {"pynvml": "nvidia-ml-py", "pyg_lib": "pyg-lib", "torch_sparse": "torch-sparse"}
EPOCHS = 6
# The first epoch, the one whose work the roofline counts, the memory one.
WARMUP_EPOCHS = 3
AMP_EPOCHS = 50
AMP_LOSS_TOLERANCE = 0.05  # relative, per epoch, bf16/fp16 vs fp32 on Cora
PEAK_TOLERANCE = 0.05
KNOWN_ALLOCATION = 64 * 2 ** 20
# asv's quick CUDA run compiles the compiled variants cold (Triton kernels
# included) in fresh interpreters: minutes.
ASV_TIMEOUT_S = 900
# The padded sampler's waits for the device: torch.unique per hop, and one
# .tolist() of the per-hop edge counts that also sizes the compaction.
PADDED_SAMPLER_HOPS = 2
PADDED_SAMPLER_SYNCS = PADDED_SAMPLER_HOPS + 1


@dataclass
class Check:
    """One doctor line: what was checked, its status and its figure."""
    name: str
    status: str
    figure: str = ""
    reason: str = ""
    seconds: float = 0.0


class Doctor:
    r"""Runs the checks on :obj:`device` (``cpu`` or ``cuda[:N]``).

    Args:
        device (torch.device): The device the suite would benchmark.
        root (Path): The project checkout (for the asv check), if any.
        run_asv (bool): Run the asv check (``tools/gpu_check.sh`` runs asv
            as a step of its own).
        models (tuple): The models each variant of the comparison trains
            (those a variant cannot run are left out). (default: GCN)
    """

    def __init__(self, device: torch.device, root: Path | None = None,
                 run_asv: bool = True, models: tuple[str, ...] = ("gcn",)) -> None:
        self.models = models
        self.device = device
        self.cuda = device.type == "cuda"
        self.root = root
        self.run_asv = run_asv
        self._cora = None

    @property
    def cora(self):
        if self._cora is None:
            from gnnperf.data import load_dataset
            self._cora = load_dataset("cora")
        return self._cora

    def checks(self) -> Iterator[Callable[[], Check | list[Check]]]:
        yield self.environment
        yield self.variants
        yield self.timing_sync
        yield self.amp_dtype
        yield self.sampler
        yield self.padded_sampler_syncs
        yield self.compile_once
        yield self.amp_fp16_scaler
        yield self.offload_copy
        yield self.nvml_monitor
        yield self.ddp_nccl
        yield self.asv_cuda
        yield self.peak_memory

    def run(self, on_check: Callable[[Check], None] | None = None) -> list[Check]:
        results: list[Check] = []
        for check in self.checks():
            start = time.perf_counter()
            try:
                found = check()
            except Exception as exc:  # a check that crashes is a failed check
                found = Check(check.__name__, FAIL, reason=f"{type(exc).__name__}: {exc}")
            for item in found if isinstance(found, list) else [found]:
                item.seconds = item.seconds or time.perf_counter() - start
                results.append(item)
                if on_check is not None:
                    on_check(item)
        return results

    def _cuda_only(self, name: str) -> Check | None:
        if not self.cuda:
            return Check(name, SKIP, reason="CUDA only; this run is on CPU")
        return None

    # The checks ------------------------------------------------------------
    def environment(self) -> Check:
        import torch_geometric
        present = {name: importlib.util.find_spec(name) is not None for name in OPTIONAL}
        device = (f"{torch.cuda.get_device_name(self.device)} (capability "
                  f"{'.'.join(map(str, torch.cuda.get_device_capability(self.device)))})"
                  if self.cuda else "CPU")
        cuda = (f"CUDA runtime {torch.version.cuda}, driver "
                f"{torch.cuda.driver_version() if hasattr(torch.cuda, 'driver_version') else '?'}"
                if self.cuda else f"CUDA {'n/a' if torch.version.cuda is None else torch.version.cuda}")
        missing = [f"{name} ({OPTIONAL[name]})" for name, ok in present.items() if not ok]
        figure = (f"torch {torch.__version__}, PyG {torch_geometric.__version__}, {cuda}, "
                  f"{device}; optional present: "
                  f"{', '.join(n for n, ok in present.items() if ok) or 'none'}")
        return Check("environment", PASS, figure,
                     reason=("missing: " + "; ".join(missing)) if missing else "")

    def variants(self) -> list[Check]:
        """Every variant of the default comparison trains a few epochs on
        Cora, with each model it can run: loss falls, and the figures that
        must be numbers are numbers, the ones that must be n/a are n/a."""
        from gnnperf.errors import GnnperfError, is_unavailable
        from gnnperf.measure.runner import measure_variant, result_label
        from gnnperf.variants import TrainConfig, get_variant, model_pairs, standard_variants
        checks = []
        self.trained = {}
        runs, _ = model_pairs([get_variant(name) for name in standard_variants()],
                              list(self.models))
        for model, variant in runs:
            label = result_label(variant.name, model)
            start = time.perf_counter()
            try:
                result = measure_variant(variant, self.cora,
                                         TrainConfig(epochs=EPOCHS, model=model),
                                         self.device, warmup_epochs=WARMUP_EPOCHS)
            except GnnperfError as exc:  # a non-finite loss names its step here
                # n/a only for what the variant declares and this machine lacks.
                problem = (na_problem(label, str(exc), self.device) if is_unavailable(exc)
                           else str(exc))
                checks.append(Check(f"train {label}", FAIL if problem else SKIP,
                                    reason=problem or str(exc)))
                continue
            self.trained[label] = result
            check = variant_figures(result, self.device)
            check.seconds = time.perf_counter() - start
            checks.append(check)
        return checks

    def timing_sync(self) -> Check:
        """A matmul of known FLOPs timed by the suite's timer and by CUDA
        events agrees (the timer waits for the kernels)."""
        skip = self._cuda_only("timing is synchronised")
        if skip:
            return skip
        from gnnperf.measure.case import timed
        n = 8192
        a = torch.randn(n, n, device=self.device)
        b = torch.randn(n, n, device=self.device)
        work = lambda: [a @ b for _ in range(5)]  # noqa: E731
        work()
        seconds = timed(work, self.device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        work()
        end.record()
        torch.cuda.synchronize(self.device)
        event_s = start.elapsed_time(end) / 1e3
        ratio = seconds / event_s
        tflops = 5 * 2 * n ** 3 / seconds / 1e12
        status = PASS if 0.9 <= ratio <= 1.25 else FAIL
        return Check("timing is synchronised", status,
                     f"timer {seconds * 1e3:.1f} ms vs CUDA events {event_s * 1e3:.1f} ms "
                     f"(ratio {ratio:.2f}; {tflops:.0f} TFLOP/s fp32)")

    def amp_dtype(self) -> Check:
        """AMP picks the dtype the device supports, and its loss curve stays
        within tolerance of fp32 over 50 Cora epochs."""
        from gnnperf.measure.runner import measure_variant
        from gnnperf.variants import TrainConfig, get_variant
        from gnnperf.variants.amp import amp_dtype, amp_dtype_for
        # The expectation from this device's capability by the tested table
        # (tests/test_variants.py); what is checked here is that the run on
        # this device takes it, with the scaler fp16 needs.
        if self.cuda and torch.version.hip:  # ROCm: torch's own answer, no emulation
            expected = (torch.bfloat16 if torch.cuda.is_bf16_supported(including_emulation=False)
                        else torch.float16)
        else:
            expected = amp_dtype_for(torch.cuda.get_device_capability(self.device)
                                     if self.cuda else None)
        chosen = amp_dtype(self.device)
        amp_variant = get_variant("amp")
        run = amp_variant.build(self.cora.graph, TrainConfig(), self.device)
        scaler_ok = (run.scaler is not None) == (chosen == torch.float16)
        config = TrainConfig(epochs=AMP_EPOCHS)
        amp = measure_variant(amp_variant, self.cora, config, self.device, 2).losses
        fp32 = measure_variant(get_variant("baseline"), self.cora, config, self.device, 2).losses
        worst = max(abs(a - b) / abs(b) for a, b in zip(amp, fp32))
        ok = chosen == expected and scaler_ok and worst <= AMP_LOSS_TOLERANCE
        return Check("amp dtype and loss curve", PASS if ok else FAIL,
                     f"{str(chosen).removeprefix('torch.')}"
                     f"{' + GradScaler' if run.scaler is not None else ''} (expected "
                     f"{str(expected).removeprefix('torch.')}); loss within "
                     f"{worst:.1%} of fp32 over {AMP_EPOCHS} epochs "
                     f"(tolerance {AMP_LOSS_TOLERANCE:.0%})")

    def sampler(self) -> Check:
        """The neighbor sampler on the device keeps its invariants: every
        sampled edge exists, each target has min(degree, fanout) distinct
        in-edges."""
        from gnnperf.sampling.neighbor import VectorizedNeighborSampler
        data = self.cora.graph.to(self.device)
        fanout = [5, 3]
        sampler = VectorizedNeighborSampler(data, fanout, seed=0)
        seeds = torch.randperm(data.num_nodes, generator=torch.Generator().manual_seed(0))[:256]
        node, row, col, edge, _, num_edges = sampler.sample(seeds.to(self.device))
        node, row, col, edge = (t.cpu() for t in (node, row, col, edge))
        ei = self.cora.graph.edge_index
        exists = bool((ei[0, edge] == node[row]).all() and (ei[1, edge] == node[col]).all())
        unique = edge.unique().numel() == edge.numel()
        degree = torch.bincount(ei[1], minlength=self.cora.num_nodes)
        hop1 = col[:num_edges[0]]
        counts = torch.bincount(hop1, minlength=seeds.numel())[:seeds.numel()]
        expected = degree[seeds].clamp(max=fanout[0])
        counts_ok = bool(torch.equal(counts, expected))
        ok = exists and unique and counts_ok
        return Check(f"sampler invariants on {self.device.type}", PASS if ok else FAIL,
                     f"{edge.numel()} edges for 256 seeds; edges exist: {exists}, distinct: "
                     f"{unique}, per-target counts = min(degree, fanout): {counts_ok}")

    def padded_sampler_syncs(self) -> Check:
        """The padded (GPU) sampler waits for the device once per hop and
        once to compact the edges (torch's sync debug mode counts them)."""
        name = f"padded sampler syncs at most {PADDED_SAMPLER_SYNCS} for {PADDED_SAMPLER_HOPS} hops"
        skip = self._cuda_only(name)
        if skip:
            return skip
        import warnings

        from gnnperf.sampling.neighbor import VectorizedNeighborSampler
        data = self.cora.graph.to(self.device)
        sampler = VectorizedNeighborSampler(data, [10, 5][:PADDED_SAMPLER_HOPS], seed=0,
                                            padded=True)
        seeds = torch.arange(512, device=self.device)
        sampler.sample(seeds)
        torch.cuda.set_sync_debug_mode("warn")
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                sampler.sample(seeds)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        syncs = sum("synchroniz" in str(w.message) for w in caught)
        return Check(name, PASS if syncs <= PADDED_SAMPLER_SYNCS else FAIL,
                     f"{syncs} device syncs for {PADDED_SAMPLER_HOPS} hops")

    def compile_once(self) -> Check:
        """``compiled`` has no graph break with each model the doctor
        trains; ``sampled+compiled`` compiles once across batch shapes."""
        from gnnperf.measure.runner import result_label
        from gnnperf.variants import TrainConfig, get_variant
        from gnnperf.variants.compiled import compile_unavailable_because
        reason = compile_unavailable_because(self.device)
        if reason:  # a declared "cannot here": the variants check says n/a too
            return Check("compile: no graph breaks, one graph", SKIP, reason=reason)
        trained = getattr(self, "trained", {})
        runs = [trained.get(result_label("compiled", model)) for model in self.models]
        if not runs or None in runs:
            return Check("compile: no graph breaks, one graph", FAIL,
                         reason="the compiled variant did not train")
        run = get_variant("sampled+compiled").build(self.cora.graph, TrainConfig(batch_size=32),
                                                     self.device)
        shapes = set()
        for _ in range(2):
            for batch in run.batches():
                run.step(batch)
                shapes.add(tuple(batch.x.shape))
        ok = (all(compiled.graph_breaks == 0 and compiled.compiled_graphs == 1
                  and compiled.recompiles == 0 for compiled in runs)
              and run.compile_counter.graphs == 1
              and run.compile_counter.graph_breaks == 0)
        per_model = ", ".join(f"{model} {c.graph_breaks} breaks, {c.compiled_graphs} graph(s)"
                              for model, c in zip(self.models, runs))
        return Check("compile: no graph breaks, one graph", PASS if ok else FAIL,
                     f"compiled: {per_model}; sampled+compiled: {run.compile_counter.graphs} "
                     f"graph(s) over {len(shapes)} batch shapes")

    def amp_fp16_scaler(self) -> Check:
        """fp16 autocast with its gradient scaler (forced, whatever this
        device's own AMP dtype) trains: the loss falls and stays finite."""
        from gnnperf.errors import GnnperfError
        from gnnperf.measure.runner import measure_variant
        from gnnperf.variants import TrainConfig, get_variant
        name = "amp fp16 with GradScaler trains"
        try:
            result = measure_variant(get_variant("amp"), self.cora, TrainConfig(epochs=EPOCHS,
                                                                   amp_dtype="fp16"),
                                     self.device, warmup_epochs=WARMUP_EPOCHS)
        except GnnperfError as exc:
            return Check(name, FAIL, reason=str(exc))
        losses = result.losses
        ok = (result.extra.get("amp_dtype") == "float16" and losses[-1] < losses[0])
        return Check(name, PASS if ok else FAIL,
                     f"{result.extra.get('amp_dtype')}: loss {losses[0]:.3f} -> "
                     f"{losses[-1]:.3f} over {EPOCHS} epochs")

    def offload_copy(self) -> Check:
        """``sampled+offload`` copies each batch on a side stream: the bytes
        and the copy time per step are numbers, shown against the step."""
        name = "offload copies each batch on a side stream"
        skip = self._cuda_only(name)
        if skip:
            return skip
        from gnnperf.measure.runner import measure_variant
        from gnnperf.variants import TECHNIQUES, TrainConfig, get_variant
        # Offload's own form in the comparison (the registry's answer, not a name made here).
        result = measure_variant(get_variant(TECHNIQUES["offload"].standard_variant()), self.cora,
                                 TrainConfig(epochs=EPOCHS), self.device,
                                 warmup_epochs=WARMUP_EPOCHS)
        mib, copy_ms = (result.extra.get(key) for key in ("transfer_mib_per_step",
                                                           "copy_ms_per_step"))
        step_ms = result.epoch_time.median * 1e3 / result.steps_per_epoch
        ok = bool(mib) and copy_ms is not None and copy_ms > 0
        return Check(name, PASS if ok else FAIL,
                     f"{'n/a' if mib is None else f'{mib:.2f}'} MiB and "
                     f"{'n/a' if copy_ms is None else f'{copy_ms:.3f}'} ms copy per step, "
                     f"against {step_ms:.3f} ms a step")

    def nvml_monitor(self) -> Check:
        """NVML reads this GPU busy while a matmul loop runs for a second and
        a half: enough samples, utilisation above 0."""
        name = "NVML monitor samples the GPU"
        skip = self._cuda_only(name)
        if skip:
            return skip
        from gnnperf.measure.probes import MIN_WINDOW_S, GpuMonitor
        monitor, reason = GpuMonitor.for_device(self.device)
        if monitor is None:  # skipped without the optional package; a broken NVML fails
            missing = importlib.util.find_spec("pynvml") is None
            return Check(name, SKIP if missing else FAIL, reason=reason)
        a = torch.randn(4096, 4096, device=self.device)
        try:
            with monitor.active():
                deadline = time.perf_counter() + 1.5 * MIN_WINDOW_S
                while time.perf_counter() < deadline:
                    for _ in range(10):
                        a = (a @ a).clamp_(-1, 1)
                    torch.cuda.synchronize(self.device)
            figures, note = monitor.figures()
        finally:
            monitor.close()
        if figures is None:
            return Check(name, FAIL, reason=note)
        util = figures.get("gpu_util_pct", {})
        ok = util.get("mean", 0) > 0
        return Check(name, PASS if ok else FAIL,
                     f"utilisation mean {util.get('mean', float('nan')):.0f}% over "
                     f"{util.get('samples', 0)} samples in {figures['window_s']:.1f} s")

    def ddp_nccl(self) -> Check:
        """``ddp`` over NCCL on two GPUs, or on one in a group of one rank
        (launched all the same: its own process, ``set_device``, NCCL's set-up
        and the event-timed all-reduce all run): the all-reduce share of the
        epoch is a number between 0 and 1."""
        name = "ddp on NCCL"
        skip = self._cuda_only(name)
        if skip:
            return skip
        world = min(2, torch.cuda.device_count())
        from gnnperf.distributed import measure_data_parallel
        from gnnperf.variants import TrainConfig, get_variant
        result = measure_data_parallel(get_variant("ddp"), world, self.cora,
                                       TrainConfig(epochs=EPOCHS), str(self.device.type), 2, 1,
                                       backend="nccl", one_rank_epoch_s=0.0)
        share = result.extra.get("allreduce_share")
        ok = share is not None and 0 < share < 1
        return Check(name, PASS if ok else FAIL,
                     f"{world} rank(s): all-reduce "
                     f"{result.extra.get('allreduce_ms_per_step', float('nan')):.3f} "
                     f"ms a step, {'n/a' if share is None else f'{share:.0%}'} of the epoch")

    def asv_cuda(self) -> Check:
        """The asv suite's CUDA-only benchmarks return numbers (n/a allowed
        only where an optional dependency is missing, and named)."""
        skip = self._cuda_only("asv CUDA benchmarks give numbers")
        if skip:
            return skip
        if not self.run_asv:
            return Check("asv CUDA benchmarks give numbers", SKIP,
                         reason="--skip-asv (tools/gpu_check.sh runs asv as its own step)")
        if self.root is None or not (self.root / "asv.conf.json").is_file():
            return Check("asv CUDA benchmarks give numbers", SKIP,
                         reason="no asv.conf.json (run the doctor from a checkout)")
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=self.root, capture_output=True,
                              text=True).stdout.strip()
        base = [sys.executable, "-m", "asv"]
        subprocess.run([*base, "machine", "--yes"], cwd=self.root, capture_output=True,
                       stdin=subprocess.DEVNULL)
        # spawn: the config's forkserver is unverified on CUDA (docs/asv.md).
        proc = subprocess.run([*base, "run", "--quick", "--python=same", "--launch-method",
                               "spawn", "-b", "track_cuda", "--set-commit-hash", head],
                              cwd=self.root, capture_output=True, text=True,
                              timeout=ASV_TIMEOUT_S, stdin=subprocess.DEVNULL)
        status, figure, reason = judge_asv_run(proc, self.root, head, self.device)
        return Check("asv CUDA benchmarks give numbers", status, figure, reason=reason)

    def peak_memory(self) -> Check:
        """A known allocation is seen within 5% by the suite's peak probe."""
        from gnnperf.measure.runner import step_peak_bytes

        def allocate():
            return torch.ones(KNOWN_ALLOCATION // 4, device=self.device).sum()
        base = torch.cuda.memory_allocated(self.device) if self.cuda else 0
        peak = step_peak_bytes(allocate, self.device)
        seen = None if peak is None else peak - base
        ok = seen is not None and abs(seen - KNOWN_ALLOCATION) <= PEAK_TOLERANCE * KNOWN_ALLOCATION
        probe = "CUDA max_memory_allocated" if self.cuda else "CPU profiler memory events"
        return Check(f"peak memory ({probe})", PASS if ok else FAIL,
                     f"{'n/a' if seen is None else f'{seen / 2 ** 20:.1f}'} MiB seen of a "
                     f"{KNOWN_ALLOCATION / 2 ** 20:.0f} MiB allocation "
                     f"(tolerance {PEAK_TOLERANCE:.0%})")


def importable(name: str) -> bool:
    """Whether :obj:`name` can be imported here (found on the path: what
    the n/a rules ask; the stack check of ``tools/gpu_check.sh`` imports it)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a parent package that fails, a broken spec
        return False


def _named(package: str, reason: str) -> bool:
    reason = reason.lower()
    return package.lower() in reason or DISTRIBUTIONS.get(package, package).lower() in reason


def na_problem(label: str, reason: str, device: torch.device | str,
                finder: Callable[[str], bool] | None = None) -> str:
    """"" when the n/a of :obj:`label` (``variant`` or ``variant [model]``,
    as ``gnnperf run`` names its rows) is a declared "cannot here" that holds
    on this machine; else the problem, one line. Declared: a pair the
    registry says cannot combine (:meth:`Variant.cannot_run_with`), a
    package one of its techniques needs (``Technique.needs_packages``) that
    :obj:`finder` cannot find and the reason names, or what a technique
    itself says it cannot do on :obj:`device` here (``unavailable_on``:
    ``compiled`` on a CPU without a C++ compiler). A reason that merely
    mentions an install is none of these."""
    finder = finder or importable
    from gnnperf.errors import GnnperfError
    from gnnperf.measure.runner import label_parts
    from gnnperf.models import get_model
    from gnnperf.variants import get_variant
    name, model = label_parts(label)
    try:
        spec = get_variant(name)
        if spec.cannot_run_with(get_model(model)):
            return ""
    except GnnperfError as exc:  # a name this registry does not know
        return f"{label} n/a: {reason} ({exc})"
    needs = [package for technique in spec.techniques for package in technique.needs_packages]
    if any(not finder(package) and _named(package, reason) for package in needs):
        return ""
    device = torch.device(device)
    if any(why and why in reason for why in (t.unavailable_on(device) for t in spec.techniques)):
        return ""
    missing = [package for package in needs if not finder(package)]
    declared = (f"it needs {', '.join(needs)}, " + (f"{', '.join(missing)} missing but not named"
                                                     if missing else "all importable here")
                if needs else f"{name} declares no package it needs")
    return f"{label} n/a: {reason} (not a declared n/a here: {declared})"


def asv_config(root: Path) -> dict:
    """:obj:`root`'s ``asv.conf.json``, which has comments, read as asv
    reads it (:func:`gnnperf.asv_conf.read_asv_conf`)."""
    from gnnperf.asv_conf import read_asv_conf
    return read_asv_conf(root / "asv.conf.json")


def asv_results(root: Path, commit: str) -> dict:
    """Numbers and failed values in asv's results of :obj:`commit` (every
    machine's file of it under the config's ``results_dir``, read by
    :mod:`gnnperf.history.asv_results`), and each n/a as ``(benchmark, its
    parameter values)``."""
    import ast
    from gnnperf.history.asv_results import combinations, commit_files
    config = asv_config(root)
    counts: dict = {"numbers": 0, "failed": 0, "n/a": []}
    for result in commit_files(root / config.get("results_dir", ".asv/results"), commit):
        for benchmark, row in result.rows.items():
            for combo, value in combinations(row):
                if value is None:
                    counts["failed"] += 1
                elif isinstance(value, float) and math.isnan(value):
                    counts["n/a"].append((benchmark, tuple(_literal(p, ast) for p in combo)))
                else:
                    counts["numbers"] += 1
    return counts


def _literal(text: str, ast):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def asv_na_problem(benchmark: str, params: tuple, device: torch.device | str,
                   finder: Callable[[str], bool] | None = None) -> str:
    """"" when an asv n/a is declared and holds here: its benchmark class
    needs a missing package (:data:`BENCHMARK_PACKAGES`), or its variant
    (and model) parameters make a pair :func:`na_problem` accepts for a
    missing package or one that cannot combine; else the problem. asv keeps
    no reason with an n/a, so the reason is taken as naming the package."""
    finder = finder or importable
    from gnnperf.errors import GnnperfError
    from gnnperf.models import MODELS
    from gnnperf.variants import get_variant
    label = f"{benchmark}({', '.join(map(str, params))})"
    owner = benchmark.split(".")[-2] if benchmark.count(".") >= 2 else ""
    if any(not finder(package) for package in BENCHMARK_PACKAGES.get(owner, ())):
        return ""
    names = [p for p in params if isinstance(p, str)]
    models = [p for p in names if p in MODELS]
    for variant in names:
        try:
            get_variant(variant)
        except GnnperfError:
            continue
        row = f"{variant} [{models[0]}]" if models else variant
        packages = " ".join(p for t in get_variant(variant).techniques for p in t.needs_packages)
        if not na_problem(row, f"needs {packages}" if packages else "", device, finder):
            return ""
    return f"{label} n/a with everything it declares present"


def judge_asv_run(proc, root: Path, commit: str, device: torch.device | str = "cuda",
                  finder: Callable[[str], bool] | None = None) -> tuple[str, str, str]:
    """Status, figure and reason of an ``asv run`` of the CUDA benchmarks:
    a pass needs exit 0, no failed benchmark, at least one number, and each
    n/a declared and true here (:func:`asv_na_problem`)."""
    finder = finder or importable
    counts = asv_results(root, commit)
    na = counts["n/a"]
    figure = (f"asv run --quick: exit {proc.returncode}; {counts['numbers']} numbers, "
              f"{len(na)} n/a, {counts['failed']} failed")
    problems = []
    if proc.returncode != 0 or counts["failed"] or " failed" in proc.stdout:
        problems.append(proc.stdout[-300:].strip())
    if not counts["numbers"]:
        problems.append("no benchmark gave a number")
    wrong = [problem for problem in (asv_na_problem(b, p, device, finder) for b, p in na)
             if problem]
    problems += wrong[:5] + ([f"and {len(wrong) - 5} more n/a like these"]
                             if len(wrong) > 5 else [])
    if problems:
        return FAIL, figure, "; ".join(problems)
    from gnnperf.variants import TECHNIQUES
    missing = sorted({package for packages in (*(t.needs_packages for t in TECHNIQUES.values()),
                                               *BENCHMARK_PACKAGES.values())
                      for package in packages if not finder(package)})
    return PASS, figure, (f"{len(na)} n/a, each declared: missing {', '.join(missing)}"
                          if na else "")


def variant_figures(result, device: torch.device) -> Check:
    """The training check of one variant: loss falls; numbers where they must
    be numbers, n/a where they must be n/a (never 0)."""
    problems = []
    if not result.losses or not all(math.isfinite(v) for v in result.losses):
        problems.append("loss is not finite")
    elif not result.losses[-1] < result.losses[0]:
        problems.append(f"loss did not fall ({result.losses[0]:.3f} -> {result.losses[-1]:.3f})")
    if not result.epoch_time.median > 0:
        problems.append(f"epoch time {result.epoch_time.median}")
    if not result.step_peak_bytes or result.step_peak_bytes <= 0:
        problems.append(f"step peak {result.step_peak_bytes!r} (must be a number > 0)")
    if device.type == "cuda":
        if not result.cuda_peak_bytes:
            problems.append(f"CUDA peak {result.cuda_peak_bytes!r} on CUDA (must be a number)")
    elif result.cuda_peak_bytes is not None:
        problems.append(f"CUDA peak {result.cuda_peak_bytes!r} on CPU (must be n/a)")
    if not 0 < result.test_acc <= 1:
        problems.append(f"test accuracy {result.test_acc}")
    def mib(value: int | None) -> str:  # a figure this device cannot give is n/a, not 0
        return "n/a" if value is None else f"{value / 2 ** 20:.1f} MiB"
    figure = (f"loss {result.losses[0]:.3f} -> {result.losses[-1]:.3f}, "
              f"{result.epoch_time.median * 1e3:.1f} ms/epoch, step peak "
              f"{mib(result.step_peak_bytes)}, CUDA peak {mib(result.cuda_peak_bytes)}")
    return Check(f"train {result.label}", FAIL if problems else PASS, figure,
                 reason="; ".join(problems))


def to_dict(checks: list[Check], device: torch.device) -> dict:
    return {"device": str(device), "passed": all(c.status != FAIL for c in checks),
            "checks": [asdict(c) for c in checks]}
