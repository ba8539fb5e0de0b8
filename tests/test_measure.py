import time

import pytest
import torch

from gnnperf.errors import GnnperfError
from gnnperf.measure.runner import Timing, measure_cpu_peak, measure_variant, resolve_device
from gnnperf.variants import TrainConfig, get_variant


def test_cpu_peak_sees_a_known_200mb_allocation():
    size = 200 * 10 ** 6

    def allocate():
        block = torch.ones(size // 4)  # ones: touched pages count, empty ones would not
        return float(block[-1])

    peak = measure_cpu_peak(allocate)
    assert peak is not None
    assert abs(peak - size) < 0.1 * size


def test_cpu_peak_ignores_a_freed_earlier_allocation():
    big = torch.ones(50 * 10 ** 6)
    del big
    peak = measure_cpu_peak(lambda: torch.ones(10 ** 6))
    assert peak < 20 * 10 ** 6


def test_timing_summary():
    timing = Timing.of([1.0, 2.0, 3.0, 4.0, 100.0])
    assert timing.median == 3.0 and timing.minimum == 1.0
    assert timing.q1 == 2.0 and timing.q3 == 4.0
    assert timing.spread == pytest.approx(2 / 3)


def test_cpu_run_reports_no_cuda_figures():
    from gnnperf.data import load_dataset
    data = load_dataset("synthetic:nodes=600,degree=4,features=16,classes=3")
    result = measure_variant(get_variant("sampled"), data, TrainConfig(epochs=6), "cpu",
                             warmup_epochs=2)
    assert result.cuda_peak_bytes is None
    assert result.step_peak_bytes > 0
    assert result.sampled_edges_per_s > 0 and result.seed_nodes_per_s > 0
    assert len(result.epoch_time.samples) == 4 and len(result.losses) == 6
    assert result.compiled_graphs is None


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_request_without_cuda():
    with pytest.raises(GnnperfError, match="has no CUDA.*use --device cpu"):
        resolve_device("cuda")
    assert resolve_device("auto").type == "cpu"


SMALL_GRAPH = "synthetic:nodes=600,degree=4,features=16,classes=3"


@pytest.mark.parametrize("earlier", ["sampled", "saint", "sampled+offload"])
def test_the_next_variant_is_built_after_the_earlier_runs_are_freed(monkeypatch, earlier):
    # `gnnperf run` trains every variant in one process. These runs hold
    # reference cycles (closures over the run), which only the collector
    # frees: with it off, as between its passes, an earlier run's graph,
    # model and optimiser state would still be allocated in the next
    # variant's peak.
    import gc
    import weakref

    from gnnperf.data import load_dataset
    from gnnperf.variants import Variant
    data = load_dataset(SMALL_GRAPH)
    built, alive_at_build = [], []
    original = Variant.build

    def build(self, *args, **kwargs):
        alive_at_build.append([ref() is not None for ref in built])
        run = original(self, *args, **kwargs)
        built.append(weakref.ref(run.model))
        return run
    monkeypatch.setattr(Variant, "build", build)
    gc.unfreeze()  # as `gnnperf run`'s process: nothing frozen (the conftest freezes between tests)
    gc.disable()
    try:
        config = TrainConfig(epochs=3)
        measure_variant(get_variant(earlier), data, config, "cpu", 2)
        measure_variant(get_variant("baseline"), data, config, "cpu", 2)
    finally:
        gc.enable()
    assert alive_at_build == [[], [False]]


def test_a_cuda_peak_is_above_what_the_process_held_before_the_build(monkeypatch):
    # The CUDA allocator's counters, faked: 700 MiB held by earlier work,
    # the step allocating 300 MiB over it. Reported: the 300, not 1000.
    from gnnperf.measure import runner as measure
    from gnnperf.measure.probes import MemoryTimeline
    mib = 2 ** 20
    allocator = {"now": 700 * mib, "peak": 700 * mib}
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: allocator["now"])
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: allocator["peak"])
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats",
                        lambda device=None: allocator.update(peak=allocator["now"]))

    def step():
        allocator["peak"] = allocator["now"] + 300 * mib
        allocator["now"] += 10 * mib  # what the step keeps (e.g. optimiser state)
    cuda = torch.device("cuda")
    held = measure.held_bytes(cuda)
    assert measure.step_peak_bytes(step, cuda, held) == 300 * mib
    timeline = MemoryTimeline("cuda", held_bytes=held)
    timeline.before_step()
    step()
    timeline.after_step()
    assert timeline.step_peak_bytes == [310 * mib] and timeline.allocated_bytes == [20 * mib]
    assert timeline.to_dict()["held_bytes"] == 700 * mib


