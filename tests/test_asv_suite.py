"""The asv suite runs: ``asv check`` and a ``--quick`` smoke run of every
benchmark on the current environment (no failure; CUDA-only figures n/a on CPU).

Select with ``pytest -m asv`` (or ``-k asv``); about 2-3 minutes on 2 cores.
Results go to a temporary folder, never to the checkout's ``.asv/``.
"""
from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("asv", reason="asv not installed (pip install -e '.[bench]')")

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.asv

# Figures that are n/a on a machine without CUDA.
CUDA_ONLY = ("track_cuda_peak_mib", "OffloadTransfer.", "OffloadGpuIdle.")
OWN = ("training.", "scaling.", "control.", "compile.", "sampling.", "distributed.")


def _git_head() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                             text=True, timeout=10)
    except OSError:
        return None
    return out.stdout.strip() if out.returncode == 0 else None


@pytest.fixture(scope="module")
def asv_conf(tmp_path_factory) -> Path:
    return _temp_conf(tmp_path_factory.mktemp("asv"))


def _temp_conf(tmp: Path) -> Path:
    """The project's asv.conf.json with every output folder moved to :obj:`tmp`."""
    from asv.util import load_json

    conf = load_json(str(ROOT / "asv.conf.json"), js_comments=True)
    conf.update(repo=str(ROOT), benchmark_dir=str(ROOT / "benchmarks"),
                env_dir=str(tmp / "env"), results_dir=str(tmp / "results"),
                html_dir=str(tmp / "html"))
    path = tmp / "asv.conf.json"
    path.write_text(json.dumps(conf, indent=2))
    return path


def _asv(conf: Path, *args: str, timeout: int = 900, **env_vars: str
         ) -> subprocess.CompletedProcess:
    env = dict(os.environ, GNNPERF_ASV_PROFILE="quick", **env_vars)
    return subprocess.run([sys.executable, "-m", "asv", "--config", str(conf), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)


def test_asv_conf_pins_and_no_deps():
    from asv.util import load_json

    conf = load_json(str(ROOT / "asv.conf.json"), js_comments=True)
    import torch
    import torch_geometric

    req = conf["matrix"]["req"]
    assert req["torch"] == [torch.__version__.split("+")[0]]
    assert req["torch-geometric"] == [torch_geometric.__version__]
    assert all("--no-deps" in cmd for cmd in conf["install_command"] if "install" in cmd)
    assert conf["launch_method"] == "spawn"
    assert all(conf[k].startswith(".asv/") for k in ("results_dir", "html_dir", "env_dir"))


def test_asv_check(asv_conf):
    out = _asv(asv_conf, "check", "--python=same")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "No problems found" in out.stdout


def test_asv_quick_smoke(asv_conf):
    head = _git_head()
    if head is None:
        pytest.skip("no git history: asv needs --set-commit-hash of a real commit")
    machine = _asv(asv_conf, "machine", "--yes")
    assert machine.returncode == 0, machine.stdout + machine.stderr
    # forkserver: one import of torch for the whole run instead of one per
    # benchmark (the config's spawn is for CUDA runners, which cannot fork).
    run = _asv(asv_conf, "run", "--quick", "--python=same", "--launch-method", "forkserver",
               "--show-stderr", "--set-commit-hash", head)
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-6000:]
    assert " failed" not in run.stdout, log[-6000:]

    results_dir = Path(json.loads(asv_conf.read_text())["results_dir"])
    files = [p for p in results_dir.glob("*/*.json") if p.name != "machine.json"]
    assert len(files) == 1, files
    results = json.loads(files[0].read_text())
    benchmarks = json.loads((results_dir / "benchmarks.json").read_text())
    names = {name for name in benchmarks if name != "version"}
    assert names <= set(results["results"]), names - set(results["results"])
    for area in ("training.", "compile.", "scaling.", "control.", "sampling.", "distributed."):
        assert any(name.startswith(area) for name in names), area
    columns = results["result_columns"]
    for name in sorted(names):
        row = dict(zip(columns, results["results"][name]))
        combos = list(itertools.product(*row["params"])) or [()]
        for combo, value in zip(combos, row["result"]):
            assert value is not None, f"{name}{combo} failed"  # failed: null, n/a: NaN
            # n/a is checked for this suite's own modules; others only must not fail.
            if isinstance(value, float) and math.isnan(value) and name.startswith(OWN):
                assert _may_be_na(name), f"{name}{combo} is n/a"


def _may_be_na(name: str) -> bool:
    """n/a is right only for CUDA figures on a machine without CUDA."""
    import torch

    return not torch.cuda.is_available() and any(tag in name for tag in CUDA_ONLY)


