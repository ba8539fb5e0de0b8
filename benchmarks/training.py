"""Per-variant training cost: step time, peak memory, accuracy after a fixed
budget and sampled throughput, for every registry variant and the profile's
datasets. Higher is worse for every figure here (asv's convention)."""
from __future__ import annotations

import contextlib
import itertools
import statistics
import time

from . import base, caches, compat, profiles, relative, suite
from .profiles import PROFILE, VARIANTS


class _PerVariant(base.Benchmark):
    """Parameters shared by the per-(dataset, variant) benchmarks."""
    params = [list(PROFILE.datasets), VARIANTS]
    param_names = ["dataset", "variant"]
    setup_cache = caches.training_datasets_cache
    timeout = 600


class _PerModel(_PerVariant):
    """Per (dataset, variant, model): the profile's models (gcn, sage, gat,
    gin), each variant that cannot train a model n/a with the reason."""
    params = [list(PROFILE.datasets), VARIANTS, list(PROFILE.models)]
    param_names = ["dataset", "variant", "model"]


class TrainStep(_PerModel):
    """One optimiser step on a prepared batch (sampling excluded)."""
    number = 1  # setup re-runs before each call anyway (asv_runner 0.3.2)
    repeat = PROFILE.repeat
    rounds = PROFILE.rounds
    warmup_time = 0.0  # setup already ran a warm-up epoch (and compiled)

    def make(self, cache, dataset, variant, model):
        self.prep = caches.prepared(cache, dataset, variant, warm=True, model=model)

    def time_train_step(self, cache, dataset, variant, model):
        """Wall time of one step, CUDA synchronised."""
        self.prep.synced_step()


class TrainStepOverReference(base.Benchmark):
    """One step's time over a plain-torch reference step's (a GCN step of
    Cora's shape), the two timed block after block in the same process
    (:mod:`benchmarks.relative`): the machine's speed at that minute scales
    both and cancels, so a history of it can show a drift of 1% a commit
    that the raw step time's spread between processes hides
    (docs/history.md). The value is the mean over :attr:`builds` builds of
    the case and the reference, each at addresses of its own
    (:func:`relative.over_builds`), against a reference that does the
    case's kind of work (:func:`relative.reference_for`). Unitless: 1.0 is
    as fast as the reference. GCN and the history's variants only
    (:data:`profiles.HISTORY_VARIANTS`): the figure is for histories; the
    raw step times cover the rest.

    What slows the step and the reference alike cancels in the ratio: a
    thread of the commit burning CPU beside the step, or a process-wide mode
    it leaves on (:data:`relative.MODES`: anomaly detection, the autograd
    profiler, more intra-op threads, ...). The figure fails instead, naming
    what it found (:class:`relative.EnvironmentGuard`, checked before and
    after each build's timing): asv records no value, and ``gnnperf
    history`` reports the gap."""
    params = [list(PROFILE.datasets), profiles.history_variants()]
    param_names = ["dataset", "variant"]
    setup_cache = caches.training_datasets_cache
    timeout = 600
    #: Builds a value averages: one build's layout offset is the figure's
    #: largest noise between processes (docs/results.md).
    builds = 4
    #: Rounds of a build's median, and the seconds each block of a round
    #: aims at (:func:`relative.step_over_reference`). Not asv's ``rounds``,
    #: which counts its processes.
    timed_rounds = 30
    block_s = 0.012
    # An edit of relative.ReferenceStep, of which reference a case gets, or of
    # how a value is averaged, changes every value: raise this with it. The
    # environment guard changes none (a value it lets through is timed as
    # before; one it stops is not recorded), so it keeps the history.
    version = "4"

    def setup(self, *args):
        # Before the commit's code builds anything: the threads alive now are
        # the harness's (asv's one, or a test runner's).
        self.guard = relative.EnvironmentGuard()
        super().setup(*args)

    def make(self, cache, dataset, variant, fresh=False):
        # The first build here: a variant this commit lacks is n/a before any timing.
        self.prep = caches.prepared(cache, dataset, variant, warm=True, fresh=fresh)
        self.reference = relative.reference_for(variant, self.device)

    def track_step_over_reference(self, cache, dataset, variant):
        """The mean over :attr:`builds` builds of the median over
        :attr:`timed_rounds` rounds of one step's time over the
        reference's; :class:`relative.EnvironmentNotClean` where the
        process is not in the suite's clean state."""
        # Used without asv's setup (a test): guarded from here on.
        guard = getattr(self, "guard", None) or relative.EnvironmentGuard()
        what = f"{type(self).__name__}({dataset}, {variant})"

        def one_build(index: int) -> float:
            if index:
                # asv's teardown sees only the last build: each earlier one gets
                # the same check before it goes, and it goes before the next is
                # built, so that no two builds are alive at once.
                self.teardown()
                self.prep = self.reference = None
                self.make(cache, dataset, variant, fresh=True)
            # The modes before the timing too: one left on fails at once (grad
            # mode off would otherwise fail in the step, naming nothing).
            guard.check(self.device, what, modes_only=True)
            ratio = relative.step_over_reference(self.prep.synced_step, self.reference,
                                                 self.device, rounds=self.timed_rounds,
                                                 block_s=self.block_s, cpu=guard.cpu)
            guard.check(self.device, what)
            return ratio
        return relative.over_builds(one_build, self.builds)

    track_step_over_reference.unit = "ratio"


