"""Data-parallel training (ddp) with torch.distributed on CPU: gloo, loopback
only, 2 ranks x 1 thread (these machines have 2 cores)."""
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import torch
from conftest import processes_with

from gnnperf import distributed, warm
from gnnperf.distributed import Shard, ShardedBatches
from gnnperf.errors import GnnperfError
from gnnperf.variants import TrainConfig, get_variant

ROOT = Path(__file__).resolve().parents[1]
# Tests that start two ranks run one at a time on one xdist worker (the
# machines have two cores), beside the other worker's tests.
TWO_RANKS = pytest.mark.xdist_group("two-ranks")


def _train_params(variant: str, steps: int) -> dict:
    """A launched rank: ``steps`` full-batch steps on Cora, dropout 0; rank
    0 returns the parameters."""
    from gnnperf.data import load_dataset
    torch.set_num_threads(1)
    shard = distributed.init_from_env("gloo")
    try:
        run = get_variant(variant).build(load_dataset("cora").graph, TrainConfig(dropout=0.0),
                                         torch.device("cpu"))
        for _ in range(steps):
            for batch in run.batches():
                run.step(batch)
        return {k: v.clone() for k, v in run.model.state_dict().items()} if shard.rank == 0 \
            else {"train_nodes": run.train_nodes.tolist()}
    finally:
        torch.distributed.destroy_process_group()


@TWO_RANKS
def test_two_ranks_equal_one_process_on_all_train_nodes(cora):
    # Cora's 140 training nodes: 70 a rank; DDP averages the two mean-loss
    # gradients, which is the gradient of the mean over all 140.
    ranks = distributed.launch(2, _train_params, "ddp", 20)
    single = get_variant("baseline").build(cora, TrainConfig(dropout=0.0), torch.device("cpu"))
    for _ in range(20):
        for batch in single.batches():
            single.step(batch)
    reference = single.model.state_dict()
    assert set(ranks[0]) == set(reference)
    for name, value in reference.items():
        torch.testing.assert_close(ranks[0][name], value, rtol=1e-5, atol=1e-5)
    # The shares were disjoint halves.
    rank1 = set(ranks[1]["train_nodes"])
    assert len(rank1) == 70 and rank1 < set(cora.train_mask.nonzero().view(-1).tolist())


def test_a_cuda_rank_takes_its_own_gpu_before_joining_the_group(monkeypatch):
    # NCCL binds a rank's communicator and its object collectives to the
    # current device: set after init_process_group (or never), every rank
    # would use cuda:0. The set-up's calls, in order, with a recording group.
    calls, joined = [], []
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: calls.append(("set_device",
                                                                            str(device))))
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: bool(joined))

    def init_process_group(backend, **kwargs):
        calls.append(("init_process_group", backend))
        joined.append(backend)
    monkeypatch.setattr(torch.distributed, "init_process_group", init_process_group)
    monkeypatch.setattr(torch.distributed, "get_rank", lambda: 1)
    monkeypatch.setattr(torch.distributed, "get_world_size", lambda: 2)
    monkeypatch.setattr(torch.distributed, "get_backend", lambda: joined[0])
    monkeypatch.setenv("LOCAL_RANK", "1")
    device = distributed.rank_device(torch.device("cuda"))
    shard = distributed.init_from_env(distributed.resolve_backend("auto", device), device)
    assert calls == [("set_device", "cuda:1"), ("init_process_group", "nccl")]
    assert shard == Shard(1, 2, "nccl")


def test_the_timed_hook_hands_ddp_the_whole_averaged_bucket():
    # DDP copies what the hook's future holds back into the gradients: the
    # bucket's tensor (allreduce_hook's own future already holds it, so a
    # [0] on it gave DDP the first element alone). A real gloo group of one.
    import types
    distributed.current_shard()
    buffer = torch.arange(6.0)
    bucket = types.SimpleNamespace(is_last=lambda: True, buffer=lambda: buffer)
    timer = distributed.AllReduceTimer(torch.device("cpu"))
    reduced = timer.hook(None, bucket).wait()
    assert reduced.shape == (6,) and torch.equal(reduced, torch.arange(6.0))
    assert timer.steps == 1 and timer.seconds > 0


