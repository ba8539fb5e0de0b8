"""Exact work metrics of one training step, the dispatch-mode canary, and
the callgrind parser (the gate itself: tests/test_gate.py)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from gnnperf.measure.case import Case, prepare
from gnnperf.data import load_dataset
from gnnperf.gate.work import compare_work
from gnnperf.variants import TrainingRun
from gnnperf.measure.workcount import EXACT_FIELDS, count_work, measure_work

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import callgrind_step  # noqa: E402

@pytest.fixture(scope="module")
def small_graph():
    return load_dataset("synthetic-10k")


def work_metrics(variant: str, data):
    """One step's work of :obj:`variant` on :obj:`data`, one thread: built,
    warmed and measured as the gate's work worker does."""
    return measure_work(prepare(Case(variant, data.name, threads=1), data))


@pytest.mark.parametrize("variant", ["baseline", "sampled"])
def test_work_metrics_are_exactly_repeatable(small_graph, variant):
    first = work_metrics(variant, small_graph)
    second = work_metrics(variant, small_graph)
    assert first.exact() == second.exact()
    assert first.op_counts == second.op_counts
    assert first.aten_ops > 50 and first.flops > 0 and first.profiled_ops > first.aten_ops
    assert 0 < first.peak_bytes <= first.bytes_allocated
    assert first.threads == 1
    assert first.compiled_graphs is None and first.recompiles is None


def test_one_extra_op_changes_the_metrics(small_graph, monkeypatch):
    before = work_metrics("baseline", small_graph)
    original = TrainingRun.step

    def step_with_extra_op(self, batch):
        loss = original(self, batch)
        loss.add(1.0)  # one more ATen call, and a 4-byte allocation
        return loss

    monkeypatch.setattr(TrainingRun, "step", step_with_extra_op)
    after = work_metrics("baseline", small_graph)
    assert after.aten_ops == before.aten_ops + 1
    assert after.op_counts["aten.add"] == before.op_counts["aten.add"] + 1
    # Compared as the gate compares them (the worker's record: to_dict() and exact()).
    rows = compare_work(["baseline"], [dict(before.to_dict(), exact=before.exact())],
                        [dict(after.to_dict(), exact=after.exact())])
    changed = {row["metric"] for row in rows if not row["same"]}
    assert {"aten_ops", "bytes_allocated", "op_counts"} <= changed
    assert changed - {"op_counts"} <= set(EXACT_FIELDS)
    assert next(row for row in rows if row["metric"] == "op_counts")["op_delta"]["aten.add"] == 1


def test_op_counter_counts_one_call_per_op():
    x = torch.ones(3)
    counts = count_work(lambda: (x + 1).mul(2).sum()).counts
    assert counts == {"aten.add": 1, "aten.mul": 1, "aten.sum": 1}


def test_profile_self_times_are_per_step_and_cover_the_step():
    # The gate's explanation reads each op's self time and calls per step
    # from this profile; calls are exact, times only positive.
    from gnnperf.measure.workcount import BETWEEN_OPS, profile_self_times
    x = torch.ones(3)
    found = profile_self_times(lambda: (x + 1).mul(2), steps=4)
    assert found["steps"] == 4 and found["wall_us"] > 0 and found["cpu_us"] >= 0
    assert found["ops"]["aten::add"]["calls"] == 1 and found["ops"]["aten::mul"]["calls"] == 1
    assert BETWEEN_OPS in found["ops"]
    assert all(op["self_us"] >= 0 for op in found["ops"].values())


def test_measure_work_of_a_compiled_variant_has_no_recompiles(small_graph):
    pytest.importorskip("torch._inductor")
    case = prepare(Case("compiled", "synthetic-10k"), small_graph)
    work = measure_work(case)
    assert work.compiled_graphs >= 1
    assert work.graph_breaks == 0 and work.recompiles == 0
    # The step after the count still runs compiled: counted under a bare
    # dispatch mode, Dynamo skipped the frame for good, so pytest-benchmark
    # timed an eager step as "compiled" (test_bench_training times case.step
    # right after measure_work).
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        case.step()
    assert any("Compiled" in event.name for event in prof.events())


# --------------------------------------------------------------------- callgrind tool
def test_callgrind_total_parser():
    assert callgrind_step.parse_total("events: Ir\nsummary: 1234\n") == 1234
    assert callgrind_step.parse_total("events: Ir\ntotals: 99\n") == 99
    with pytest.raises(ValueError):
        callgrind_step.parse_total("events: Ir\n")


def test_the_step_tools_build_their_case_from_the_measurement_wing(capsys):
    # tools/profile_step.py and callgrind_step.py step a case as the gate
    # does; both imported gnnperf.case, gone since the measurement wing
    # (ModuleNotFoundError), untested until this test.
    import argparse

    import profile_step
    graph = "synthetic:nodes=300,degree=4,features=8,classes=3"
    assert profile_step.main([f"baseline@{graph}", "--steps", "2", "--rows", "2"]) == 0
    assert "ms median unprofiled" in capsys.readouterr().out
    callgrind_step._worker(argparse.Namespace(variant="sampled", dataset=graph, steps=2))


def _fake_profiler(monkeypatch, events):
    """torch.profiler.profile replaced by one whose run recorded :obj:`events`
    ((device type, device index, bytes) in time order) as memory events."""
    import contextlib
    import types

    def event(order, place, index, nbytes):
        return types.SimpleNamespace(
            name=lambda: "[memory]", nbytes=lambda: nbytes, start_ns=lambda: order,
            device_type=lambda: types.SimpleNamespace(name=place),
            device_index=lambda: index)
    recorded = [event(order, *entry) for order, entry in enumerate(events)]
    recorded.append(types.SimpleNamespace(name=lambda: "aten::mm"))  # an operator event
    results = types.SimpleNamespace(events=lambda: recorded)
    prof = types.SimpleNamespace(profiler=types.SimpleNamespace(kineto_results=results))
    monkeypatch.setattr(torch.profiler, "profile",
                        lambda **kwargs: contextlib.nullcontext(prof))


def test_profiled_memory_is_kept_per_device_never_summed_across_them(monkeypatch):
    # A regression test: on a GPU the profiler's memory events hold host and device
    # allocations (and another GPU's); summing them mixes pinned host
    # buffers into the device's peak. The step's device is reported, the
    # host apart.
    from gnnperf.measure.workcount import profile_work
    _fake_profiler(monkeypatch, [("CPU", -1, 100), ("CUDA", 0, 1000), ("CPU", -1, -100),
                                 ("CUDA", 0, 500), ("CUDA", 0, -1500), ("CUDA", 1, 7000)])
    on_gpu = profile_work(lambda: None, torch.device("cuda:0"))
    assert (on_gpu.bytes_allocated, on_gpu.peak_bytes) == (1500, 1500)
    assert (on_gpu.host_bytes_allocated, on_gpu.host_peak_bytes) == (100, 100)
    assert on_gpu.ops == 1
    on_host = profile_work(lambda: None, torch.device("cpu"))
    assert (on_host.bytes_allocated, on_host.peak_bytes) == (100, 100)
    assert on_host.host_bytes_allocated is None  # the step's device is the host: n/a
    _fake_profiler(monkeypatch, [("CPU", -1, 64)])
    assert profile_work(lambda: None, torch.device("cuda")).peak_bytes is None  # no GPU events
