import os
from pathlib import Path

import pytest
import torch


@pytest.fixture(scope="session", autouse=True)
def _offline_cache(tmp_path_factory):
    # Tests never download and never write outside their temporary folders;
    # they read only what the project carries (the bundled Planetoid files).
    os.environ["GNNPERF_CACHE"] = str(tmp_path_factory.mktemp("gnnperf-cache"))
    os.environ.pop("GNNPERF_DATA", None)
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def planetoid_root() -> Path:
    from gnnperf.data import BUNDLED_PLANETOID
    return BUNDLED_PLANETOID


@pytest.fixture(scope="session")
def cora():
    from gnnperf.data import load_dataset
    return load_dataset("cora")