def test_on_cuda_the_allreduce_is_timed_by_events_read_after_the_run(monkeypatch):
    # NCCL's future completes once the all-reduce is queued, so the host
    # clock reads ~0; the GPU's own clock (events, faked here: the work
    # takes 4 ms of it) is read after the run, never inside a step.
    import types

    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    gpu_ms, reads = [0.0], []

    class FakeEvent:
        def record(self):
            self.ms = gpu_ms[0]

        def elapsed_time(self, end):
            reads.append(self)
            return end.ms - self.ms

        def synchronize(self):
            pass

    def queued_allreduce(group, bucket):
        gpu_ms[0] += 4.0  # the GPU runs the all-reduce; the host sees it done at once
        future = torch.futures.Future()
        future.set_result(bucket.buffer())  # as allreduce_hook's: the bucket's tensor
        return future
    monkeypatch.setattr(default_hooks, "allreduce_hook", queued_allreduce)
    timer = distributed.AllReduceTimer(torch.device("cuda"), event_factory=FakeEvent)
    for last in (False, True) * 3:  # three steps of two buckets
        bucket = types.SimpleNamespace(is_last=lambda last=last: last,
                                       buffer=lambda: torch.ones(3))
        timer.hook(None, bucket).wait()
    assert reads == [] and timer.steps == 3
    assert timer.seconds == pytest.approx(6 * 4e-3) and len(reads) == 6
    cpu = distributed.AllReduceTimer(torch.device("cpu"), event_factory=FakeEvent)
    cpu.hook(None, bucket).wait()  # gloo: the future completes with the work
    assert len(reads) == 6 and 0 <= cpu.seconds < 1


@pytest.mark.parametrize("num_seeds, batch_size, world", [(140, 32, 2), (1001, 128, 3), (5, 8, 2)])
def test_sharded_batches_cover_every_seed_once_with_equal_steps(num_seeds, batch_size, world):
    samplers = [ShardedBatches(num_seeds, batch_size, Shard(rank, world, "gloo"), seed=7)
                for rank in range(world)]
    for _ in range(2):  # two epochs: a new permutation each, the same on every rank
        epoch = [list(sampler) for sampler in samplers]
        assert len({len(batches) for batches in epoch}) == 1  # the same number of steps
        assert all(len(batches) == len(samplers[0]) for batches in epoch)
        seeds = [seed for batches in epoch for batch in batches for seed in batch]
        assert sorted(seeds) == list(range(num_seeds))  # every seed exactly once
        assert all(len(batch) <= batch_size for batches in epoch for batch in batches)
    assert epoch != [list(s) for s in [ShardedBatches(num_seeds, batch_size,
                                                      Shard(r, world, "gloo"), seed=7)
                                       for r in range(world)]]  # epochs differ


def _gnnperf(args, env=None, **kwargs):
    return subprocess.run([sys.executable, "-m", "gnnperf", "run", *args], cwd=ROOT,
                          capture_output=True, text=True, env={**os.environ, **(env or {})},
                          **kwargs)


def _fail_late_or_echo() -> None:
    """A launched rank: rank 1 fails for real but stays alive (a non-daemon
    thread) past rank 0, which exits first with the echo of a lost peer, the
    race CI met once."""
    import threading
    if os.environ["RANK"] == "1":
        threading.Thread(target=time.sleep, args=(30,)).start()
        raise RuntimeError("the real fault")
    time.sleep(1.0)
    raise RuntimeError("[pair.cc:553] Connection closed by peer [127.0.0.1]:3970")


def _rank_environment() -> dict:
    import multiprocessing
    # How the rank started (torch is imported in any rank: unpickling this
    # function imports it): ForkServerProcess, not SpawnProcess.
    return {"marker": os.environ.get("GNNPERF_TEST_MARKER"), "rank": os.environ["RANK"],
            "world": os.environ["WORLD_SIZE"],
            "started_as": type(multiprocessing.current_process()).__name__}


