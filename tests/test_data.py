import gzip
import shutil
import socket
from pathlib import Path

import pytest
import torch
from torch_geometric.data import Data

import gnnperf
from gnnperf.data import (
    BUNDLED_PLANETOID,
    SyntheticSpec,
    Dataset,
    load_dataset,
    parse_synthetic,
    planetoid_root,
    synthetic_graph,
)
from gnnperf.errors import GnnperfError


def test_cora_loads_offline_from_read_only_copy(cora):
    assert cora.num_nodes == 2708
    assert cora.edge_index.size(1) == 10556
    assert cora.num_features == 1433
    assert int(cora.train_mask.sum()) == 140 and int(cora.test_mask.sum()) == 1000


def test_citeseer_loads():
    data = load_dataset("citeseer")
    assert data.num_nodes == 3327 and data.num_features == 3703


def test_default_data_root_is_the_bundled_copy(monkeypatch, tmp_path):
    monkeypatch.delenv("GNNPERF_DATA", raising=False)
    assert planetoid_root() == BUNDLED_PLANETOID
    assert BUNDLED_PLANETOID.is_relative_to(Path(gnnperf.__file__).parent)
    assert (BUNDLED_PLANETOID / "LICENSE").read_text().startswith("The MIT License")
    assert load_dataset("cora").source == "planetoid (bundled)"
    monkeypatch.setenv("GNNPERF_DATA", str(tmp_path))  # the override still wins
    assert planetoid_root() == tmp_path
    with pytest.raises(GnnperfError, match="lacks ind.cora"):
        load_dataset("cora")


def test_no_code_path_reads_the_shared_folder():
    root = Path(gnnperf.__file__).parent.parent
    for path in [*root.glob("gnnperf/**/*.py"), *root.glob("benchmarks/*.py"),
                 *root.glob("tests/*.py"), root / ".ci" / "run"]:
        if path.name != "test_data.py":
            assert "shared/data" not in path.read_text(), path


def test_synthetic_is_deterministic_and_symmetric():
    spec = SyntheticSpec(3000, 6.0, 32, 5)
    a, b = synthetic_graph(spec, seed=3), synthetic_graph(spec, seed=3)
    assert torch.equal(a.edge_index, b.edge_index) and torch.equal(a.x, b.x)
    assert not torch.equal(a.edge_index, synthetic_graph(spec, seed=4).edge_index)
    forward = set(map(tuple, a.edge_index.t().tolist()))
    assert all((j, i) in forward for i, j in forward)
    assert (a.edge_index[0] != a.edge_index[1]).all()
    # Edge count close to nodes * avg_degree (duplicates removed).
    assert 0.8 * 3000 * 6 < a.edge_index.size(1) <= 3000 * 6


def test_synthetic_is_homophilous_with_hubs():
    data = synthetic_graph(SyntheticSpec(5000, 8.0, 16, 4, hub_exponent=1.0), seed=0)
    same = (data.y[data.edge_index[0]] == data.y[data.edge_index[1]]).float().mean()
    assert same > 0.7
    degree = torch.bincount(data.edge_index[1], minlength=data.num_nodes).float()
    assert degree.max() > 20 * degree.mean()


def test_synthetic_spec_parsing():
    spec = parse_synthetic("synthetic:nodes=5000,degree=4,features=8,classes=3")
    assert (spec.num_nodes, spec.avg_degree, spec.num_features, spec.num_classes) == (5000, 4, 8, 3)
    assert load_dataset("synthetic:nodes=400,degree=4,features=8,classes=3").num_nodes == 400


@pytest.mark.parametrize("name, message", [
    ("imagenet", "unknown dataset 'imagenet'"),
    ("synthetic:nodes=10,degree=50,features=4,classes=2", "avg_degree"),
    ("synthetic:nodes=-5,degree=2,features=4,classes=2", "num_nodes >= 2"),
    ("synthetic:nodes=100,colour=2", "unknown synthetic graph key"),
])
def test_bad_dataset_names(name, message):
    with pytest.raises(GnnperfError, match=message):
        load_dataset(name)


