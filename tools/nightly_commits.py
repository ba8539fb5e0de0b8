#!/usr/bin/env python3
"""Which commits the nightly GPU job benchmarks, and which Pythons asv needs.

The full asv profile takes hours per commit, so ``asv run NEW`` on a results
folder that is empty (a fresh repository, an expired cache) would queue every
commit of main and never finish inside the job's time limit. This script
bounds the nightly run:

* the commits are main's first-parent history from ``--rev`` back to the
  newest commit that already has results for ``--machine`` (not included);
* none has results (the first run): ``--rev`` only;
* more than ``--max`` of them: ``--rev`` plus ``--max - 1`` others spread
  evenly over the rest, so a regression in the gap is still bracketed for
  ``asv find`` / ``gnnperf bisect``;
* newest first, so the commit a reader cares about is measured before the
  job's time runs out.

The hashes go to ``--output``, one a line, for ``asv run HASHFILE:<file>``
(with ``--skip-existing-commits`` as a second guard); an empty file means
nothing is new.

``pythons`` prints asv.conf.json's ``"pythons"``, one a line, for
actions/setup-python, so the workflow installs exactly the interpreters that
asv builds its environments from; without ``"pythons"`` asv builds with the
Python that runs asv, and the command prints ``--default`` (the workflow's
choice). asv.conf.json holds // comments, as asv's own JSON5 reader allows;
this reader is stdlib only, because it runs before any package is installed.

Stdlib only; ``tests/test_workflows.py`` tests it.

Usage::

    python tools/nightly_commits.py select --results .asv/results \\
        --machine gnnperf-gpu --rev HEAD --max 3 --output nightly-commits.txt
    python tools/nightly_commits.py pythons --default 3.11 [--config asv.conf.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

# asv writes these beside the per-commit result files of a machine.
_NOT_RESULTS = {"machine.json", "benchmarks.json"}


def measured_commits(results_dir: Path, machine: str) -> set[str]:
    """Full hashes of the commits with a result file for ``machine``."""
    folder = Path(results_dir) / machine
    hashes: set[str] = set()
    if not folder.is_dir():
        return hashes
    for path in folder.glob("*.json"):
        if path.name in _NOT_RESULTS:
            continue
        try:
            commit = json.loads(path.read_text(encoding="utf-8")).get("commit_hash")
        except (OSError, ValueError, AttributeError):
            commit = None  # an unreadable file measures nothing
        if isinstance(commit, str) and commit:
            hashes.add(commit)
    return hashes


def first_parent_commits(rev: str = "HEAD", repo: Path | str = ".") -> list[str]:
    """``rev`` and its first-parent ancestors, newest first."""
    out = subprocess.run(
        ["git", "-C", str(repo), "rev-list", "--first-parent", rev],
        check=True, capture_output=True, text=True,
    ).stdout
    return out.split()


def select(history: list[str], measured: set[str], limit: int) -> list[str]:
    """The commits to benchmark, newest first (see the module docstring).

    ``history`` is newest first; ``measured`` may hold abbreviated hashes
    (asv's file names carry 8 characters) or full ones.
    """
    if limit < 1:
        raise ValueError(f"--max must be at least 1, not {limit}")
    if not history:
        return []

    def is_measured(commit: str) -> bool:
        return any(commit.startswith(m) or m.startswith(commit) for m in measured)

    new: list[str] = []
    for commit in history:
        if is_measured(commit):
            break
        new.append(commit)
    else:
        # No commit of this history has results on this machine: the first
        # run, which measures the tip only instead of the whole history.
        return history[:1]
    if len(new) <= limit:
        return new
    if limit == 1:
        return new[:1]
    # The tip, then limit - 1 commits spread evenly over the rest, the
    # oldest new commit included.
    rest = new[1:]
    picks = {round(i * (len(rest) - 1) / (limit - 2)) for i in range(limit - 1)} if limit > 2 else {len(rest) - 1}
    return [new[0]] + [rest[i] for i in sorted(picks)]


def _strip_js_comments(text: str) -> str:
    """``text`` without // and /* */ comments outside JSON strings."""
    out = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_string = False
            i += 1
        elif c == '"':
            in_string = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def asv_pythons(config: Path, default: str | None = None) -> list[str]:
    """asv.conf.json's ``"pythons"``; ``[default]`` where it lists none (asv
    then builds with the Python that runs it, the one the workflow sets up)."""
    data = json.loads(_strip_js_comments(Path(config).read_text(encoding="utf-8")))
    pythons = data.get("pythons")
    if pythons:
        return [str(p) for p in pythons]
    if default:
        return [default]
    raise ValueError(f"{config} lists no \"pythons\" and no --default was given")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sel = sub.add_parser("select", help="the commits the nightly run benchmarks")
    sel.add_argument("--results", type=Path, default=Path(".asv/results"))
    sel.add_argument("--machine", required=True, help="asv's --machine name")
    sel.add_argument("--rev", default="HEAD")
    sel.add_argument("--max", type=int, default=3, dest="limit")
    sel.add_argument("--output", type=Path, required=True, help="a HASHFILE for asv run")
    py = sub.add_parser("pythons", help="asv.conf.json's pythons, one a line")
    py.add_argument("--config", type=Path, default=Path("asv.conf.json"))
    py.add_argument("--default", help="the version to set up where asv.conf.json lists none")
    args = parser.parse_args(argv)

    if args.command == "pythons":
        try:
            print("\n".join(asv_pythons(args.config, args.default)))
        except (OSError, ValueError) as err:
            print(f"nightly_commits: {err}", file=sys.stderr)
            return 2
        return 0

    measured = measured_commits(args.results, args.machine)
    history = first_parent_commits(args.rev)
    chosen = select(history, measured, args.limit)
    args.output.write_text("".join(f"{c}\n" for c in chosen), encoding="utf-8")
    first = not any(c in measured for c in history)
    print(f"nightly_commits: {len(measured)} commit(s) with results on {args.machine!r}; "
          f"{'first run: the tip only' if first else 'new since the last measured one'}; "
          f"benchmarking {len(chosen)} (at most {args.limit}): "
          + (" ".join(c[:12] for c in chosen) or "none, nothing new"),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