def test_the_devices_first_use_is_paid_and_reported_before_the_first_epoch(monkeypatch):
    # A device's one-off first use (on CUDA its context and cuBLAS/cuSPARSE
    # handles, a costly one-off) stands here as a 0.3 s first use: it is
    # reported as the device's warm-up, not in the first epoch (nor as compile).
    from gnnperf.measure import runner as measure
    from gnnperf.data import load_dataset
    assert measure.warm_device(torch.device("cpu")) > 0  # the real one runs on CPU
    paid = []
    real_step = measure.TrainingRun.step

    def first_device_use():
        if not paid:
            time.sleep(0.3)
            paid.append(True)

    def step(self, batch):
        first_device_use()
        return real_step(self, batch)

    def warm(device):
        start = time.perf_counter()
        first_device_use()
        return time.perf_counter() - start
    monkeypatch.setattr(measure.TrainingRun, "step", step)
    monkeypatch.setattr(measure, "warm_device", warm)
    data = load_dataset("synthetic:nodes=300,degree=4,features=8,classes=3")
    result = measure_variant(get_variant("baseline"), data, TrainConfig(epochs=4), "cpu",
                             warmup_epochs=2)
    assert result.device_warmup_s >= 0.3 and result.first_epoch_s < 0.3
    assert result.compile_s is None


def _ops_of_warm_device(device: torch.device, monkeypatch) -> list[tuple]:
    """(op, dtypes of its tensors, layouts, first tensor's rank, the dtype of
    the autocast region it ran in or None) of each ATen call
    :func:`warm_device` makes on :obj:`device`."""
    from gnnperf.measure import runner as measure
    from gnnperf.torch_private import TorchDispatchMode
    seen, region = [], []
    real_autocast = torch.autocast

    class Autocast(real_autocast):  # the real one, its region recorded
        def __enter__(self):
            region.append(self.fast_dtype)
            return super().__enter__()

        def __exit__(self, *exc):
            region.pop()
            return super().__exit__(*exc)
    monkeypatch.setattr(torch, "autocast", Autocast)

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            tensors = [a for a in args if isinstance(a, torch.Tensor)]
            seen.append((str(func.overloadpacket), tuple(t.dtype for t in tensors),
                         tuple(t.layout for t in tensors),
                         tensors[0].dim() if tensors else None,
                         region[-1] if region else None))
            return func(*args, **(kwargs or {}))
    with Record():
        measure.warm_device(device)
    return seen


def test_the_device_warm_up_runs_every_library_path_a_first_variant_would_pay_for(
        monkeypatch):
    # A regression test: a first SAGE/GIN step (addmm with a bias: cuBLASLt's path
    # and workspace) or amp step (bf16/fp16 matmuls, under autocast) must
    # not carry a library's first use in its peak. The same ops run on CPU
    # (oneDNN's first use), where a dispatch mode sees them.
    ops = _ops_of_warm_device(torch.device("cpu"), monkeypatch)
    products = [op for op in ops if op[0] in ("aten.addmm", "aten.mm")]
    f32, bf16, f16 = torch.float32, torch.bfloat16, torch.float16
    assert any(op[0] == "aten.addmm" and op[1] == (f32,) * 3 and op[3] == 1
               for op in products), products  # a bias add fused into the product
    for dtype in (bf16, f16):
        assert any(op[1] and set(op[1]) == {dtype} and op[4] is None for op in products), dtype
        assert any(op[1] and set(op[1]) == {dtype} and op[4] == dtype for op in products), dtype
    # The models' CSR product (cuSPARSE's SpMM), forward and backward.
    assert sum(torch.sparse_csr in op[2] for op in products) >= 2