def test_missing_raw_file_names_the_fix(tmp_path, planetoid_root):
    shutil.copytree(planetoid_root / "Cora", tmp_path / "Cora")
    (tmp_path / "Cora" / "raw" / "ind.cora.graph").unlink()
    with pytest.raises(GnnperfError, match=r"lacks ind\.cora\.graph: put the Planetoid raw"):
        load_dataset("cora", tmp_path)


def test_corrupt_raw_file_is_one_clear_error(tmp_path, planetoid_root, monkeypatch):
    monkeypatch.setenv("GNNPERF_CACHE", str(tmp_path / "cache"))
    shutil.copytree(planetoid_root / "Cora", tmp_path / "Cora")
    (tmp_path / "Cora" / "raw" / "ind.cora.x").write_bytes(b"not a pickle")
    with pytest.raises(GnnperfError, match="cannot read cora raw files") as info:
        load_dataset("cora", tmp_path)
    assert "\n" not in str(info.value)
    # The good files load again afterwards: no broken processed cache is left.
    assert load_dataset("cora", planetoid_root).num_nodes == 2708


def test_pyg_dataset_class_gives_the_same_tensors_as_cora(tmp_path, cora_dataset):
    shutil.copytree(BUNDLED_PLANETOID / "Cora", tmp_path / "Planetoid" / "Cora")
    data = load_dataset("pyg:Planetoid/Cora", tmp_path)
    for key in ("x", "edge_index", "y", "train_mask", "val_mask", "test_mask"):
        assert torch.equal(data.graph[key], cora_dataset.graph[key]), key
    assert data.split == "provided"
    assert data.identity()["sha256"] == cora_dataset.identity()["sha256"]
    assert data.identity()["name"] == "pyg:Planetoid/Cora" != cora_dataset.identity()["name"]


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a test touched the network")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


@pytest.mark.parametrize("name, files", [("pyg:Amazon/Computers", "amazon_electronics_computers"),
                                         ("pyg:Planetoid/PubMed", "ind.pubmed.x")])
def test_pyg_without_files_or_download_names_the_fix(tmp_path, no_network, name, files):
    with pytest.raises(GnnperfError, match="pass --download to fetch them") as info:
        load_dataset(name, tmp_path)
    assert files in str(info.value) and "\n" not in str(info.value)
    assert not any(tmp_path.rglob("*"))  # nothing left behind


@pytest.mark.parametrize("name, message", [
    ("pyg:NoSuchSet", "has no class 'NoSuchSet'"),
    ("pyg:Planetoid/Cora,colour", "is not key=value"),
])
def test_bad_pyg_names(tmp_path, name, message):
    with pytest.raises(GnnperfError, match=message):
        load_dataset(name, tmp_path)


def write_tiny_ogbn_arxiv(root: Path) -> None:
    """A handful of nodes in OGB's on-disk format for ogbn-arxiv (directed
    edges, a node_year file, the "time" split), as OGB's zip unpacks."""
    base = root / "ogbn_arxiv"
    (base / "raw").mkdir(parents=True)
    (base / "split" / "time").mkdir(parents=True)
    (base / "RELEASE_v1.txt").write_text("tiny test fixture\n")
    edges = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (6, 7), (7, 0), (0, 4)]

    def csv_gz(path: Path, rows) -> None:
        with gzip.open(path, "wt") as out:
            out.write("".join(",".join(map(str, row)) + "\n" for row in rows))

    csv_gz(base / "raw" / "edge.csv.gz", edges)
    csv_gz(base / "raw" / "num-node-list.csv.gz", [[8]])
    csv_gz(base / "raw" / "num-edge-list.csv.gz", [[len(edges)]])
    csv_gz(base / "raw" / "node-feat.csv.gz", [[i * 0.5, 1.0 - i, i % 2] for i in range(8)])
    csv_gz(base / "raw" / "node-label.csv.gz", [[i % 3] for i in range(8)])
    csv_gz(base / "raw" / "node_year.csv.gz", [[2000 + i] for i in range(8)])
    for split, nodes in (("train", [0, 1, 2, 3]), ("valid", [4, 5]), ("test", [6, 7])):
        csv_gz(base / "split" / "time" / f"{split}.csv.gz", [[n] for n in nodes])