@TWO_RANKS
@pytest.mark.skipif(os.environ.get(warm.COLD_ENV) == "1", reason="ranks are spawned cold")
def test_forked_ranks_see_the_launchers_environment_and_their_own_rank(monkeypatch):
    # Ranks fork from the warm interpreter (gnnperf.warm), started by an
    # earlier launch with other variables: each must still see the launcher's
    # environment of now, with the launcher's rank variables on top.
    monkeypatch.setenv("GNNPERF_TEST_MARKER", "before")
    distributed.launch(1, _rank_environment)
    monkeypatch.setenv("GNNPERF_TEST_MARKER", "now")
    ranks = distributed.launch(2, _rank_environment)
    assert [ranks[r]["rank"] for r in (0, 1)] == ["0", "1"]
    assert all(r["world"] == "2" and r["marker"] == "now"
               and r["started_as"] == "ForkServerProcess"
               for r in ranks.values())
    assert warm.rank_context()[0] == "forkserver"


@TWO_RANKS
def test_the_rank_that_failed_first_is_named_though_its_echo_exits_sooner():
    start = time.monotonic()
    with pytest.raises(GnnperfError) as info:
        distributed.launch(2, _fail_late_or_echo)
    assert str(info.value) == ("rank 1 of 2 failed: RuntimeError: the real fault; "
                               "the other ranks were stopped")
    assert time.monotonic() - start < 25  # rank 1 stopped, not waited for


@TWO_RANKS
@pytest.mark.e2e  # `gnnperf run --world-size 2` or torchrun, as a user launches them
def test_a_failing_rank_ends_the_run_quickly_with_one_line(tmp_path):
    marker = f"GNNPERF_TEST_MARKER={uuid.uuid4().hex}"
    out = tmp_path / "out.json"
    start = time.monotonic()
    proc = _gnnperf(["--variants", "baseline,ddp", "--world-size", "2", "--epochs", "10",
                     "--warmup", "2", "--no-progress", "--json", str(out)],
                    env={"GNNPERF_DDP_FAULT": "1:5", marker.split("=")[0]: marker.split("=")[1]},
                    timeout=120)
    elapsed = time.monotonic() - start
    assert elapsed < 60, elapsed
    assert proc.returncode == 1, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert errors == ["error: rank 1 of 2 failed: RuntimeError: injected fault in step 5 "
                      "(GNNPERF_DDP_FAULT); the other ranks were stopped"]
    assert "Traceback" not in proc.stderr
    doc = json.loads(out.read_text())
    assert [r["variant"] for r in doc["results"]] == ["baseline"]  # kept
    assert "ddp" in doc["failures"]
    time.sleep(0.5)
    assert processes_with(marker) == []  # no orphan rank left


