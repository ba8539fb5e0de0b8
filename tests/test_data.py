import shutil

import pytest
import torch

from gnnperf.data import SyntheticSpec, load_dataset, parse_synthetic, synthetic_graph
from gnnperf.errors import GnnperfError


def test_cora_loads_offline_from_read_only_copy(cora):
    assert cora.num_nodes == 2708
    assert cora.edge_index.size(1) == 10556
    assert cora.num_features == 1433
    assert int(cora.train_mask.sum()) == 140 and int(cora.test_mask.sum()) == 1000


def test_citeseer_loads(planetoid_root):
    data = load_dataset("citeseer", planetoid_root)
    assert data.num_nodes == 3327 and data.num_features == 3703


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