def test_ogb_dataset_loads_through_ogb_with_its_split(tmp_path, no_network):
    pytest.importorskip("ogb")
    write_tiny_ogbn_arxiv(tmp_path)
    dataset = load_dataset("ogbn-arxiv", tmp_path)
    data = dataset.graph
    assert data.num_nodes == 8 and data.x.shape == (8, 3) and data.y.tolist() == [0, 1, 2] * 2 + [0, 1]
    assert data.train_mask.nonzero().view(-1).tolist() == [0, 1, 2, 3]
    assert data.val_mask.nonzero().view(-1).tolist() == [4, 5]
    assert data.test_mask.nonzero().view(-1).tolist() == [6, 7]
    assert dataset.split == "ogb official (time)"
    assert data.edge_index.size(1) == 18 and "(symmetrised)" in dataset.source  # 9 directed, both ways


def test_ogb_without_files_or_package(tmp_path, no_network, monkeypatch):
    pytest.importorskip("ogb")
    with pytest.raises(GnnperfError, match=r"ogbn-products: raw files missing .*--download"):
        load_dataset("ogbn-products", tmp_path)
    assert not any(tmp_path.rglob("*"))
    monkeypatch.setitem(__import__("sys").modules, "ogb.nodeproppred", None)
    with pytest.raises(GnnperfError, match=r"pip install 'gnnperf\[ogb\]'"):
        load_dataset("ogbn-arxiv", tmp_path)


def _graph(**overrides) -> Data:
    base = dict(x=torch.randn(6, 3), y=torch.tensor([0, 1, 0, 1, 2, 2]),
                edge_index=torch.tensor([[0, 1, 1, 2, 3, 4], [1, 0, 2, 1, 4, 3]]))
    base.update(overrides)
    return Data(**{k: v for k, v in base.items() if v is not None})


@pytest.mark.parametrize("graph, message", [
    (_graph(x=None), "has no node features: x"),
    (_graph(y=None), "has no labels: y"),
    (_graph(y=torch.tensor([0.0, 1, 0, 1, 2, 2])), "labels y are torch.float32"),
    (_graph(y=torch.tensor([0, 1, 0])), "y has shape [3], expected [6]"),
    (_graph(edge_index=torch.tensor([[0, 9], [9, 0]])), "edge_index holds node id 9, outside [0, 6)"),
    (_graph(edge_index=torch.tensor([[0, 1], [1, 2]])), "edge_index is directed"),
    (_graph(train_mask=torch.ones(6, dtype=torch.bool)), "has some masks but no val_mask"),
])
def test_malformed_graph_file_is_one_line_naming_the_field(tmp_path, graph, message):
    path = tmp_path / "bad.pt"
    torch.save(graph, path)
    with pytest.raises(GnnperfError) as info:
        load_dataset(str(path))
    assert message in str(info.value) and "\n" not in str(info.value)


def test_unreadable_graph_files(tmp_path):
    with pytest.raises(GnnperfError, match="does not exist; save one with torch.save"):
        load_dataset(str(tmp_path / "missing.pt"))
    (tmp_path / "junk.pt").write_bytes(b"not a torch file")
    with pytest.raises(GnnperfError, match="cannot read graph file"):
        load_dataset(str(tmp_path / "junk.pt"))
    torch.save([1, 2, 3], tmp_path / "list.pt")
    with pytest.raises(GnnperfError, match="holds a list, not a PyG Data"):
        load_dataset(str(tmp_path / "list.pt"))