def _two_ranks(tmp_path, variant: str, epochs: int):
    """``gnnperf run`` of :obj:`variant` on 2 local ranks (synthetic-cora):
    the process and its one result."""
    out = tmp_path / "ddp.json"
    proc = _gnnperf(["--dataset", "synthetic-cora", "--variants", variant,
                     "--world-size", "2", "--epochs", str(epochs), "--warmup", "2",
                     "--no-progress", "--json", str(out)], timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, json.loads(out.read_text())["results"][0]


# The one-rank path (`gnnperf run --world-size 1`, a launched group of one:
# NCCL on one GPU, gloo on CPU) runs for real in tests/test_gpu_check.py (its
# ddp step).


@TWO_RANKS
@pytest.mark.e2e  # `gnnperf run --world-size 2` or torchrun, as a user launches them
def test_saint_ddp_ranks_take_equal_steps_with_their_own_presampling(tmp_path):
    # Each rank pre-samples on its own (seed + rank) until 99.9% of the edges
    # were drawn, so their pre-sample counts may differ; their steps must not
    # (each step all-reduces: unequal counts would hang the run, not finish it).
    proc, result = _two_ranks(tmp_path, "saint+ddp", 4)
    assert result["variant"] == "saint+ddp" and result["extra"]["world_size"] == 2
    assert result["extra"]["saint_unseen_edges"] <= 0.001
    assert all(loss == loss and loss < 10 for loss in result["losses"])
    # What two ranks report: the slowest rank's epoch, the strong-scaling
    # efficiency against the same variant on one rank, the all-reduce.
    extra = result["extra"]
    assert len(extra["per_rank_epoch_ms"]) == 2
    assert result["epoch_time"]["median"] * 1e3 == pytest.approx(max(extra["per_rank_epoch_ms"]))
    assert 0 < extra["scaling_efficiency"] < 2 and extra["one_rank_epoch_ms"] > 0
    assert extra["allreduce_ms_per_step"] > 0 and 0 < extra["allreduce_share"] < 1
    assert "scaling eff. (strong)" in proc.stdout


@TWO_RANKS
@pytest.mark.e2e  # `gnnperf run --world-size 2` or torchrun, as a user launches them
def test_torchrun_two_nodes_on_loopback_train_together(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    out = tmp_path / "multinode.json"
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2",
               "--nproc-per-node", "1", "--rdzv-backend", "c10d",
               "--rdzv-endpoint", f"127.0.0.1:{port}", "--max-restarts", "0"]
    args = ["-m", "gnnperf", "run", "--dataset", "synthetic-cora", "--variants", "ddp",
            "--epochs", "5", "--warmup", "2", "--no-progress", "--json", str(out)]
    # Both nodes sit on one host, so both would try to host the rendezvous
    # store; node 0 hosts it (is_host) and node 1 joins it. A node left alone
    # gives up after 60 s instead of c10d's default 600 s, so that a node left
    # alone fails with its reason printed before the test's own timeout.
    nodes = [subprocess.Popen([*command, "--node-rank", str(rank), "--rdzv-conf",
                               f"is_host={int(rank == 0)},join_timeout=60", *args],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
             for rank in (0, 1)]
    outputs = []
    for node in nodes:  # a hung node is killed and what it printed still shown
        try:
            outputs.append(node.communicate(timeout=180))
        except subprocess.TimeoutExpired:
            node.kill()
            outputs.append(node.communicate())
    assert [node.returncode for node in nodes] == [0, 0], [o[1][-2000:] for o in outputs]
    doc = json.loads(out.read_text())
    assert doc["config"]["launch"] == "torchrun" and doc["config"]["world_size"] == 2
    result = doc["results"][0]
    assert result["variant"] == "ddp" and result["extra"]["world_size"] == 2
    assert len(result["extra"]["per_rank_epoch_ms"]) == 2
    # Exactly one process printed the table.
    assert sum("scaling eff." in stdout for stdout, _ in outputs) == 1


def test_a_port_in_use_is_one_line(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = _gnnperf(["--dataset", "synthetic-cora", "--variants", "ddp", "--epochs", "4",
                         "--warmup", "2", "--no-progress"],
                        env={"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0",
                             "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                             "GNNPERF_DIST_TIMEOUT": "5"}, timeout=120)
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("gnnperf: error: rank 0 cannot join the process group at "
                           f"127.0.0.1:{port}")


def test_ddp_combinations_and_bad_launches(cora):
    assert get_variant("sampled+ddp+compiled").name == "sampled+ddp+compiled"
    assert get_variant("ddp").data_parallel and not get_variant("sampled").data_parallel
    assert "ddp" not in __import__("gnnperf").standard_variants()
    with pytest.raises(GnnperfError, match="--world-size must be >= 1"):
        distributed.launch(0, _train_params, "ddp", 1)


def test_a_failed_group_launch_measures_each_ddp_variant_alone(tmp_path, monkeypatch,
                                                               trained, capsys):
    # The run's ddp variants share one launch; when it fails, each gets its
    # own, so only the variant that fails alone is a failure.
    import dataclasses

    from gnnperf.cli import main
    alone = []

    def group(variants, *args, **kwargs):
        raise GnnperfError("rank 1 of 2 failed: RuntimeError: injected")

    def single(variant, *args, **kwargs):
        alone.append(variant.name)
        if variant.name == "sampled+ddp":
            raise GnnperfError("rank 0 of 2 failed: RuntimeError: injected")
        return dataclasses.replace(trained("baseline"), variant=variant.name)
    monkeypatch.setattr(distributed, "measure_data_parallel_many", group)
    monkeypatch.setattr(distributed, "measure_data_parallel", single)
    out = tmp_path / "run.json"
    assert main(["run", "--variants", "ddp,sampled+ddp,ddp", "--world-size", "2",
                 "--no-progress", "--json", str(out)]) == 1
    doc = json.loads(out.read_text())
    assert alone == ["ddp", "sampled+ddp"]  # the repeated ddp is measured once
    assert [r["variant"] for r in doc["results"]] == ["ddp", "ddp"]
    assert list(doc["failures"]) == ["sampled+ddp"]
    assert "rank 0 of 2 failed" in capsys.readouterr().err


def test_one_rank_on_cuda_takes_its_gpu_and_joins_nccl_before_it_measures(monkeypatch):
    # What a launched rank of `--world-size 1` does on a one-GPU machine,
    # CUDA faked: cuda:0 made current, then an NCCL group of one (auto picks
    # NCCL on CUDA), then the measuring, then the group destroyed.
    import gnnperf.measure.runner
    calls, joined = [], []
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setattr(gnnperf.measure.runner, "resolve_device",
                        lambda name: torch.device("cuda"))
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: calls.append(
        ("set_device", str(device))))
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: bool(joined))

    def init_process_group(backend, **kwargs):
        calls.append(("init_process_group", backend))
        joined.append(backend)
    monkeypatch.setattr(torch.distributed, "init_process_group", init_process_group)
    monkeypatch.setattr(torch.distributed, "destroy_process_group",
                        lambda: calls.append(("destroy_process_group",)))
    monkeypatch.setattr(torch.distributed, "get_rank", lambda: 0)
    monkeypatch.setattr(torch.distributed, "get_world_size", lambda: 1)
    monkeypatch.setattr(torch.distributed, "get_backend", lambda: joined[0])
    monkeypatch.setattr(gnnperf.measure.runner, "measure_variant", lambda variant, *args, **kwargs: (
        calls.append(("measure", variant.name, str(args[2]))) or variant.name))
    found = distributed._measure_rank((get_variant("ddp"), get_variant("sampled+ddp")), None,
                                      TrainConfig(), "cuda", 3, 1, "auto")
    assert list(found.values()) == ["ddp", "sampled+ddp"]
    assert calls == [("set_device", "cuda:0"), ("init_process_group", "nccl"),
                     ("measure", "ddp", "cuda:0"), ("measure", "sampled+ddp", "cuda:0"),
                     ("destroy_process_group",)]


def test_world_size_one_launches_a_rank_and_without_it_ddp_trains_in_process(monkeypatch,
                                                                             trained, capsys):
    # `--world-size 1` is a launched group of one (what a one-GPU machine
    # can check of DDP); without --world-size the ddp variants train in
    # this process, as before. A world size without a ddp variant is an error.
    import dataclasses

    import gnnperf.measure.runner
    from gnnperf.cli import main
    launched, in_process = [], []

    def each(variants, world_size, *args, **kwargs):
        launched.append((world_size, args[-1], [v.name for v in variants]))
        return {v: dataclasses.replace(trained("baseline"), variant=v.name) for v in variants}

    def measure(variant, *args, **kwargs):
        in_process.append(variant.name)
        return dataclasses.replace(trained("baseline"), variant=variant.name)
    monkeypatch.setattr(distributed, "measure_each_data_parallel", each)
    monkeypatch.setattr(gnnperf.measure.runner, "measure_variant", measure)
    run = ["run", "--variants", "ddp,sampled+ddp", "--no-progress", "--device", "cpu"]
    assert main([*run, "--world-size", "1"]) == 0
    assert launched == [(1, "auto", ["ddp", "sampled+ddp"])] and in_process == []
    assert main(run) == 0
    assert launched == [(1, "auto", ["ddp", "sampled+ddp"])]
    assert in_process == ["ddp", "sampled+ddp"]
    capsys.readouterr()
    assert main(["run", "--variants", "baseline", "--world-size", "1"]) == 2
    assert capsys.readouterr().err.strip() == (
        "gnnperf: error: --world-size 1 applies to ddp variants and none is given; add one "
        "(e.g. --variants baseline,ddp) or drop --world-size")


@TWO_RANKS
def test_the_rank_tests_group_holds_under_xdist(request):
    """The rank tests share a worker only where pytest-xdist's loadgroup
    honours ``xdist_group`` (it suffixes the node id with the group); with
    pytest 9.2 it silently does not (pyproject pins pytest below it)."""
    # xdist's worker sees its scheduler as the `loadgroup` option it sets.
    if not os.environ.get("PYTEST_XDIST_WORKER") or not getattr(request.config.option,
                                                                "loadgroup", False):
        pytest.skip("not under pytest-xdist's --dist loadgroup")
    assert request.node.nodeid.endswith("@two-ranks"), request.node.nodeid
