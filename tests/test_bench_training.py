"""pytest-benchmark benchmarks of every registry variant's training step, on
Cora and a small synthetic graph, grouped by variant.

The ordinary test run (``--benchmark-disable`` in pyproject's addopts) runs
each step once, untimed, and checks the work metrics; the timed run is::

    pytest -n 0 tests/test_bench_training.py --benchmark-enable --benchmark-json bench.json

(``-n 0``: one process; pytest-benchmark switches itself off under xdist.)

Each benchmark's ``extra_info`` holds the exact work metrics of one step
(:mod:`gnnperf.measure.workcount`: ATen ops, FLOPs, profiled ops, bytes allocated,
peak bytes, compiled graphs / graph breaks / recompiles), the peak memory, the
accuracy after the timed steps, the thread count and the device. Wall-clock
comparisons between runs belong to ``gnnperf gate`` (interleaved A/B in
one job), not to ``--benchmark-compare-fail`` across jobs.
"""
from __future__ import annotations

import pytest
import torch

from gnnperf.data import load_dataset
from gnnperf.errors import GnnperfError
from gnnperf.variants import standard_variants
from gnnperf.measure.case import DEFAULT_DATASETS, Case, prepare
from gnnperf.measure.workcount import EXACT_FIELDS, measure_work

DATASETS = list(DEFAULT_DATASETS)
DEVICE = torch.device("cpu")
THREADS = 1


@pytest.fixture(scope="module")
def bench_data(request):
    cache: dict = {}

    def get(name: str):
        if name not in cache:
            if name == "cora":
                cache[name] = request.getfixturevalue("cora")
            else:
                cache[name] = load_dataset(name)
        return cache[name]

    return get


def pytest_generate_tests(metafunc):
    """Every variant on every dataset when timed; untimed (the ordinary run),
    a compiled variant on the first dataset only: on the second it compiles
    the same code for other shapes, a cold compile (10-20 s on a fresh
    cache) that checks nothing the first one does not."""
    if metafunc.function.__name__ != "test_train_step":
        return
    config = metafunc.config
    timed = (config.getoption("benchmark_enable", False)
             or not config.getoption("benchmark_disable", False))
    combos = [(variant, dataset) for dataset in DATASETS for variant in standard_variants()
              if timed or "compiled" not in variant.split("+") or dataset == DATASETS[0]]
    metafunc.parametrize(("variant", "dataset"), combos,
                         ids=[f"{variant}-{dataset}" for variant, dataset in combos])


def test_train_step(benchmark, bench_data, variant, dataset):
    try:
        case = prepare(Case(variant, dataset, device=str(DEVICE), threads=THREADS),
                       bench_data(dataset))
    except GnnperfError as exc:  # a technique that does not apply here
        pytest.skip(str(exc))
    work = measure_work(case)
    benchmark.group = variant
    benchmark.extra_info.update({
        "variant": variant,
        "dataset": dataset,
        "device": str(DEVICE),
        "threads": torch.get_num_threads(),
        "peak_memory_bytes": work.peak_bytes,
        "peak_memory_method": "torch profiler memory events, live bytes above step start",
        "work": work.exact(),
        "op_counts": work.op_counts,
    })

    benchmark(case.step)

    accuracy = case.run.evaluate()
    benchmark.extra_info["accuracy"] = accuracy

    assert work.aten_ops > 0 and work.flops > 0 and work.profiled_ops > 0
    assert work.bytes_allocated and work.peak_bytes and work.peak_bytes <= work.bytes_allocated
    assert all(0.0 <= acc <= 1.0 for acc in accuracy.values())
    assert set(benchmark.extra_info["work"]) == set(EXACT_FIELDS)
    if case.run.compile_counter is not None:
        assert work.recompiles == 0, "a compiled variant recompiled on a repeated batch"
    else:
        assert work.graph_breaks is None and work.recompiles is None


# ------------------------------------------- the history figure's environment guard
# The asv benchmark class itself, in this process: a real Cora step against
# the real reference, its timing cut to a few rounds of small blocks.
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def cora_cache(tmp_path_factory, cora):
    """What the suite's ``setup_cache`` hands a benchmark: dataset -> a file."""
    path = tmp_path_factory.mktemp("asv-cache") / "cora.pt"
    torch.save(load_dataset("cora"), path)
    return {"cora": str(path)}


@pytest.fixture
def figure(monkeypatch):
    """``TrainStepOverReference`` with one build of three rounds, and
    whatever a test turns on undone after it: torch's modes and threads,
    and every thread it started stopped."""
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks import caches, training
    bench = training.TrainStepOverReference()
    bench.builds, bench.timed_rounds, bench.block_s = 1, 3, 0.004
    stop = threading.Event()
    threads = torch.get_num_threads()
    undo: list = []
    yield bench, stop, undo
    stop.set()
    for action in reversed(undo):
        action()
    torch.set_grad_enabled(True)
    torch.autograd.set_detect_anomaly(False)
    torch.use_deterministic_algorithms(False)
    torch.set_num_threads(threads)
    caches._RUNS.clear()