def test_graph_file_masks_are_kept_or_split_by_seed(tmp_path):
    masks = {k: torch.tensor([i % 3 == j for i in range(6)])
             for j, k in enumerate(("train_mask", "val_mask", "test_mask"))}
    torch.save(_graph(**masks), tmp_path / "masked.pt")
    kept = load_dataset(str(tmp_path / "masked.pt"))
    assert kept.split == "provided" and torch.equal(kept.graph.train_mask, masks["train_mask"])
    big = synthetic_graph(SyntheticSpec(500, 4.0, 8, 3, train_per_class=5, num_val=50,
                                        num_test=100))
    torch.save({"x": big.x, "edge_index": big.edge_index, "y": big.y}, tmp_path / "plain.pt")
    first, second = (load_dataset(str(tmp_path / "plain.pt"), seed=1) for _ in range(2))
    other = load_dataset(str(tmp_path / "plain.pt"), seed=2)
    a, b, c = first.graph, second.graph, other.graph
    assert torch.equal(a.train_mask, b.train_mask) and not torch.equal(a.train_mask, c.train_mask)
    assert int(a.val_mask.sum()) == 100 and int(a.test_mask.sum()) == 100
    assert not (a.train_mask & a.test_mask).any()
    assert first.split.startswith("RandomNodeSplit(split=train_rest")


def test_identity_hash_sees_one_changed_value(cora_dataset):
    cora = cora_dataset.graph
    changed = cora.clone()
    changed.x = cora.x.clone()
    changed.x[5, 7] += 1.0
    assert Dataset(changed).identity()["sha256"] != cora_dataset.identity()["sha256"]
    assert Dataset(cora.clone()).identity()["sha256"] == cora_dataset.identity()["sha256"]


def test_a_dataset_record_travels_whole_and_carries_nothing_on_its_graph(cora_dataset):
    # The name, source and split are the record's, not loose attributes on
    # PyG's Data; a pickled record (what a launched rank receives) is the
    # same graph under the same identity.
    import pickle
    assert "name" not in cora_dataset.graph and "source" not in cora_dataset.graph
    identity = cora_dataset.identity()
    travelled = pickle.loads(pickle.dumps(cora_dataset))
    assert travelled.identity() == identity
    assert (travelled.num_nodes, travelled.num_edges, travelled.num_features,
            travelled.num_classes) == (2708, 10556, 1433, 7)


def test_wheel_package_data_covers_every_bundled_file():
    import fnmatch
    import tomllib
    root = Path(gnnperf.__file__).parent
    conf = tomllib.loads((root.parent / "pyproject.toml").read_text())
    patterns = conf["tool"]["setuptools"]["package-data"]["gnnperf"]
    files = [p.relative_to(root).as_posix() for p in BUNDLED_PLANETOID.rglob("*") if p.is_file()]
    assert len(files) == 17  # 8 raw files each for Cora and CiteSeer, and the licence
    assert all(any(fnmatch.fnmatch(f, pat) for pat in patterns) for f in files)


def test_the_calibrated_presets_keep_their_edges_and_the_separable_ones_stay_by_name():
    import dataclasses

    from gnnperf.data import CALIBRATED_SIGNAL, SYNTHETIC_PRESETS, synthetic_graph
    for size in ("1m", "10m"):
        calibrated = SYNTHETIC_PRESETS[f"synthetic-{size}"]
        separable = SYNTHETIC_PRESETS[f"synthetic-{size}-separable"]
        assert calibrated.signal == CALIBRATED_SIGNAL and separable.signal == 3.0
        assert dataclasses.replace(calibrated, signal=3.0) == separable
    # The signal moves the features only: the same edges, labels and split.
    small = dataclasses.replace(SYNTHETIC_PRESETS["synthetic-1m"], num_nodes=3000,
                                train_per_class=20, num_val=300, num_test=600)
    weak, strong = (synthetic_graph(dataclasses.replace(small, signal=s)) for s in (0.75, 3.0))
    assert torch.equal(weak.edge_index, strong.edge_index) and torch.equal(weak.y, strong.y)
    assert torch.equal(weak.train_mask, strong.train_mask)
    assert not torch.equal(weak.x, strong.x)