class TrainStepMemory(_PerVariant):
    """Peak memory of a training step: the process's RSS high-water mark
    (imports and the dataset included: subtract ``control.peakmem_noop``) and
    the CUDA allocator's peak on GPUs."""

    def make(self, cache, dataset, variant):
        # Not warmed: the first steps (compilation included) are what peaks.
        self.prep = caches.prepared(cache, dataset, variant, warm=False)

    def peakmem_train_step(self, cache, dataset, variant):
        """One epoch's steps (one for full-graph variants): the peak of the worst."""
        for _ in range(len(self.prep.batches)):
            self.prep.synced_step()


class CudaStepMemory(_PerModel, base._CudaStepPeak):
    """The device's peak of one warm step per variant (see ``base._CudaStepPeak``)."""


def trained_error_pct(graphs: dict, epochs: int, dataset: str, variant: str,
                      model: str = "gcn") -> dict:
    """Test error (%) of :obj:`variant` of :obj:`model` on graph :obj:`dataset`
    of :obj:`graphs` after :obj:`epochs` epochs; its losses checked after
    training (one sync), so NaN training fails rather than scores."""
    run = caches.build_run(graphs, dataset, variant, model=model, epochs=epochs)
    losses = []
    with suite.unavailable_as_na():
        for _ in range(epochs):
            losses += [run.step(batch) for batch in run.batches()]
    suite.CASES.check_losses(losses, variant, 1)
    return {"test_error_pct": round(100.0 * (1.0 - run.evaluate()["test"]), 2)}


def _trained_figures(graphs: dict, benchmark: type) -> dict:
    """:func:`trained_error_pct` of every parameter combination of
    :obj:`benchmark` (its ``params`` in order, its ``epochs``), all in this
    one process: n/a or the traceback per combination, so one failure fails
    only its own benchmark. One process, not one per pair: each forked
    child would warm torch up again and compile its compiled pair anew."""
    suite.set_threads()
    return {params: suite.measured_or_reason(trained_error_pct, graphs, benchmark.epochs,
                                              *params)
            for params in itertools.product(*benchmark.params)}


def accuracy_cache(self):
    """``setup_cache`` of :class:`Accuracy`: every pair trained once per ``asv run``."""
    return _trained_figures(caches.training_datasets_cache(self), Accuracy)


# A hang guard, per pair: room for a cold compile, well past a warm pair.
accuracy_cache.timeout = 120 * len(PROFILE.accuracy_datasets) * len(VARIANTS) * len(PROFILE.models)


