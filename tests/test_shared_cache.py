"""The caches gnnperf writes under ``$GNNPERF_CACHE`` on first use from
several processes at once (a gate's two arms, asv's processes, test workers,
data-parallel ranks), a corrupt entry, and the messages around them."""
import multiprocessing
import os
import shutil
import sys
import time
from pathlib import Path

import pytest
import torch

from gnnperf.data import load_dataset
from gnnperf.errors import GnnperfError

PROCESSES = 4
ROUNDS = 3


class NotAllowListed:
    """Not on torch's weights_only allow-list: torch's refusal to load it is
    styled terminal text."""


def _load_at_once(barrier, folder: Path, rank: int, work) -> None:
    """One process of a cold start: its stderr goes to a file, it waits for
    the others, runs :obj:`work`, and leaves ``ok`` or the error behind."""
    err = os.open(folder / f"stderr-{rank}", os.O_WRONLY | os.O_CREAT, 0o644)
    os.dup2(err, 2)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    barrier.wait(timeout=60)
    try:
        outcome = work()
    except BaseException as exc:  # noqa: BLE001 -- reported to the test
        outcome = f"{type(exc).__name__}: {exc}"
    (folder / f"outcome-{rank}").write_text(outcome)


def _at_once(tmp_path: Path, monkeypatch, work, rounds: int = ROUNDS) -> list[tuple[str, str]]:
    """Runs :obj:`work` in :data:`PROCESSES` forked processes released
    together, :obj:`rounds` times, each round on a new empty cache:
    (outcome, stderr) of every process."""
    context = multiprocessing.get_context("fork")  # torch is imported already: a cheap start
    results = []
    for round_ in range(rounds):
        folder = tmp_path / f"round-{round_}"
        folder.mkdir(exist_ok=True)
        monkeypatch.setenv("GNNPERF_CACHE", str(folder / "cache"))
        barrier = context.Barrier(PROCESSES)
        processes = [context.Process(target=_load_at_once, args=(barrier, folder, rank, work))
                     for rank in range(PROCESSES)]
        for process in processes:
            process.start()
        for process in processes:
            process.join(timeout=120)
            assert process.exitcode == 0, process.exitcode
        results += [((folder / f"outcome-{rank}").read_text(),
                     (folder / f"stderr-{rank}").read_text()) for rank in range(PROCESSES)]
    return results


def _load_cora() -> str:
    # The bundled copy (processed into the cache) and a pyg: class (processed
    # beside the raw files of a data root the processes share).
    bundled = load_dataset("cora")
    library = load_dataset("pyg:Planetoid/Cora", os.environ["GNNPERF_CACHE"] + ".data")
    ok = all(data.num_nodes == 2708 and data.num_edges == 10556 for data in (bundled, library))
    return "ok" if ok else "wrong graph"


def test_processes_on_one_cold_cache_all_load_cora(tmp_path, monkeypatch):
    from gnnperf.data import BUNDLED_PLANETOID
    for round_ in range(ROUNDS):
        shutil.copytree(BUNDLED_PLANETOID / "Cora",
                        tmp_path / f"round-{round_}" / "cache.data" / "Planetoid" / "Cora")
    results = _at_once(tmp_path, monkeypatch, _load_cora)
    assert [outcome for outcome, _ in results] == ["ok"] * len(results)
    # A cold cache holds no corrupt entry to rebuild.
    assert all("rebuil" not in err for _, err in results), results


def test_processes_on_one_cold_cache_measure_the_roofs_once(tmp_path, monkeypatch):
    from gnnperf.measure import roofline

    def measure(device):  # stands in for the seconds of measuring; counts the measurements
        with open(os.environ["GNNPERF_CACHE"] + ".measured", "a") as out:
            out.write("x")
        time.sleep(0.3)
        return roofline.Roofs(str(device), "test cpu", 1, torch.__version__, 1e9,
                              {1024: 1e9}, {1024: 5e8}, 0.3)

    def work() -> str:
        roofs = roofline.cached_roofs(torch.device("cpu"))
        return "ok" if roofs.peak_flops_per_s == 1e9 else "wrong roofs"

    monkeypatch.setattr(roofline, "measure_roofs", measure)
    results = _at_once(tmp_path, monkeypatch, work, rounds=1)
    assert [outcome for outcome, _ in results] == ["ok"] * PROCESSES
    # One measures, the others wait for it and read its roofs: measurements
    # running side by side would contend for the same cores.
    assert Path(os.environ["GNNPERF_CACHE"] + ".measured").read_text() == "x"


