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
