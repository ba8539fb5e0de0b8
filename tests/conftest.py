import os
from pathlib import Path

import pytest
import torch

SHARED_PLANETOID = Path(__file__).resolve().parents[2] / "shared" / "data" / "planetoid"


@pytest.fixture(scope="session", autouse=True)
def _offline_cache(tmp_path_factory):
    # Tests never download and never write outside their temporary folders.
    os.environ["GNNPERF_CACHE"] = str(tmp_path_factory.mktemp("gnnperf-cache"))
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def planetoid_root() -> Path:
    root = Path(os.environ.get("GNNPERF_DATA", SHARED_PLANETOID))
    if not (root / "Cora" / "raw").is_dir():
        pytest.fail(f"Cora raw files not found under {root}; set GNNPERF_DATA")
    return root


@pytest.fixture(scope="session")
def cora(planetoid_root):
    from gnnperf.data import load_dataset
    return load_dataset("cora", planetoid_root)
