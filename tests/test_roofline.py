"""The roofline: bytes moved counted exactly, roofs measured once and cached,
the roof that applies to a working set, and a run's steps held to them with
the counting kept out of the timed epochs."""
import json
import types

import pytest
import torch

from gnnperf.errors import GnnperfError
from gnnperf.measure import roofline
from gnnperf.measure.roofline import Roofs, StepWork, assess, cached_roofs
from gnnperf.measure.workcount import OpCounter, count_work, eager_counting
from gnnperf.variants import get_variant

MIB = 2 ** 20


def test_bytes_moved_of_a_mm_and_an_index_select_are_their_operands_and_results():
    x, weight = torch.randn(1000, 16), torch.randn(16, 8)
    index = torch.randint(1000, (100,))
    work = count_work(lambda: torch.index_select(x @ weight, 0, index))
    assert dict(work.counts) == {"aten.mm": 1, "aten.index_select": 1}
    mm = (1000 * 16 + 16 * 8 + 1000 * 8) * 4  # x and weight read, the product written
    # 100 rows of 8 floats gathered (not the whole 1000-row table), the int64
    # index read, 100 rows written.
    gather = 100 * 8 * 4 + 100 * 8 + 100 * 8 * 4
    assert work.bytes_moved == mm + gather
    assert work.gather_bytes == gather
    assert work.flops == 2 * 1000 * 16 * 8


def test_views_move_nothing_and_an_in_place_scatter_touches_only_what_lands():
    table = torch.zeros(10_000, 4)
    source = torch.ones(50, 4)
    index = torch.arange(50)
    assert count_work(lambda: table.t().unsqueeze(0).expand(3, -1, -1)).bytes_moved == 0
    work = count_work(lambda: table.index_add_(0, index, source))
    # source and index read; 50 target rows read and written, not 10k.
    assert work.bytes_moved == 50 * 4 * 4 + 50 * 8 + 2 * 50 * 4 * 4
    assert work.gather_bytes == work.bytes_moved


def test_a_sparse_product_counts_its_nonzeros_flops_not_a_dense_products():
    adjacency = torch.eye(500).to_sparse_csr()
    dense = torch.randn(500, 32)
    work = count_work(lambda: adjacency @ dense)
    assert work.flops == 2 * 500 * 32


def _small_ladder(monkeypatch):
    monkeypatch.setattr(roofline, "CPU_LADDER", (MIB, 4 * MIB))
    monkeypatch.setattr(roofline, "CPU_GEMM_SIZE", 128)


def test_roofs_are_positive_measured_once_and_cached(monkeypatch, tmp_path):
    _small_ladder(monkeypatch)
    monkeypatch.setenv("GNNPERF_CACHE", str(tmp_path))  # not the run's cache: a fresh one
    measured = []
    real = roofline.measure_roofs

    def counting(device, *args, **kwargs):
        measured.append(device)
        return real(device, *args, **kwargs)
    monkeypatch.setattr(roofline, "measure_roofs", counting)
    cpu = torch.device("cpu")
    first = cached_roofs(cpu)
    assert first.peak_flops_per_s > 0
    assert set(first.stream_bytes_per_s) == set(first.gather_bytes_per_s) == {MIB, 4 * MIB}
    assert all(v > 0 for v in [*first.stream_bytes_per_s.values(),
                               *first.gather_bytes_per_s.values()])
    assert cached_roofs(cpu) == first and len(measured) == 1
    # A corrupt cache file is measured again, as is --refresh.
    path = roofline._cache_file(cpu)
    path.write_text("{not json")
    cached_roofs(cpu)
    cached_roofs(cpu, refresh=True)
    assert len(measured) == 3
    assert Roofs.from_dict(json.loads(path.read_text())).threads == torch.get_num_threads()


ROOFS = Roofs("cpu", "test", 1, "x", peak_flops_per_s=100e9,
              stream_bytes_per_s={MIB: 40e9, 16 * MIB: 20e9, 256 * MIB: 10e9},
              gather_bytes_per_s={MIB: 20e9, 16 * MIB: 10e9, 256 * MIB: 5e9}, measured_s=1.0)


