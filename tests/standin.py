"""A stand-in for a repository that adopts gnnperf: a small git repository
holding a model package (``mypkg``, a two-layer GCN behind
``mypkg.models:build``) with a pyproject, two commits on ``main`` tagged
``v0.1`` and ``v0.2``. The second commit changes the model's step on
purpose only where a test asks for it (:obj:`slower_head`)."""
from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

PACKAGE = "mypkg"
MODEL = "mypkg.models:build"

_PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "mypkg"
version = "{version}"
requires-python = ">=3.10"
dependencies = ["torch", "torch-geometric"]

[tool.setuptools.packages.find]
include = ["mypkg*"]
"""

_MODELS = '''\
"""The team's model: a two-layer GCN, (in, hidden, out, layers) -> Module."""
import torch
from torch_geometric.nn import GCNConv


class Net(torch.nn.Module):
    def __init__(self, in_channels, hidden, out_channels, layers):
        super().__init__()
        sizes = [in_channels] + [hidden] * (layers - 1) + [out_channels]
        self.convs = torch.nn.ModuleList(
            GCNConv(a, b) for a, b in zip(sizes[:-1], sizes[1:]))

    def forward(self, x, edge_index):
        for i, conv in enumerate(self.convs):
            x = conv(x, edge_index)
            if i < len(self.convs) - 1:
                x = torch.relu(x){extra}
        return x


def build(in_channels, hidden, out_channels, layers):
    return Net(in_channels, hidden, out_channels, layers)
'''

#: What :func:`make_model_repo`'s second commit adds to every hidden layer
#: when it is to be slower: two more elementwise ops a layer (more ATen ops,
#: more time), the output unchanged.
SLOWER = "\n                x = x * 1.0 + 0.0"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def _write(repo: Path, version: str, extra: str) -> None:
    (repo / PACKAGE).mkdir(parents=True, exist_ok=True)
    (repo / PACKAGE / "__init__.py").write_text(f'__version__ = "{version}"\n')
    (repo / PACKAGE / "models.py").write_text(_MODELS.replace("{extra}", extra))
    (repo / "pyproject.toml").write_text(_PYPROJECT.format(version=version))


def make_model_repo(path: Path, slower_head: bool = False) -> Path:
    """Creates the stand-in at :obj:`path` (a new folder) and returns it:
    ``main`` with two commits, ``v0.1`` and ``v0.2``; with
    :obj:`slower_head` the second commit adds :data:`SLOWER`, otherwise it
    changes the package's version only."""
    path.mkdir(parents=True)
    _git(path, "init", "-q", "-b", "main")
    _git(path, "config", "user.email", "team@example.com")
    _git(path, "config", "user.name", "team")
    (path / ".gitignore").write_text(textwrap.dedent("""\
        __pycache__/
        *.egg-info/
        build/
        .asv/
        """))
    _write(path, "0.1", "")
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "mypkg 0.1: a GCN")
    _git(path, "tag", "v0.1")
    _write(path, "0.2", SLOWER if slower_head else "")
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "mypkg 0.2")
    _git(path, "tag", "v0.2")
    return path


__all__ = ["MODEL", "PACKAGE", "SLOWER", "make_model_repo"]


def faulted_history(dest: Path, faults_at: dict[int, tuple[str, tuple]],
                    commits: int) -> tuple[Path, list[str]]:
    """A copy of this checkout as a git repository at :obj:`dest`: GOOD,
    then :obj:`commits` commits, commit ``n`` injecting
    ``gnnperf.gate.faults.inject(repo, *args)`` where ``faults_at[n]`` is
    ``(what it does, args)``, its subject ``commit n: <what it does>`` (each
    commit also appends to NOTES, so none is empty). Returns the repository
    and its commits, GOOD first."""
    import os
    from gnnperf import gate
    from gnnperf.gate import faults
    repo = gate.copy_tree(Path(__file__).resolve().parents[1], dest)
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@localhost",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@localhost")

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], env=env, check=True,
                              capture_output=True, text=True).stdout.strip()

    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("commit", "-q", "-m", "good")
    hashes = [git("rev-parse", "HEAD")]
    for n in range(1, commits + 1):
        subject = f"commit {n}"
        if n in faults_at:
            does, args = faults_at[n]
            faults.inject(repo, *args)
            subject += f": {does}"
        with open(repo / "NOTES", "a") as notes:
            notes.write(f"{n}\n")
        git("add", "-A")
        git("commit", "-q", "-m", subject)
        hashes.append(git("rev-parse", "HEAD"))
    return repo, hashes
