"""The asv step: ``asv run --quick`` of the ``pr`` profile's CUDA
benchmarks, labelled with this checkout's HEAD, or with a throwaway commit
of a copy where the tree has no .git; its results kept beside the summary."""
from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .core import ROOT, Plan, StepResult, tail


@dataclass
class _AsvRepo:
    root: Path = ROOT
    commit: str = ""


# Where the step's asv runs and the commit it labels with: set by
# asv_before, read by the step's command line, environment and judge.
_ASV = _AsvRepo()
#: The CUDA figures, CPU offload, and the history figure, whose references
#: on a GPU (cuSPARSE's CSR product and its backward, torch's fused dropout)
#: nothing else runs.
ASV_BENCHMARKS = "track_cuda|Offload|track_step_over_reference"


def _git(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-c", "user.name=gpu_check", "-c",
                           "user.email=gpu_check@localhost", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=60)


def asv_commit(root: Path, scratch: Path) -> tuple[Path, str, str]:
    """Where asv runs and the commit it labels the results with.

    asv ties every result to a commit (``--set-commit-hash`` resolves it
    through git and stores its date), and a copied tree (a runner that
    copies the working tree without .git) has none; a copy keeps the tree
    itself untouched.

    Args:
        root (Path): The tree asv measures.
        scratch (Path): Where the throwaway copy goes.

    Returns:
        tuple[Path, str, str]: :obj:`root` and its HEAD in a git checkout;
        else the copy under :obj:`scratch` and its throwaway commit of the
        files asv reads, and ""; or (root, "", the reason asv cannot run).
    """
    if (root / ".git").exists():
        head = _git(["rev-parse", "HEAD"], root) if shutil.which("git") else None
        if head is not None and head.returncode == 0:
            return root, head.stdout.strip(), ""
    if shutil.which("git") is None:
        return root, "", ("no .git here and no git to make a throwaway commit: asv labels "
                          "results by commit (run from a git checkout, or where git exists)")
    copy = scratch / "asv-repo"
    shutil.rmtree(copy, ignore_errors=True)
    copy.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".asv", "node_modules")
    for name in ("asv.conf.json", "pyproject.toml", "README.md"):
        if (root / name).is_file():
            shutil.copy2(root / name, copy / name)
    for name in ("benchmarks", "gnnperf"):
        shutil.copytree(root / name, copy / name, ignore=ignore)
    for args in (["-c", "init.defaultBranch=main", "init", "-q"], ["add", "-A"],
                 ["commit", "-q", "--no-verify", "-m", "gpu_check: the tree asv measures"],
                 ["rev-parse", "HEAD"]):
        done = _git(args, copy)
        if done.returncode != 0:
            return root, "", f"git {args[0]} failed in the throwaway copy: {tail(done.stderr)}"
    return copy, done.stdout.strip(), ""


def asv_before(plan: Plan) -> str | None:
    """The step's set-up: the commit to label with and asv's machine file;
    returns the reason to skip the step where asv cannot label results."""
    scratch = Path(tempfile.mkdtemp(prefix="gpu-check-asv-"))
    # Its results are copied beside the summary by the judge; the copy goes.
    atexit.register(shutil.rmtree, scratch, True)
    root, commit, reason = asv_commit(ROOT, scratch)
    if reason:
        return reason
    _ASV.root, _ASV.commit = root, commit
    # asv asks for the machine's details once, on stdin, unless told --yes.
    subprocess.run([sys.executable, "-m", "asv", "machine", "--yes"], cwd=root,
                   capture_output=True, stdin=subprocess.DEVNULL, timeout=120,
                   env=asv_env(plan))
    return None


def asv_env(plan: Plan) -> dict:
    """asv's environment: this process's, the measured tree first on
    ``PYTHONPATH`` and the ``pr`` profile."""
    # The benchmarks import gnnperf from the tree asv runs in, before any
    # installed one; asv itself may come from the wheel bundle's PYTHONPATH.
    paths = [str(_ASV.root), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "GNNPERF_ASV_PROFILE": "pr"}


def asv_argv(plan: Plan) -> list[str]:
    # spawn: the config's forkserver is unverified on CUDA (docs/asv.md).
    return ["-m", "asv", "run", "--quick", "--python=same", "--launch-method", "spawn",
            "-b", ASV_BENCHMARKS, "--set-commit-hash", _ASV.commit]


def asv_cwd(plan: Plan) -> Path:
    return _ASV.root


def judge_asv(plan: Plan, proc: subprocess.CompletedProcess) -> StepResult:
    """Judged as ``gnnperf doctor`` judges its asv check; the results are
    copied beside the summary (the copy they were written in is scratch)."""
    from gnnperf.doctor import asv_config, judge_asv_run
    status, figure, reason = judge_asv_run(proc, _ASV.root, _ASV.commit, plan.device,
                                           plan.importable)
    config = asv_config(_ASV.root)
    kept = [path for path in (_ASV.root / config.get("results_dir", ".asv/results")).glob(
        f"*/{_ASV.commit[:8]}*.json")]
    for path in kept:
        shutil.copy2(path, plan.out / f"asv-{path.parent.name}-{path.name}")
    where = (f"commit {_ASV.commit[:8]} of "
             f"{'a throwaway copy (no .git here)' if _ASV.root != ROOT else 'this checkout'}")
    return StepResult("asv CUDA benchmarks", status, figures={"asv": figure, "results": where},
                      reason=reason)