class Accuracy(base.CachedFigures):
    """Test error after a fixed training budget: a rise is the regression.
    Trained in :func:`accuracy_cache`; a variant that cannot train a model,
    or in this environment, is n/a."""
    params = [list(PROFILE.accuracy_datasets), VARIANTS, list(PROFILE.models)]
    param_names = ["dataset", "variant", "model"]
    setup_cache = accuracy_cache
    epochs = PROFILE.accuracy_epochs
    # Another training budget is another figure: raise the version with it.
    version = "1"

    def track_test_error_pct(self, cache, *params):
        return self.figure("test_error_pct")

    track_test_error_pct.unit = "%"


def scale_accuracy_cache(self):
    """``setup_cache`` of :class:`SubgraphAccuracyAtScale`: its graphs
    generated once, then every (graph, variant) trained on them."""
    return _trained_figures(caches.scale_accuracy_graph_files(), SubgraphAccuracyAtScale)


scale_accuracy_cache.timeout = 1800


class SubgraphAccuracyAtScale(Accuracy):
    """Test error of saint next to sampled's and cluster's after a fixed
    budget on a generated graph of >= 10^6 edges (full profile) or a
    2000-node one (quick): saint's normalisation breaks on graphs whose
    pre-sampling misses edges, where it scores chance while cluster learns;
    a rise of saint's figure alone is that regression."""
    params = [list(profiles.scale_accuracy_graphs()), ["sampled", "saint", "cluster"]]
    param_names = ["dataset", "variant"]  # GCN's: saint's normalisation is model-independent
    setup_cache = scale_accuracy_cache
    epochs = profiles.SCALE_ACCURACY_EPOCHS["full" if PROFILE.name == "full" else "quick"]


class SampledThroughput(base.Benchmark):
    """Time per million sampled edges over whole epochs (sampling included):
    the inverse of throughput, so that a rise is the regression."""
    params = [list(PROFILE.datasets), profiles.minibatch_variants()]
    param_names = ["dataset", "variant"]
    setup_cache = caches.training_datasets_cache
    timeout = 600

    minibatch = True

    def make(self, cache, dataset, variant):
        self.prep = caches.prepared(cache, dataset, variant, warm=True)

    def track_time_per_million_sampled_edges(self, cache, dataset, variant):
        per_edge = []
        for _ in range(PROFILE.throughput_epochs):
            seconds, edges = caches.timed_epoch(self.prep.run, self.device)
            per_edge.append(seconds / max(edges, 1) * 1e6)
        return statistics.median(per_edge)

    track_time_per_million_sampled_edges.unit = "seconds"


class _OffloadEpoch(base.Benchmark):
    """Host-to-device traffic of the offload variants over one epoch (after
    a warm-up one), with NVML watching. CUDA-only: n/a on CPU, where the copy
    is a no-op."""
    params = [list(PROFILE.datasets), profiles.variants_with("offload")]
    param_names = ["dataset", "variant"]
    setup_cache = caches.training_datasets_cache
    timeout = 600

    needs_cuda = True

    def make(self, cache, dataset, variant):
        dev = self.device
        monitor_class = compat.gnnperf_name("measure.probes.GpuMonitor", "monitor.GpuMonitor")
        open_monitor = monitor_class.for_device
        run = caches.build_run(cache, dataset, variant)
        caches.timed_epoch(run, dev)  # warm-up: allocator, cuBLAS handles
        monitor, self.monitor_note = open_monitor(dev)
        self.util = None
        try:
            with monitor.active() if monitor is not None else contextlib.nullcontext():
                caches.timed_epoch(run, dev)
                # A Cora epoch takes milliseconds on a large GPU: the monitor
                # watches more epochs until it has enough samples (a minute at most).
                figures_of = getattr(monitor, "figures", None)  # None: an older commit
                deadline = time.perf_counter() + 60
                while (figures_of is not None and figures_of()[0] is None
                       and time.perf_counter() < deadline):
                    caches.timed_epoch(run, dev)
            if monitor is not None:
                figures, note = figures_of() if figures_of else (monitor.summary(), "")
                self.util = (figures or {}).get("gpu_util_pct")
                self.monitor_note = note or self.monitor_note
        finally:
            if monitor is not None:
                monitor.close()
        for finish in run.on_finish:
            finish()
        self.stats = run.stats
        if "transfer_mib_per_step" not in self.stats:
            raise NotImplementedError("this commit's offload records no transfer figures")


