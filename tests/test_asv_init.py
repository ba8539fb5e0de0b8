"""The suite across another repository's commits: ``gnnperf asv-init``'s
configuration, and ``gnnperf bisect --library-repo`` on a small local
repository standing in for the library (its model by import path)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gnnperf.cli import main

GIT_ENV = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@localhost",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@localhost")

#: The library's model at each commit: a two-layer GCN; the third commit
#: adds one op to its forward (what a library change that does more work
#: per step looks like to an exact work metric).
MODEL = '''import torch
from torch_geometric.nn import GCNConv


class Net(torch.nn.Module):
    def __init__(self, in_channels, hidden, out_channels):
        super().__init__()
        self.conv1 = GCNConv(in_channels, hidden)
        self.conv2 = GCNConv(hidden, out_channels)

    def forward(self, x, edge_index):
        x = self.conv1(x, edge_index).relu(){extra}
        return self.conv2(x, edge_index)


def build(in_channels, hidden, out_channels, layers):
    return Net(in_channels, hidden, out_channels)
'''
EXTRA_AT = 1  # the commit (1-based after GOOD) whose forward does one more op
# Two commits after GOOD: the search probes the midpoint (commit 1, the
# answer, inside the range) after the two ends; each probe is a cold
# interpreter.
COMMITS = 2


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], env=GIT_ENV, check=True,
                          capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def library(tmp_path_factory) -> Path:
    """A library's clone: package ``steplib`` (a ``pyproject.toml``, a model
    at ``steplib.models:build``), GOOD then :data:`COMMITS` commits."""
    repo = tmp_path_factory.mktemp("library") / "steplib-repo"
    (repo / "steplib").mkdir(parents=True)
    (repo / "pyproject.toml").write_text(
        '[project]\nname = "steplib"\nversion = "0.1"\n'
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n')
    (repo / "steplib" / "__init__.py").write_text("")
    _git(repo, "init", "-q", "-b", "main")
    for n in range(COMMITS + 1):
        extra = "\n        x = x * 1.0  # a change that costs an op" if n >= EXTRA_AT else ""
        (repo / "steplib" / "models.py").write_text(MODEL.format(extra=extra))
        (repo / "NOTES").write_text(f"{n}\n")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", "good" if n == 0 else f"commit {n}")
    return repo


def test_asv_init_writes_the_configuration_for_the_librarys_commits(library, tmp_path, capsys):
    out = tmp_path / "bench"
    assert main(["asv-init", "--repo", str(library), "--out", str(out), "--project", "steplib",
                 "--branch", "main"]) == 0
    conf = json.loads((out / "asv.conf.json").read_text())
    assert conf["repo"] == str(library.resolve()) and conf["branches"] == ["main"]
    assert conf["project"] == "steplib" and conf["benchmark_dir"] == "benchmarks"
    # gnnperf's own matrix (torch pinned), the library left out of it; its
    # build, launch and thresholds gnnperf's own.
    from gnnperf.asv_init import suite_config
    suite = suite_config(Path(__file__).resolve().parents[1])
    req = conf["matrix"]["req"]
    assert req == suite["matrix"]["req"] and req["torch"] == [torch.__version__.split("+")[0]]
    assert conf["regressions_thresholds"] == suite["regressions_thresholds"]
    pyg = tmp_path / "pyg-bench"
    assert main(["asv-init", "--repo", str(library), "--out", str(pyg),
                 "--project", "torch_geometric"]) == 0
    assert "torch-geometric" not in json.loads((pyg / "asv.conf.json").read_text())[
        "matrix"]["req"]
    # The library's wheel with its dependencies, torch held by a constraint;
    # then this gnnperf's wheel, built now, without dependencies.
    library_install, gnnperf_install = conf["install_command"]
    constraint = Path(library_install.split("--constraint ")[1].split()[0])
    assert constraint.read_text() == f"torch=={req['torch'][0]}\n"
    wheel = Path(gnnperf_install.split()[-1])
    assert wheel.is_file() and wheel.name.startswith("gnnperf-")
    # gnnperf's own benchmarks, copied with what they load by path beside
    # them: they stay this version's, and they import there.
    assert (out / "benchmarks" / "base.py").is_file()
    assert (out / "gnnperf" / "measure" / "case.py").is_file()
    proc = subprocess.run([sys.executable, "-c", "import benchmarks.suite"], cwd=out,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "asv run" in capsys.readouterr().out


@pytest.mark.parametrize("what, message", [
    ("not-a-repo", "not a git clone"),
    ("full-out", "is not empty"),
])
def test_asv_init_refuses_what_it_cannot_use_in_one_line(what, message, library, tmp_path,
                                                         capsys):
    out = tmp_path / "bench"
    repo = str(library)
    if what == "not-a-repo":
        repo = str(tmp_path)
    else:
        out.mkdir()
        (out / "x").write_text("")
    assert main(["asv-init", "--repo", repo, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_bisect_across_a_librarys_commits_finds_the_commit(library):
    # gnnperf fixed (this tree), the library's commits each first on the
    # path; the case trains the library's own model, by import path.
    proc = subprocess.run(
        [sys.executable, "-m", "gnnperf", "bisect", f"HEAD~{COMMITS}", "HEAD", "--library-repo",
         str(library), "--case", "baseline@synthetic-10k@steplib.models:build",
         "--metric", "aten_ops", "--quiet"],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    expected = _git(library, "rev-parse", f"HEAD~{COMMITS - EXTRA_AT}")
    first = proc.stdout.splitlines()[0]
    assert first.startswith(f"first changed commit: {expected[:12]} commit {EXTRA_AT}"), first
    before, after = (int(x.replace(",", "")) for x in
                     proc.stdout.splitlines()[1].split(": ")[1].split(" -> "))
    assert after > before  # its forward's op, and the op's backward


def test_bisect_refuses_a_library_that_is_not_a_clone(tmp_path, capsys):
    assert main(["bisect", "HEAD~1", "HEAD", "--library-repo", str(tmp_path),
                 "--case", "baseline@cora"]) == 2
    assert "not a git checkout" in capsys.readouterr().err