def test_the_warm_up_takes_the_half_precisions_the_gpu_supports(monkeypatch):
    from gnnperf.measure import runner as measure
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: False)
    assert measure.warm_dtypes(torch.device("cuda")) == (torch.float16,)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: True)
    assert measure.warm_dtypes(torch.device("cuda")) == (torch.bfloat16, torch.float16)
    assert measure.warm_dtypes(torch.device("cpu")) == (torch.bfloat16, torch.float16)


def test_a_compiled_run_compiles_in_a_fresh_cache_after_the_compilers_one_offs(
        monkeypatch, cora_dataset):
    # A regression test: compile_s must mean the same whatever ran before: the
    # process's compiler one-offs are paid (and reported) before the build,
    # and the run compiles in a private, fresh cache, held from the build
    # to the end of training. torch.compile stands as the identity here (a
    # real cold compile is test_torch_private's); the order is what counts.
    import contextlib

    from gnnperf import torch_private
    from gnnperf.measure import runner as measure
    events = []

    @contextlib.contextmanager
    def fresh():
        events.append("fresh cache")
        yield "fresh"
        events.append("cache dropped")
    monkeypatch.setattr(torch_private, "fresh_compile_cache", fresh)
    monkeypatch.setattr(torch_private, "warm_compiler",
                        lambda device: events.append(f"compiler warmed on {device}"))
    monkeypatch.setattr(torch, "compile", lambda fn, **kwargs: fn)
    real_build = measure.Variant.build
    monkeypatch.setattr(measure.Variant, "build",
                        lambda self, *args: events.append("build") or real_build(self, *args))
    real_epoch = measure._run_epoch
    monkeypatch.setattr(measure, "_run_epoch",
                        lambda *args, **kwargs: events.append("epoch") or real_epoch(*args,
                                                                                     **kwargs))
    result = measure_variant(get_variant("compiled"), cora_dataset, TrainConfig(epochs=4), "cpu",
                             warmup_epochs=2)
    assert events == ["compiler warmed on cpu", "fresh cache", "build", *["epoch"] * 4,
                      "cache dropped"]
    assert result.setup_seconds["compiler_warmup"] >= 0
    assert result.extra["compile_cache"].startswith("fresh")
    events.clear()
    eager = measure_variant(get_variant("baseline"), cora_dataset, TrainConfig(epochs=3), "cpu",
                            warmup_epochs=2)
    assert events == ["build", *["epoch"] * 3]  # nothing compiles: no compiler set-up
    assert "compiler_warmup" not in eager.setup_seconds and "compile_cache" not in eager.extra


def test_measure_variant_takes_the_parsed_variant_and_the_loaded_dataset(cora_dataset):
    # Strings end at the command line: a name or a bare graph is refused
    # with the call that makes the object, before anything trains.
    with pytest.raises(TypeError, match=r"gnnperf.get_variant\('baseline'\)"):
        measure_variant("baseline", cora_dataset)
    with pytest.raises(TypeError, match=r"gnnperf.Dataset\(graph\)"):
        measure_variant(get_variant("baseline"), cora_dataset.graph)


def test_the_runs_collections_skip_what_was_built_and_leave_the_collector_as_it_was(
        cora_dataset, monkeypatch):
    import gc

    from gnnperf.measure import workcount
    frozen_while_profiled = []
    profile = workcount.profile_work

    def watched(fn):
        frozen_while_profiled.append(gc.get_freeze_count())
        return profile(fn)
    monkeypatch.setattr(workcount, "profile_work", watched)
    config = TrainConfig(epochs=3, seed=0)
    gc.unfreeze()  # a user's process: nothing frozen (the conftest freezes between tests)
    assert gc.get_freeze_count() == 0
    result = measure_variant(get_variant("cluster"), cora_dataset, config, "cpu", 2)
    # Every profiled step of the memory epoch ran with the built objects frozen...
    assert len(frozen_while_profiled) == result.steps_per_epoch and min(frozen_while_profiled) > 0
    assert gc.get_freeze_count() == 0  # ...and nothing stays frozen after the run
    gc.freeze()  # a caller's own frozen objects stay frozen
    try:
        before = gc.get_freeze_count()
        measure_variant(get_variant("baseline"), cora_dataset, config, "cpu", 2)
        assert gc.get_freeze_count() > before // 2  # not unfrozen (some die by refcount)
    finally:
        gc.unfreeze()