def test_truncated_processed_cora_is_rebuilt_saying_so(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("GNNPERF_CACHE", str(tmp_path / "cache"))
    first = load_dataset("cora")
    [processed] = (tmp_path / "cache").rglob("processed/data.pt")
    processed.write_bytes(processed.read_bytes()[:1000])
    capfd.readouterr()
    again = load_dataset("cora")
    assert again.identity()["sha256"] == first.identity()["sha256"]
    err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if "rebuil" in line]
    assert len(lines) == 1, err
    assert "raw files" not in err and "replace" not in err
    # Rebuilt once: the next load reads it again without a word.
    load_dataset("cora")
    assert "rebuil" not in capfd.readouterr().err


def test_processed_cache_is_keyed_by_the_libraries_that_wrote_it(tmp_path, monkeypatch):
    import torch_geometric
    monkeypatch.setenv("GNNPERF_CACHE", str(tmp_path / "cache"))
    load_dataset("cora")
    [processed] = (tmp_path / "cache").rglob("processed/data.pt")
    where = str(processed.relative_to(tmp_path / "cache"))
    major_minor = ".".join(torch.__version__.split(".")[:2])
    assert f"pyg{torch_geometric.__version__}" in where and f"torch{major_minor}" in where
    # Another torch-geometric writes (and reads) its own processed file.
    monkeypatch.setattr(torch_geometric, "__version__", "2.5.3")
    assert load_dataset("cora").num_nodes == 2708
    assert len(list((tmp_path / "cache").rglob("processed/data.pt"))) == 2


def test_corrupt_user_raw_file_is_still_blamed_in_one_plain_line(tmp_path, planetoid_root,
                                                                  monkeypatch):
    monkeypatch.setenv("GNNPERF_CACHE", str(tmp_path / "cache"))
    shutil.copytree(planetoid_root / "Cora", tmp_path / "Cora")
    (tmp_path / "Cora" / "raw" / "ind.cora.graph").write_bytes(b"\x80\x04\x95garbage")
    with pytest.raises(GnnperfError, match="cannot read cora raw files") as info:
        load_dataset("cora", tmp_path)
    assert "\n" not in str(info.value) and "\x1b" not in str(info.value)
    # Nothing half-made is left in the cache to trip the next load.
    assert load_dataset("cora").num_nodes == 2708


def test_quoted_exception_text_carries_no_terminal_codes(tmp_path):
    from torch_geometric.data import Data
    path = tmp_path / "graph.pt"
    torch.save(Data(x=torch.ones(3, 2), edge_index=torch.tensor([[0, 1], [1, 0]]),
                    y=torch.tensor([0, 1, 0]), extra=NotAllowListed()), path)
    with pytest.raises(GnnperfError, match="cannot read graph file") as info:
        load_dataset(str(path))
    message = str(info.value)
    assert "\x1b" not in message and "\n" not in message and "\t" not in message


def test_plain_text_helper():
    from gnnperf.errors import plain
    assert plain("\x1b[1mbold\x1b[0m and \x1b]8;;http://x\x07link\x1b]8;;\x07\tend\r\n") == \
        "bold and link end"


def test_processes_on_one_cold_cache_partition_once(tmp_path, monkeypatch):
    # Cluster-GCN's METIS partition: one process partitions, the others
    # read its parts (and its seconds, measured without their contention).
    from gnnperf.variants import cluster

    def partition(edge_index, num_nodes, num_parts, seed):
        with open(os.environ["GNNPERF_CACHE"] + ".partitioned", "a") as out:
            out.write("x")
        time.sleep(0.3)
        return torch.arange(num_nodes) % num_parts

    def work() -> str:
        edge_index = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]])
        parts, seconds, _ = cluster.cached_partition(edge_index, 4, 2, 0)
        return "ok" if parts.tolist() == [0, 1, 0, 1] and seconds >= 0.3 else "wrong parts"

    monkeypatch.setattr(cluster, "metis_partition", partition)
    results = _at_once(tmp_path, monkeypatch, work, rounds=1)
    assert [outcome for outcome, _ in results] == ["ok"] * PROCESSES
    assert Path(os.environ["GNNPERF_CACHE"] + ".partitioned").read_text() == "x"