@pytest.mark.parametrize("working_set, stream", [
    (MIB // 2, 40e9), (MIB, 40e9), (4 * MIB, 2 ** 0.5 * 20e9), (16 * MIB, 20e9),
    (64 * MIB, 2 ** 0.5 * 10e9), (2 ** 40, 10e9)])
def test_a_working_set_gets_the_roof_between_the_ladder_sizes_around_it(working_set, stream):
    # Log-linear between two ladder sizes (4 MiB lies halfway between 1 and
    # 16 in log size: the geometric mean of their roofs), the ends beyond.
    assert ROOFS.bandwidth("stream", working_set) == pytest.approx(stream)


def test_a_larger_working_set_never_gets_a_faster_roof():
    # A noisy run can time small copies slower than larger ones (the figures
    # below are one such run's on this machine).
    bumpy = Roofs("cpu", "test", 1, "x", 1e9, {MIB: 13e9, 4 * MIB: 37e9, 64 * MIB: 9e9},
                  {MIB: 1e9}, 1.0)
    figures = [bumpy.bandwidth("stream", size) for size in (MIB // 2, MIB, 2 * MIB, 4 * MIB,
                                                             16 * MIB, 64 * MIB, 2 ** 30)]
    assert figures == sorted(figures, reverse=True) and figures[0] == 37e9


def test_a_step_at_its_roofs_scores_100_percent_and_half_as_fast_50():
    # 1.2 GB of compulsory traffic at the DRAM copy roof: 0.12 s; the
    # operators move 1.6 GB (0.4 GB of it gathered), 1.33x the compulsory.
    memory = StepWork(flops=10 ** 9, bytes_moved=16 * 10 ** 8, gather_bytes=4 * 10 ** 8,
                      working_set_bytes=2 ** 30, steps=1, compulsory_bytes=12 * 10 ** 8)
    at_roof = assess(memory, 0.12, ROOFS)
    assert at_roof["roofline_pct"] == pytest.approx(100)
    assert at_roof["bound"] == "memory"
    assert at_roof["intensity_flop_per_byte"] == pytest.approx(10 ** 9 / (12 * 10 ** 8))
    assert at_roof["traffic_over_compulsory"] == pytest.approx(16 / 12)
    assert assess(memory, 0.24, ROOFS)["roofline_pct"] == pytest.approx(50)
    compute = StepWork(flops=10 ** 11, bytes_moved=10 ** 6, gather_bytes=0,
                       working_set_bytes=MIB, steps=1, compulsory_bytes=10 ** 6)
    assert assess(compute, 2.0, ROOFS)["bound"] == "compute"
    assert assess(compute, 2.0, ROOFS)["roofline_pct"] == pytest.approx(50)


def test_a_fused_step_at_the_limit_is_within_its_bound():
    # Three elementwise ops over 4 MiB: the operators move 24 MiB one by
    # one; a fused kernel (Inductor's) reads x and writes the result once,
    # 8 MiB. At the copy roof that kernel is as fast as this machine allows:
    # its roofline % must not pass 100 (the operators' traffic as the bound
    # read 300%).
    x = torch.randn(2 ** 20)
    work = StepWork.of(count_work(lambda: ((x * 2) + 1).relu()), 1)
    fused_bytes = 2 * x.numel() * 4
    fused_s = fused_bytes / ROOFS.bandwidth("stream", fused_bytes)
    assert work.bytes_moved == 3 * fused_bytes
    assert assess(work, fused_s, ROOFS)["roofline_pct"] <= 100


def test_work_counted_before_the_compulsory_traffic_gets_no_bound():
    old = StepWork(flops=10 ** 9, bytes_moved=10 ** 6, gather_bytes=0, working_set_bytes=MIB,
                   steps=1)
    with pytest.raises(GnnperfError, match="no compulsory traffic was counted"):
        assess(old, 1.0, ROOFS)


def test_compulsory_traffic_is_the_memory_that_was_there_before_each_once():
    # A gather of 100 rows from a 4 MB table, then two passes over the
    # gathered rows. The operators move the intermediates four times; a
    # fused kernel need not write them at all. What it cannot avoid: the
    # gathered rows of the table and the index, once.
    table, index = torch.randn(8192, 128), torch.randint(8192, (100,))

    def step():  # every intermediate kept alive: no address is reused
        rows = torch.index_select(table, 0, index)
        doubled = rows * 2
        return rows, doubled, doubled.relu()
    ops = count_work(step)
    rows = 100 * 128 * 4
    assert ops.compulsory_bytes == rows + 100 * 8
    assert ops.bytes_moved == (rows + 100 * 8 + rows) + 2 * rows + 2 * rows
    # An in-place update of memory that was there: read and written, once.
    weight = torch.randn(1000)
    ops = count_work(lambda: weight.mul_(0.5))
    assert ops.compulsory_bytes == 4000 and ops.bytes_moved == 8000


def test_an_address_reused_by_a_new_allocation_keeps_the_old_memory_counted():
    # The batch of the previous step is freed and the next allocation takes
    # its address: the old memory's bytes stay counted, the new one's are
    # the step's own.
    ops = OpCounter()
    key = ("cpu", 4096)
    ops._compulsory[key] = 4000  # read before it was freed
    ops._allocated(key)  # a new tensor of the step at the same address
    assert ops.compulsory_bytes == 4000 and key in ops._fresh
    # Through the dispatcher: a read of old memory, then the step's own.
    old = torch.ones(1000)
    with eager_counting(OpCounter()) as counted:
        old.sum()
        del old
        new = torch.zeros(1000)  # often at the old address
        new.add_(1)
    assert counted.compulsory_bytes == 4000


def test_an_out_tensor_the_op_resizes_is_the_ops_own_memory():
    source = torch.randn(1000)
    with eager_counting(OpCounter()) as counted:
        out = torch.empty(0)
        torch.mul(source, 2, out=out)
    assert counted.compulsory_bytes == 4000  # the source; out is written, not there before


def test_work_is_counted_in_one_untimed_warm_up_epoch_only(cora, monkeypatch, cora_dataset):
    from gnnperf.measure import runner as measure, workcount
    from gnnperf.variants import TrainConfig
    counting = [False]
    epochs = []  # per epoch: whether the op counter was on
    real_enter, real_exit = workcount.OpCounter.__enter__, workcount.OpCounter.__exit__

    def enter(self):
        counting[0] = True
        return real_enter(self)

    def exit(self, *exc):
        counting[0] = False
        return real_exit(self, *exc)
    real_epoch = measure._run_epoch

    def run_epoch(*args, **kwargs):
        epochs.append(counting[0])
        return real_epoch(*args, **kwargs)
    monkeypatch.setattr(workcount.OpCounter, "__enter__", enter)
    monkeypatch.setattr(workcount.OpCounter, "__exit__", exit)
    monkeypatch.setattr(measure, "_run_epoch", run_epoch)
    result = measure.measure_variant(get_variant("sampled"), cora_dataset, TrainConfig(epochs=6),
                                     "cpu", 3)
    assert epochs == [False, True, False, False, False, False]  # 3 warm-up, 3 timed
    work = result.work
    assert work["steps"] == result.steps_per_epoch and work["bytes_moved"] > work["gather_bytes"] > 0
    assert work["working_set_bytes"] >= cora.x.numel() * 4  # the feature table is touched
    measure.with_roofline(result, ROOFS)
    assert result.roofline["roofline_pct"] > 0 and not result.roofline_note


def test_with_two_warm_up_epochs_the_roofline_is_na_and_says_why(cora_dataset):
    from gnnperf import report
    from gnnperf.measure.runner import measure_variant, with_roofline
    from gnnperf.variants import TrainConfig
    result = with_roofline(measure_variant(get_variant("baseline"), cora_dataset,
                                           TrainConfig(epochs=4), "cpu", 2),
                           ROOFS)
    assert result.work is None and result.roofline is None
    assert "use --warmup 3" in result.roofline_note
    assert "use --warmup 3" in report.format_table([result])


def test_a_broadcast_index_counts_its_distinct_bytes_only():
    # PyG's scatter: index.view(-1, 1).expand_as(src): 50 int64s, not 50 x 16.
    source, index = torch.randn(50, 16), torch.randint(10, (50,))
    target = torch.zeros(10, 16)
    work = count_work(lambda: target.scatter_add_(0, index.view(-1, 1).expand_as(source),
                                                  source))
    assert work.bytes_moved == 50 * 16 * 4 + 50 * 8 + 2 * 10 * 16 * 4


def test_fused_adam_writes_its_parameters_and_states_though_it_returns_nothing():
    # Canary of OpOverload._schema (private), which says what an op writes.
    weight = torch.randn(100, 16, requires_grad=True)
    optimiser = torch.optim.Adam([weight], fused=True)
    weight.grad = torch.randn(100, 16)
    optimiser.step()  # the states exist
    work = count_work(optimiser.step)
    assert "aten._fused_adam_" in work.counts
    tensor = 100 * 16 * 4
    # param, grad, exp_avg, exp_avg_sq read and written (the schema marks
    # all four mutable), plus the step counters.
    assert 8 * tensor <= work.bytes_moved < 8 * tensor + 100


def test_a_dense_times_sparse_product_counts_nonzeros_times_rows():
    dense, sparse = torch.randn(30, 20), torch.eye(20).to_sparse_csr()
    work = count_work(lambda: dense @ sparse)
    assert work.flops == 2 * 20 * 30
    assert work.gather_bytes == work.bytes_moved > 0  # a sparse product is indexed


def test_counting_the_work_leaves_compiled_code_compiled_in_the_timed_epochs(cora_dataset,
                                                                             monkeypatch):
    # Counted under a dispatch mode without a forced-eager stance, Dynamo
    # skips the compiled frame for good: the timed epochs would run eager,
    # as slow as baseline.
    from torch.profiler import ProfilerActivity, profile

    from gnnperf.measure import runner as measure
    from gnnperf.variants import TrainConfig
    regions = []
    real_epoch = measure._run_epoch

    def run_epoch(run, counter, measure_peak=None, timeline=None, after_step=None):
        if len(counter.losses) < 4:  # the warm-up epochs and the first timed one
            return real_epoch(run, counter, measure_peak, timeline, after_step)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            real_epoch(run, counter, measure_peak, timeline, after_step)
        regions.append(sum("Compiled" in event.name for event in prof.events()))
    monkeypatch.setattr(measure, "_run_epoch", run_epoch)
    # The run's usual fresh compile cache would compile it cold (seconds)
    # where the shared one may hold the trained fixture's graph; caching is
    # not what this test is about.
    import contextlib

    from gnnperf import torch_private
    monkeypatch.setattr(torch_private, "fresh_compile_cache",
                        lambda: contextlib.nullcontext("shared (this test)"))
    measure.measure_variant(get_variant("compiled"), cora_dataset, TrainConfig(epochs=5), "cpu", 3)
    assert regions and regions[0] > 0, "the last timed epoch ran no compiled region"


# Only the device's work against the device's roofs --------------------
def test_a_device_step_is_held_to_its_own_work_host_work_and_copies_apart():
    # "meta" stands for the GPU: an offload step samples and gathers on the
    # host, copies the batch over, and multiplies on the device. Only the
    # product counts against the device's roofs; the host's gather and the
    # copy are reported apart, never added in.
    table, index = torch.randn(1000, 16), torch.randint(1000, (100,))
    weight = torch.randn(16, 8, device="meta")
    device = torch.device("meta")

    def offload_step():
        rows = torch.index_select(table, 0, index)  # host: the batch's gather
        return rows.to(device) @ weight  # the copy, then the device's product
    ops = count_work(offload_step)
    work = StepWork.of(ops, 1, device)
    assert work.flops == 2 * 100 * 16 * 8 and work.gather_bytes == 0
    assert work.bytes_moved == (100 * 16 + 16 * 8 + 100 * 8) * 4  # the product's operands
    # The device's storages only (meta storages share an address: not summed here).
    assert 0 < work.working_set_bytes == ops.working_set_on("meta") < ops.working_set_bytes
    assert work.host_bytes_moved == 100 * 16 * 4 + 100 * 8 + 100 * 16 * 4  # gather: rows, index
    assert work.host_flops == 0
    assert work.transfer_bytes == 2 * 100 * 16 * 4  # read on the host, written on the device
    # A CPU step is all host work: counted whole, nothing apart (n/a, not 0).
    cpu = StepWork.of(count_work(lambda: torch.index_select(table, 0, index) @ weight.new_ones(
        16, 8, device="cpu")), 1, torch.device("cpu"))
    assert cpu.host_bytes_moved is None and cpu.transfer_bytes is None and cpu.flops > 0
    # The per-step scaling of a run's roofline keeps the figures apart.
    from gnnperf.measure.runner import with_roofline
    doubled = StepWork(*(2 * v for v in (work.flops, work.bytes_moved, work.gather_bytes)),
                       work.working_set_bytes, 2, host_flops=0,
                       host_bytes_moved=2 * work.host_bytes_moved,
                       transfer_bytes=2 * work.transfer_bytes,
                       compulsory_bytes=2 * work.compulsory_bytes)
    result = types.SimpleNamespace(work=doubled.to_dict(), steps_per_epoch=2, roofline=None,
                                   epoch_time=types.SimpleNamespace(median=2e-3))
    with_roofline(result, ROOFS)
    assert result.roofline["achieved_bytes_per_s"] == pytest.approx(work.bytes_moved / 1e-3)
    assert result.roofline["excluded"]["transfer_bytes"] == work.transfer_bytes


def _fake_ladder(monkeypatch, launch_s: float, seconds_of: dict[int, float]) -> None:
    """measure_roofs' probes replaced: an empty kernel takes :obj:`launch_s`
    per call, a ladder point :obj:`seconds_of[size]`."""
    monkeypatch.setattr(roofline, "_gemm_flops_per_s", lambda *args: 1e12)
    monkeypatch.setattr(roofline, "_launch_seconds", lambda kind, device, repeats: launch_s)

    def probe(working_set, device, generator, repeats):
        return working_set / seconds_of[working_set], seconds_of[working_set]
    monkeypatch.setattr(roofline, "_copy_bytes_per_s", probe)
    monkeypatch.setattr(roofline, "_gather_bytes_per_s", probe)


def test_launch_bound_ladder_points_are_dropped_before_the_roofs_are_made_non_increasing(
        monkeypatch):
    # A GPU copies 4 MiB in about a kernel launch: such a point times the
    # launch, not the memory (4 MiB / 5 us reads as 0.8 TB/s where L2
    # streams several), and must hold no working set to it. Faked: a 5 us
    # launch, the 4 and 16 MiB points at it, 64 MiB onwards real.
    us = 1e-6
    seconds = {4 * MIB: 5 * us, 16 * MIB: 6 * us, 64 * MIB: 20 * us, 256 * MIB: 90 * us,
               1024 * MIB: 360 * us}
    _fake_ladder(monkeypatch, 5 * us, seconds)
    roofs = roofline.measure_roofs(torch.device("cpu"), ladder=tuple(seconds))
    assert roofs.launch_s == {"stream": 5 * us, "gather": 5 * us}
    assert roofs.launch_bound == {"stream": [4 * MIB, 16 * MIB], "gather": [4 * MIB, 16 * MIB]}
    at_64 = 64 * MIB / (20 * us)
    # Working sets below the first real point take its roof, not a launch's.
    for working_set in (MIB, 4 * MIB, 16 * MIB, 64 * MIB):
        assert roofs.bandwidth("stream", working_set) == pytest.approx(at_64)
    assert roofs.bandwidth("gather", 4 * MIB) == pytest.approx(at_64)
    assert "launch-bound" in roofline.format_roofs(roofs)
    # Round trip through the cache's JSON; a file from before the rule reads as none dropped.
    again = Roofs.from_dict(json.loads(json.dumps(roofs.to_dict())))
    assert again == roofs
    old = {k: v for k, v in roofs.to_dict().items() if k not in ("launch_s", "launch_bound")}
    assert Roofs.from_dict(json.loads(json.dumps(old))).launch_bound == {}


def test_a_ladder_of_launch_bound_points_alone_keeps_its_largest():
    # Nothing else to go on (a tiny ladder on a fast device): the largest
    # point stands, the rest dropped.
    roofs = Roofs("cuda", "test", 1, "x", 1e12, {MIB: 1e9, 4 * MIB: 2e9}, {MIB: 1e9},
                  1.0, launch_s={"stream": 1e-3, "gather": 1e-3},
                  launch_bound={"stream": [MIB, 4 * MIB], "gather": [MIB]})
    assert roofs.bandwidth("stream", MIB) == 2e9
    assert roofs.bandwidth("gather", 64 * MIB) == 1e9


def test_each_step_of_a_loop_reads_what_it_needs_again():
    # Two steps that each read a 4000-byte weight: 8000 bytes of compulsory
    # traffic, not 4000 (the loop as one step would count the weight once).
    weight = torch.randn(1000)
    with eager_counting(OpCounter()) as ops:
        for _ in range(2):
            weight.sum()
            ops.end_step()
    assert ops.compulsory_bytes == 8000
    assert StepWork.of(ops, 2).per_step().compulsory_bytes == 4000
