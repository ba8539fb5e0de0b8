"""The asv suite's CUDA figures, with CUDA's counters faked (this machine may
have no GPU): what a figure counts, not only that it runs
(tests/test_asv_suite.py runs the suite itself)."""
from __future__ import annotations

import types
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
MIB = 2 ** 20


class FakeAllocator:
    """torch.cuda's allocated-bytes counters: :attr:`now` and :attr:`peak`."""

    def __init__(self, monkeypatch, now: int) -> None:
        self.now = self.peak = now
        monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
        monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: self.now)
        monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: self.peak)
        monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats",
                            lambda device=None: setattr(self, "peak", self.now))
        monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)

    def allocate(self, nbytes: int) -> None:
        self.now += nbytes
        self.peak = max(self.peak, self.now)


@pytest.mark.parametrize("module, class_name, params", [
    ("training", "CudaStepMemory", ("synthetic-1m", "sampled", "gcn")),
    ("scaling", "ScalingCudaMemory", ("1e6", "sampled"))])
def test_the_cuda_step_peak_is_one_steps_above_what_was_held_before_the_build(
        monkeypatch, module, class_name, params):
    # A regression test: the figure prepared a whole epoch of batches on the device
    # (a sampled variant on synthetic-1m: 79 of them) and reported the
    # absolute peak, earlier work included. Faked: 700 MiB held before the
    # build (an earlier run's leftovers, the device's warm-up), a build of
    # 300 MiB (graph, model, optimiser state), 5 MiB per prepared batch, a
    # step rising 40 MiB above its start. One step's figure is 300 + 5 + 40.
    import importlib
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks import caches, suite
    bench_module = importlib.import_module(f"benchmarks.{module}")
    allocator = FakeAllocator(monkeypatch, 700 * MIB)
    cuda = torch.device("cuda")
    monkeypatch.setattr(suite, "device", lambda: cuda)
    monkeypatch.setattr(suite, "set_threads", lambda: None)
    monkeypatch.setattr(caches, "warm_device", lambda dev: None)
    monkeypatch.setattr(caches, "variant", lambda name: None)
    monkeypatch.setattr(caches, "dataset", lambda cache, key: object())
    monkeypatch.setattr(caches, "_RUNS", {})
    epoch_batches = 79

    def prepare(case, data, fixed_batch=True):
        allocator.allocate(300 * MIB)
        batches = [object()] * (1 if fixed_batch else epoch_batches)
        allocator.allocate(5 * MIB * len(batches))

        def synced_step():
            allocator.allocate(40 * MIB)
            allocator.allocate(-40 * MIB)
        return types.SimpleNamespace(batches=batches, synced_step=synced_step, last_loss=None)
    monkeypatch.setattr(suite.CASES, "prepare", prepare)
    bench = getattr(bench_module, class_name)()
    bench.setup({}, *params)
    assert len(bench.prep.batches) == 1  # the step's batch alone on the device
    assert bench.track_cuda_peak_mib({}, *params) == pytest.approx(300 + 5 + 40)
    assert bench.track_cuda_peak_mib({}, *params) == pytest.approx(300 + 5 + 40)  # reset each time
    assert int(bench.version) >= 2  # another meaning: asv starts a new history
