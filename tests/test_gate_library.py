"""``gnnperf gate`` inside a model package's own repository (not gnnperf's):
the arms are that repository's base ref and its head, gnnperf fixed at the
installed one, each arm importing the model from its own commit's tree.
The repository is :mod:`standin`'s."""
from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

import gnnperf
import gnnperf.models
from gnnperf.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parent))
from standin import MODEL, PACKAGE, make_model_repo  # noqa: E402

CASE = f"baseline@cora@{MODEL}"
#: One variant, one graph, the fewest pairs and rounds the gate takes: the
#: point is which trees the arms import, not the time gate's power.
QUICK = ["--models", MODEL, "--variants", "baseline", "--datasets", "cora",
         "--processes", "3", "--max-processes", "3", "--rounds", "3", "--quiet"]


@pytest.fixture(autouse=True)
def _forget_the_package():
    """The gate process imports the head's model to check it; each test's
    stand-in is another repository, so neither its modules nor the model
    registry's cache of its builder outlive it."""
    def forget() -> None:
        for name in [n for n in sys.modules if n == PACKAGE or n.startswith(f"{PACKAGE}.")]:
            del sys.modules[name]
        cached = getattr(gnnperf.models, "_user_model", None)
        if hasattr(cached, "cache_clear"):
            cached.cache_clear()
    forget()
    yield
    forget()


def _gate(repo: Path, monkeypatch, *args: str) -> subprocess.CompletedProcess:
    """``gnnperf gate ARGS`` run from the top of :obj:`repo` (as its team runs
    it there), in this process: the arms are processes of their own anyway."""
    monkeypatch.chdir(repo)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["gate", *args])
    return subprocess.CompletedProcess(["gnnperf", "gate", *args], code, out.getvalue(),
                                       err.getvalue())


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.mark.e2e
def test_the_gate_compares_a_model_repositorys_commits(tmp_path, monkeypatch):
    repo = make_model_repo(tmp_path / "mypkg-repo")
    out, summary = tmp_path / "gate.json", tmp_path / "summary.md"
    # The work gate alone: the time gate's three pairs are six cold worker
    # starts (library arms never fork), the most of this file's budget, and
    # they start as the work gate's workers do (Arm.env).
    result = _gate(repo, monkeypatch, "--base", "v0.1", *QUICK, "--no-time",
                   "--json", str(out), "--markdown", str(summary))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "work gate: passed" in result.stdout and "CHANGED" not in result.stdout
    assert any(line.startswith(CASE) for line in result.stdout.splitlines()), result.stdout
    base, head = _git(repo, "rev-parse", "v0.1"), _git(repo, "rev-parse", "HEAD")
    arms = json.loads(out.read_text())["arms"]
    # The arms are the model repository's refs, gnnperf fixed at this one.
    assert arms["base"]["label"] == "v0.1" and arms["base"]["commit"] == base
    assert arms["head"]["label"] == "main" and arms["head"]["commit"] == head
    assert arms["head"]["dirty"] is False
    assert arms["head"]["tree"] == str(repo.resolve())
    for arm in arms.values():
        assert arm["gnnperf"] == gnnperf.__version__ and arm["gnnperf_fixed"] is True
    assert f"gnnperf {gnnperf.__version__} fixed" in result.stdout
    assert "base: v0.1 " in result.stdout and f"main {repo.resolve()} at {head[:12]}" in \
        result.stdout
    table = summary.read_text()
    assert "### gnnperf gate: passed" in table and f"| {CASE} |" in table
    assert f"gnnperf {gnnperf.__version__} (fixed)" in table


@pytest.mark.e2e
def test_each_arm_imports_its_own_commits_model(tmp_path, monkeypatch):
    # v0.2 adds two elementwise ops per hidden layer: only an arm that
    # imports v0.2's model counts them, only one that imports v0.1's does not.
    repo = make_model_repo(tmp_path / "mypkg-repo", slower_head=True)
    result = _gate(repo, monkeypatch, "--base", "v0.1", *QUICK, "--no-time")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "work gate: FAILED" in result.stdout
    rows = [line for line in result.stdout.splitlines() if line.startswith(CASE)]
    aten = next(line.split() for line in rows if line.split()[1] == "aten_ops")
    assert aten[-1] == "CHANGED" and int(aten[3]) > int(aten[2]), rows
    ops = next(line for line in rows if "ops changed" in line)
    # The model's new ops and nothing else: gnnperf and the graph are the same in both arms.
    # "+2 aten.mul 8->10, +1 aten.add 2->3": signed change, op, counts.
    changed = {op.split()[1] for op in ops.split("ops changed", 1)[1].split(", ")}
    assert changed == {"aten.mul", "aten.add"}, ops


def test_a_missing_base_is_one_line_before_any_worker_starts(tmp_path, monkeypatch, capsys):
    repo = make_model_repo(tmp_path / "mypkg-repo")

    def no_worker(*args, **kwargs):
        raise AssertionError("a worker started")
    monkeypatch.setattr("gnnperf.warm.start", no_worker)
    monkeypatch.chdir(repo)
    for args, text in [(["--base", "no-such-ref"], "--base no-such-ref: no such commit"),
                       (["--base", "origin/main"], "a remote's branch after git fetch"),
                       ([], "--base origin/main"),
                       (["--base", "v0.1", "--library-subdir", "src"], "--library-subdir 'src'")]:
        assert main(["gate", *args, *QUICK, "--no-time"]) == 2, args
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("gnnperf: error:") and text in err[0], err


def test_a_package_in_a_subfolder_is_each_arms_subfolder(tmp_path, monkeypatch):
    # A src layout: each arm puts src/ of its tree first on the path (the
    # arms as the gate builds them; the measuring is the tests' above).
    repo = make_model_repo(tmp_path / "mypkg-repo")
    (repo / "src").mkdir()
    _git(repo, "mv", PACKAGE, f"src/{PACKAGE}")
    _git(repo, "commit", "-q", "-m", "src layout")
    _git(repo, "tag", "v0.3")
    built, trees = {}, {}

    def arms_only(mode, arms, names):
        built.update(arms)
        trees.update({name: sorted(str(p.relative_to(arm.library)) for p in
                                   arm.library.rglob("*.py")) for name, arm in arms.items()})
        trees["gnnperf"] = is_gnnperf_tree(arms["head"].tree)
        raise KeyboardInterrupt  # stops the gate before any worker starts
    monkeypatch.setattr("gnnperf.gate.arms.start_probed", arms_only)
    from gnnperf.gate.arms import is_gnnperf_tree
    from gnnperf.gate.compare import GateOptions, run_gate
    options = GateOptions(base="v0.3", head_dir=str(repo), library_subdir="src",
                          models=(MODEL,), variants=["baseline"], datasets=("cora",))
    with pytest.raises(KeyboardInterrupt):
        run_gate(options)
    base, head = built["base"], built["head"]
    assert head.library == repo.resolve() / "src" and base.library.name == "src"
    assert base.commit == _git(repo, "rev-parse", "v0.3") and base.label == "v0.3"
    assert base.tree == head.tree and trees["gnnperf"]  # one fixed gnnperf tree
    assert trees["base"] == trees["head"] == [f"{PACKAGE}/__init__.py", f"{PACKAGE}/models.py"]
    # The gate process checked the model by import path in the head's src/.
    assert sys.modules[f"{PACKAGE}.models"].__file__.startswith(str(repo.resolve() / "src"))