def _spinning(stop: threading.Event) -> None:
    while not stop.is_set():  # pure Python: holds the GIL between switches
        pass


def _computing(stop: threading.Event) -> None:
    a = torch.randn(256, 256)
    while not stop.is_set():  # torch ops: the GIL released inside each
        a @ a


def _idle(stop: threading.Event) -> None:
    stop.wait()


def test_the_history_figure_records_the_guards_readings_when_clean(figure, cora_cache):
    bench, _, _ = figure
    bench.setup(cora_cache, "cora", "baseline")
    ratio = bench.track_step_over_reference(cora_cache, "cora", "baseline")
    assert 0.1 < ratio < 10
    record = bench.guard.record(bench.device)
    assert record["process_cpu_s"] > 0 and record["thread_cpu_s"] > 0
    assert record["background_cpu_share"] < 0.02 and record["new_python_threads"] == []
    assert bench.guard.findings(bench.device) == []


# name -> (what it does to the process, in setup unless named "before setup";
# what the failure must name)
INJECTED = {
    "spinning thread in setup": ("spin", "of the process's CPU time"),
    "torch thread in setup": ("ops", "of the process's CPU time"),
    # Started before setup (as at import under asv's spawn launch): the
    # guard's thread list holds it, only the CPU it takes shows it.
    "spinning thread before setup": ("spin-early", "of the process's CPU time"),
    "idle thread in setup": ("idle", "started since setup began"),
    "anomaly detection": (lambda: torch.autograd.set_detect_anomaly(True),
                          "torch.is_anomaly_enabled() is True"),
    "grad mode off": (lambda: torch.set_grad_enabled(False), "torch.is_grad_enabled() is False"),
    "deterministic algorithms": (lambda: torch.use_deterministic_algorithms(True),
                                 "torch.are_deterministic_algorithms_enabled() is True"),
    "more intra-op threads": (lambda: torch.set_num_threads(2),
                              "torch.get_num_threads() is 2 (clean: 1)"),
    "autograd profiler": ("profiler", "torch.autograd._profiler_enabled() is True"),
}


@pytest.mark.parametrize("name", list(INJECTED))
def test_the_history_figure_fails_naming_a_background_thread_or_a_global_mode(
        figure, cora_cache, monkeypatch, name):
    """Each of these slows the step and the reference alike, so the ratio
    cancels it (a spinning thread moved it by under 4% while taking over
    half the process's CPU): the figure fails instead, naming it, and asv
    records no value."""
    bench, stop, undo = figure
    from benchmarks import caches
    inject, named = INJECTED[name]
    targets = {"spin": _spinning, "spin-early": _spinning, "ops": _computing, "idle": _idle}

    def start_thread() -> None:
        thread = threading.Thread(target=targets[inject], args=(stop,), daemon=True,
                                  name=f"injected-{inject}")
        thread.start()
        undo.append(thread.join)

    def in_setup() -> None:
        if inject == "profiler":
            profiler = torch.autograd.profiler.profile()
            profiler.__enter__()
            undo.append(lambda: profiler.__exit__(None, None, None))
        elif isinstance(inject, str):
            start_thread()
        else:
            inject()

    prepared = caches.prepared

    def prepared_then_injected(*args, **kwargs):
        prep = prepared(*args, **kwargs)  # the warm-up step ran clean
        if inject != "spin-early":
            in_setup()
        return prep

    monkeypatch.setattr(caches, "prepared", prepared_then_injected)
    if inject == "spin-early":
        start_thread()
    bench.setup(cora_cache, "cora", "baseline")
    with pytest.raises(RuntimeError, match="not in the suite's clean state") as failed:
        bench.track_step_over_reference(cora_cache, "cora", "baseline")
    assert type(failed.value).__name__ == "EnvironmentNotClean"  # a failure, not asv's n/a
    message = str(failed.value)
    assert named in message and "TrainStepOverReference(cora, baseline)" in message, message
    assert "\n" not in message


def test_the_background_share_is_judged_on_cpu_only():
    # CUDA's backward runs on the autograd engine's device thread: its CPU
    # time is the step's, not a stranger's (unverified on a GPU).
    from types import SimpleNamespace

    from benchmarks.relative import BACKGROUND_CPU_TOLERANCE, EnvironmentGuard
    guard = EnvironmentGuard()
    guard.cpu = SimpleNamespace(background_share=BACKGROUND_CPU_TOLERANCE * 10,
                                process_s=1.0, thread_s=0.5)
    assert any("other threads used" in f for f in guard.findings(torch.device("cpu")))
    assert not any("other threads used" in f for f in guard.findings(torch.device("cuda")))