class OffloadTransfer(_OffloadEpoch):
    """MiB copied per step, the host-to-device copies' median milliseconds
    (CUDA events on the copy stream around the copies alone) and the host's
    median pinning milliseconds (its clock)."""
    # 2: copy_ms no longer holds the host's pinning, which
    # pin_ms reports apart.
    version = "2"

    def track_transfer_mib_per_step(self, cache, dataset, variant):
        return self.stats["transfer_mib_per_step"]

    track_transfer_mib_per_step.unit = "MiB"

    def track_copy_ms_per_step(self, cache, dataset, variant):
        return self.stats["copy_ms_per_step"]

    track_copy_ms_per_step.unit = "ms"

    def track_pin_ms_per_step(self, cache, dataset, variant):
        # NaN (asv's n/a) on commits whose offload timed pinning inside copy_ms.
        return self.stats.get("pin_ms_per_step", float("nan"))

    track_pin_ms_per_step.unit = "ms"


class OffloadGpuIdle(_OffloadEpoch):
    """100 - mean NVML GPU utilisation while an offload variant trains
    (higher is worse: the GPU waits for batches); n/a without NVML."""

    def make(self, cache, dataset, variant):
        super().make(cache, dataset, variant)
        if self.util is None:
            raise NotImplementedError(f"no GPU utilisation: {self.monitor_note}")

    def track_gpu_idle_pct(self, cache, dataset, variant):
        return 100.0 - self.util["mean"]

    track_gpu_idle_pct.unit = "%"


class Headroom(_PerVariant):
    """How far a whole epoch (batch making included) is from this machine's
    roofs: 100 minus its roofline % (:mod:`gnnperf.measure.roofline`: the time the
    epoch's counted FLOPs and compulsory bytes need at the roofs over its
    median time),
    so a rise is the regression. The work is counted in one untimed epoch;
    compiled variants count their eager equivalent (the same maths). On a
    GPU only the device's work is held to its roofs (an offload variant's
    host work and copies apart); a commit whose work count cannot split
    them is n/a there."""
    # 2: on a GPU, device work only, and roofs without launch-bound ladder
    # points. 3: the bound is the compulsory traffic's (each
    # memory that existed before a step, once), no longer the operators'
    # traffic; commits before it are n/a, not another formula.
    version = "3"

    def make(self, cache, dataset, variant):
        roofs = compat.gnnperf_name("measure.roofline.cached_roofs",
                                    "roofline.cached_roofs")(self.device)
        step_work = compat.gnnperf_name("measure.roofline.StepWork", "roofline.StepWork")
        assess = compat.gnnperf_name("measure.roofline.assess", "roofline.assess")
        prep = caches.prepared(cache, dataset, variant, warm=True)
        op_counter = compat.gnnperf_name("measure.workcount.OpCounter")
        if not hasattr(op_counter, "end_step"):  # an older commit: another bound, no figure
            raise NotImplementedError("this commit's work count has no compulsory traffic "
                                      "(the bound of version 3)")
        eager_counting = compat.gnnperf_name("measure.workcount.eager_counting")
        steps = 0
        with eager_counting(op_counter()) as ops:  # step by step, as gnnperf run counts
            for batch in prep.run.batches():
                prep.run.step(batch)
                ops.end_step()
                steps += 1
        if self.device.type == "cpu":
            work = step_work.of(ops, steps)
        elif hasattr(ops, "places"):  # the device's work apart from the host's
            work = step_work.of(ops, steps, self.device)
        else:
            raise NotImplementedError("this commit's work count does not split a GPU step's "
                                      "device work from its host work")
        seconds = statistics.median(caches.timed_epoch(prep.run, self.device)[0]
                                    for _ in range(PROFILE.throughput_epochs))
        self.headroom_pct = 100.0 - assess(work, seconds, roofs)["roofline_pct"]

    def track_headroom_pct(self, cache, dataset, variant):
        return round(self.headroom_pct, 2)

    track_headroom_pct.unit = "%"
