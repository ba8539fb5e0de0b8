"""``gnnperf asv-init``: the asv suite pointed at another repository's
commits (a library under test, e.g. torch_geometric, or a team's model
package), gnnperf fixed at this version.

asv checks out and builds the library's commits (its ``repo``, ``branches``,
build and install commands); gnnperf, built once into a wheel here, goes into
every environment beside it with torch pinned, and gnnperf's own benchmarks
(copied, so they stay this version's) measure each commit. What
``asv run``, ``asv publish`` and ``gnnperf history`` then show is the
library's history. A model of the library's, by import path, joins the suite
through ``GNNPERF_ASV_MODELS=pkg.module:function``.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

from gnnperf.errors import GnnperfError

def _checkout_top() -> Path:
    """This gnnperf's checkout (its ``benchmarks/`` and its source)."""
    top = Path(__file__).resolve().parent.parent
    if not (top / "benchmarks" / "base.py").is_file() or not (top / "pyproject.toml").is_file():
        raise GnnperfError("gnnperf asv-init needs gnnperf's checkout (its benchmarks/ folder); "
                           "run it from a clone: pip install -e <clone>")
    return top


def suite_config(top: Path) -> dict:
    """gnnperf's own ``asv.conf.json`` (asv's JSON, with ``//`` comments):
    the matrix, build, launch and thresholds a library's run reuses."""
    lines = (top / "asv.conf.json").read_text().splitlines()
    return json.loads("\n".join(line for line in lines if not line.lstrip().startswith("//")))


def config(suite: dict, repo: str, project: str, branches: list[str], python: str,
           wheel: Path, constraints: Path) -> dict:
    """:obj:`suite` (:func:`suite_config`) pointed at :obj:`repo`'s commits,
    measured by this gnnperf (:obj:`wheel`): the library is the project, so
    it leaves the matrix; the rest of gnnperf's matrix (torch pinned) stays."""
    from packaging.utils import canonicalize_name
    req = {name: versions for name, versions in suite["matrix"]["req"].items()
           if canonicalize_name(name) != canonicalize_name(project)}
    return {**suite, "project": project, "repo": repo, "branches": branches,
            "pythons": [python], "matrix": {**suite["matrix"], "req": req},
            # The library's wheel with its own dependencies, torch held where
            # the matrix put it (a library that wants another torch fails here,
            # in one line, instead of measuring another torch); then gnnperf,
            # without dependencies.
            "install_command": [
                f"in-dir={{env_dir}} python -m pip install --constraint {constraints} "
                f"{{wheel_file}}",
                f"in-dir={{env_dir}} python -m pip install --no-deps {wheel}"]}


def write(repo: str, out: Path, project: str, branches: list[str],
          python: str | None = None) -> Path:
    """Writes ``asv.conf.json`` into :obj:`out` (an empty or new folder)
    with this gnnperf's benchmarks and wheel beside it; returns its path."""
    if out.exists() and any(out.iterdir()):
        raise GnnperfError(f"--out {out} is not empty; give a new folder")
    local = Path(repo).expanduser()
    if "://" not in repo and not repo.startswith("git@"):
        found = subprocess.run(["git", "-C", str(local), "rev-parse", "--git-dir"],
                               capture_output=True, text=True)
        if not local.is_dir() or found.returncode != 0:  # a clone, bare or not
            raise GnnperfError(f"--repo {repo}: not a git clone; give its path or its URL")
        repo = str(local.resolve())
    if not branches:
        raise GnnperfError("--branch: give at least one branch to follow (e.g. master)")
    top = _checkout_top()
    out.mkdir(parents=True, exist_ok=True)
    # The suite with the gnnperf files it loads by path from beside it (its
    # error rules and the case module: benchmarks/suite.py), this version's.
    for folder in ("benchmarks", "gnnperf"):
        shutil.copytree(top / folder, out / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    wheels = out / "wheels"
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                            str(wheels), str(top)], capture_output=True, text=True)
    if built.returncode != 0:
        raise GnnperfError(f"building gnnperf's wheel failed: {built.stderr.strip()[-300:]}")
    wheel, = wheels.glob("gnnperf-*.whl")
    suite = suite_config(top)
    constraints = out / "constraints.txt"
    constraints.write_text(f"torch=={suite['matrix']['req']['torch'][0]}\n")
    python = python or f"{sys.version_info.major}.{sys.version_info.minor}"
    conf = config(suite, repo, project, branches, python, wheel.resolve(), constraints.resolve())
    path = out / "asv.conf.json"
    path.write_text(json.dumps(conf, indent=4) + "\n")
    return path


def add_parser(sub) -> None:
    """``gnnperf asv-init``'s options (registered by :mod:`gnnperf.cli`)."""
    from gnnperf.cli_help import command_parser
    parser = command_parser(
        sub, "asv-init", help="point the asv suite at another repository's commits (a library "
                              "such as torch_geometric), gnnperf fixed",
        description="Writes asv.conf.json into --out: asv builds --repo's commits (the library "
                    "under test), installs this gnnperf (a wheel built now) beside each with "
                    "torch pinned, and measures them with this gnnperf's benchmarks (copied). "
                    "Then: cd OUT && asv run --bench training.TrainStep v2.5.0..v2.6.0 "
                    "(docs/your-library.md).")
    parser.add_argument("--repo", required=True,
                        help="the library's git clone (a path) or its URL")
    parser.add_argument("--out", type=Path, required=True,
                        help="a new folder for the configuration, results and HTML")
    parser.add_argument("--project", default="torch_geometric",
                        help="the library's distribution name, as pip uninstalls it "
                             "(default: %(default)s)")
    parser.add_argument("--branch", action="append", dest="branches",
                        help="a branch asv follows (repeatable; default: master)")
    parser.add_argument("--python", help="the environments' Python, e.g. 3.11 "
                                         "(default: this one's)")


def asv_init_command(args: argparse.Namespace) -> int:
    path = write(args.repo, args.out, args.project, args.branches or ["master"], args.python)
    print(f"wrote {path}; next: cd {path.parent} && asv machine --yes && "
          f"asv run --bench 'training.TrainStep' <old>..<new>")
    return 0


__all__ = ["add_parser", "asv_init_command", "config", "suite_config", "write"]