def test_no_evaluation_input_is_held_while_a_steps_peak_is_taken(cora_dataset, monkeypatch):
    # A sampled run's evaluation keeps the full graph between epochs; the
    # memory epoch's peaks must not hold it (on CUDA it would count).
    from gnnperf.measure import runner
    from gnnperf.variants.base import TrainingRun
    measuring, held = [], []
    peak, step = runner.step_peak_bytes, TrainingRun.step

    def watched_peak(fn, *args):
        measuring.append(True)
        try:
            return peak(fn, *args)
        finally:
            measuring.pop()

    def watched_step(self, batch):
        if measuring:
            held.append(self._eval_inputs is not None)
        return step(self, batch)
    monkeypatch.setattr(runner, "step_peak_bytes", watched_peak)
    monkeypatch.setattr(TrainingRun, "step", watched_step)
    result = measure_variant(get_variant("sampled"), cora_dataset, TrainConfig(epochs=5), "cpu", 3)
    assert held == [False] * result.steps_per_epoch
    assert len(result.convergence["val_acc"]) == 5


def test_a_frozen_process_frees_each_variants_cycles_and_freezes_what_lives_on():
    # The run command freezes its collector once; release_memory then frees
    # what the last variant left in cycles and freezes the survivors, so the
    # next variant's collections walk only what it makes.
    import gc
    import weakref

    from gnnperf.measure.runner import release_memory

    class Node:
        pass
    gc.freeze()
    try:
        garbage, kept = Node(), Node()
        garbage.self, kept.self = garbage, kept  # two cycles, one still referenced
        dead = weakref.ref(garbage)
        del garbage
        release_memory(torch.device("cpu"))
        assert dead() is None
        assert not any(obj is kept for obj in gc.get_objects())  # frozen: not walked
    finally:
        gc.unfreeze()


def test_the_loader_clock_takes_each_batch_apart_and_leaves_the_loader_as_it_was():
    from gnnperf.data import load_dataset
    from gnnperf.measure.runner import LoaderClock
    from gnnperf.sampling.neighbor import make_neighbor_loader
    graph = load_dataset("synthetic:nodes=2000,degree=8,features=32,classes=4").graph
    loader = make_neighbor_loader(graph, [5, 5], 128, seed=0, backend="vectorized",
                                  edge_ids=False)
    calls = {"sampler": 0}
    original = loader.node_sampler.sample_from_nodes

    def counted(*args, **kwargs):  # a sampler that takes at least 20 ms
        calls["sampler"] += 1
        time.sleep(0.02)
        return original(*args, **kwargs)
    loader.node_sampler.sample_from_nodes = counted
    iterator = iter(loader)
    with LoaderClock(loader, torch.device("cpu")) as clock:
        timed = [clock.batch(lambda: next(iterator))[1] for _ in range(6)]
    assert calls["sampler"] == 6  # the clock timed the loader's own sampler, batch by batch
    parts = clock.parts(skip=1)
    assert len(parts.sampling_ms.samples) == len(parts.rest_ms.samples) == 5
    assert min(parts.sampling_ms.samples) > 0 and min(parts.feature_gather_ms.samples) > 0
    assert parts.feature_gather_bytes_per_s > 0 and parts.feature_gather_roof_pct is None
    # The sampler's 20 ms land in its part, not in the rest.
    assert min(parts.sampling_ms.samples) >= 20
    assert all(rest < sampling for rest, sampling
               in zip(parts.rest_ms.samples, parts.sampling_ms.samples))
    assert all(part < seconds * 1e3 for part, seconds
               in zip(parts.sampling_ms.samples, timed[1:]))
    # The timers are gone: the sampler's attribute is the one it had, the
    # pool's method its class's.
    assert loader.node_sampler.sample_from_nodes is counted
    assert "index_select" not in vars(loader._feature_pool)