def test_user_datasets_show_numbers_or_na(tmp_path):
    """``GNNPERF_ASV_DATASETS`` with a loadable graph file and a missing one:
    numbers for the first, n/a (not "failed") for the second."""
    import torch
    from torch_geometric.data import Data

    from gnnperf.data import load_dataset
    head = _git_head()
    if head is None:
        pytest.skip("no git history: asv needs --set-commit-hash of a real commit")
    graph = load_dataset("synthetic:nodes=600,degree=4,features=16,classes=3")
    good, missing = tmp_path / "mine.pt", tmp_path / "absent.pt"
    torch.save(Data(x=graph.x, edge_index=graph.edge_index, y=graph.y), good)
    (tmp_path / "asv").mkdir()
    conf = _temp_conf(tmp_path / "asv")
    assert _asv(conf, "machine", "--yes").returncode == 0
    run = _asv(conf, "run", "--quick", "--python=same", "--launch-method", "forkserver",
               "-b", r"^training\.TrainStep\.time_train_step", "--set-commit-hash", head,
               GNNPERF_ASV_DATASETS=f"{good},{missing}")
    assert run.returncode == 0 and " failed" not in run.stdout, (run.stdout + run.stderr)[-4000:]
    results_dir = Path(json.loads(conf.read_text())["results_dir"])
    files = [p for p in results_dir.glob("*/*.json") if p.name != "machine.json"]
    results = json.loads(files[0].read_text())
    row = dict(zip(results["result_columns"], results["results"]["training.TrainStep.time_train_step"]))
    values = dict(zip(itertools.product(*row["params"]), row["result"]))
    for (dataset, variant), value in values.items():
        assert value is not None, f"{dataset} {variant} failed"
        if dataset == repr(str(missing)):
            assert math.isnan(value), f"{dataset} {variant} should be n/a"
        else:
            assert value > 0, f"{dataset} {variant} should be a number"
    assert {d for d, _ in values} == {"'synthetic-cora'", repr(str(good)), repr(str(missing))}


def _spyglass(tmp: Path) -> Path:
    """asv-spyglass in its own venv (it needs Python >= 3.12; the suite's
    venv may be older), or a skip where no such Python is on the PATH."""
    import glob
    import shutil

    candidates = [shutil.which(name) for name in ("python3.13", "python3.12")]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[2-9]*/bin/python3")))
    python = next((c for c in candidates if c and subprocess.run(
        [c, "-c", "import sys; assert sys.version_info >= (3, 12)"],
        capture_output=True).returncode == 0), None)  # a pyenv shim of an inactive version fails
    if python is None:
        pytest.skip("asv-spyglass needs Python >= 3.12; none found")
    venv = tmp / "spyglass"
    subprocess.run([python, "-m", "venv", str(venv)], check=True, timeout=120)
    install = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "asv-spyglass"],
                             capture_output=True, text=True, timeout=600)
    if install.returncode != 0:
        pytest.skip(f"asv-spyglass not installable here: {install.stderr.strip()[-300:]}")
    return venv / "bin" / "asv-spyglass"


def test_spyglass_compares_one_commit_across_two_environments(tmp_path):
    """docs/asv.md's route for dependency releases: ``asv compare -E a -E b``
    compares each environment with itself (ratio 1 everywhere); asv-spyglass
    compares the two result files. The files are written by asv's own
    ``Results`` for two environments of one commit, as ``asv run`` does."""
    from asv.results import Results
    from asv.runner import BenchmarkResult

    bench = {"name": "training.TrainStep.time_train_step", "version": "v1", "type": "time",
             "params": [["'cora'"], ["'baseline'", "'sampled'"]], "unit": "seconds",
             "param_names": ["dataset", "variant"]}
    results = tmp_path / "results"
    (results / "runner").mkdir(parents=True)
    (results / "benchmarks.json").write_text(json.dumps({bench["name"]: bench, "version": 2}))
    files = []
    for env, medians in (("existing-pyg-2.7.0", [0.0200, 0.0100]),
                         ("existing-pyg-2.8.1", [0.0250, 0.0100])):
        run = Results({"machine": "runner"}, {"torch-geometric": env[-5:]}, "a" * 40, 1,
                      "3.11", env, {})
        samples = [[m * f for f in (0.99, 1.0, 1.01)] for m in medians]
        run.add_result(bench, BenchmarkResult(result=medians, samples=samples, number=[1, 1],
                                              errcode=0, stderr="", profile=None))
        run.save(str(results))
        files.append(results / "runner" / f"{'a' * 8}-{env}.json")
    out = subprocess.run([str(_spyglass(tmp_path)), "compare", *map(str, files),
                          str(results / "benchmarks.json")], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 1, out.stderr  # exit 1: a benchmark worsened by more than 10%
    rows = {line.split("|")[-2].strip().split(" [")[0]: line.split("|")[4].strip()
            for line in out.stdout.splitlines() if "time_train_step(" in line}
    assert rows == {"training.TrainStep.time_train_step('cora', 'baseline')": "1.25",
                    "training.TrainStep.time_train_step('cora', 'sampled')": "1"}
