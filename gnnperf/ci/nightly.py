"""The nightly's history, kept in git: which commits a nightly measures,
and how what it measured joins the results branch.

asv's results folder is the history every report reads (``asv publish``,
``gnnperf history``). A cache can lose it: a miss looks like a first run,
and a first run's single commit would be saved over months of results. So
the history lives on a branch of the repository (``gnnperf-results`` by
default), which only a trusted job on a GitHub-hosted runner writes:

1. the GPU job checks the branch out read-only, copies its ``results/`` into
   asv's results folder and measures the commits :func:`select` picks;
2. it uploads asv's results folder as an artifact, also after a failed step;
3. the trusted job runs :func:`store`: it validates the artifact's files,
   merges them into the branch (:func:`merge_results`: a value is only ever
   added or replaced by a newer measured value, never removed, so a partial
   or failed run keeps what it measured and loses nothing that was there),
   commits and pushes, fetching and merging again when another push won.

Stdlib only: the workflows call ``python -m gnnperf.ci.nightly`` from a venv
that holds gnnperf without its dependencies.
"""
from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from gnnperf.errors import GnnperfError
from gnnperf.history import asv_results
from gnnperf.history.asv_results import BENCHMARKS_FILE, MACHINE_FILE, PER_PARAMETER, result_rows
from gnnperf.io import check_output

#: The branch that holds the history unless the repository names another.
DEFAULT_BRANCH = "gnnperf-results"
#: The folder of the branch that holds asv's results tree.
RESULTS_FOLDER = "results"
#: A name asv writes (machine folders, result files): nothing else is merged.
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
_COMMIT = re.compile(r"^[0-9a-f]{7,64}$")
#: A results file larger than this is no asv result (asv's are kilobytes).
MAX_FILE_BYTES = 64 * 1024 * 1024


# --- which commits a nightly measures ---------------------------------------

def measured_commits(results_dir: Path, machine: str) -> set[str]:
    """Full hashes of the commits with a result file for :obj:`machine`
    (:func:`gnnperf.history.asv_results.measured_commits`)."""
    return asv_results.measured_commits(Path(results_dir) / machine)


def first_parent_commits(rev: str = "HEAD", repo: Path | str = ".") -> list[str]:
    """:obj:`rev` and its first-parent ancestors, newest first."""
    return _git(Path(repo), "rev-list", "--first-parent", rev).split()


def select(history: list[str], measured: set[str], limit: int) -> list[str]:
    """The commits a nightly benchmarks, newest first.

    The commits of :obj:`history` (newest first) newer than the newest one
    with results; none measured (a first run): the tip only, since the full
    profile takes hours a commit; more than :obj:`limit`: the tip plus
    ``limit - 1`` others spread evenly over the rest, the oldest new one
    included, so a regression in the gap is still bracketed for a bisect.
    :obj:`measured` may hold abbreviated hashes.
    """
    if limit < 1:
        raise GnnperfError(f"--max must be at least 1, not {limit}")
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
        return history[:1]
    if len(new) <= limit:
        return new
    if limit == 1:
        return new[:1]
    rest = new[1:]
    picks = ({round(i * (len(rest) - 1) / (limit - 2)) for i in range(limit - 1)}
             if limit > 2 else {len(rest) - 1})
    return [new[0]] + [rest[i] for i in sorted(picks)]


# --- merging a run's results into the history --------------------------------

@dataclass
class MergeReport:
    """What :func:`merge_results` did, file by file."""
    added: list[str] = field(default_factory=list)
    merged: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)

    def describe(self) -> str:
        text = (f"{len(self.added)} result file(s) added, {len(self.merged)} merged, "
                f"{len(self.unchanged)} unchanged")
        if self.refused:
            text += f"; refused (not asv results): {', '.join(self.refused)}"
        return text


def _load_json(path: Path) -> dict:
    if path.is_symlink() or not path.is_file():
        raise ValueError("not a regular file")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise ValueError("too large for an asv result")
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    return data


def _has_values(row: dict) -> bool:
    result = row.get("result")
    return result is not None and any(value is not None for value in result)


def merge_rows(old: dict, new: dict) -> dict:
    """One benchmark's row: :obj:`new` where it measured something, what
    :obj:`old` had where :obj:`new` has nothing (a failed or skipped
    parameter combination), :obj:`old` whole where :obj:`new` measured
    nothing. Another benchmark version replaces the row, as asv does."""
    if not _has_values(new):
        return old
    if (_has_values(old) and isinstance(old.get("started_at"), (int, float))
            and isinstance(new.get("started_at"), (int, float))
            and new["started_at"] < old["started_at"]):
        return old  # an older measurement (a stale copy) never replaces a newer one
    if not _has_values(old) or old.get("version") != new.get("version"):
        return new
    merged = dict(new)
    if len(old["result"]) != len(new["result"]) or old.get("params") != new.get("params"):
        return merged  # other parameters: the new grid is the benchmark now
    for column in PER_PARAMETER:
        old_values, new_values = old.get(column), new.get(column)
        if old_values is None:
            continue
        values = list(new_values) if new_values is not None else [None] * len(old_values)
        for j, value in enumerate(new["result"]):
            if value is None and j < len(old_values):
                values[j] = old_values[j]
        merged[column] = values
    return merged


def merge_result_file(old: dict, new: dict) -> dict:
    """One commit and environment's results: every benchmark of either,
    merged row by row (:func:`merge_rows`)."""
    if old.get("commit_hash") != new.get("commit_hash"):
        raise ValueError("two commits in one file name")
    columns = list(new.get("result_columns") or old.get("result_columns") or [])
    for column in old.get("result_columns") or []:
        if column not in columns:
            columns.append(column)
    old_rows, new_rows = result_rows(old), result_rows(new)
    rows = dict(old_rows)
    for name, row in new_rows.items():
        rows[name] = merge_rows(old_rows[name], row) if name in old_rows else row
    merged = {**old, **{k: v for k, v in new.items() if v is not None}}
    merged["result_columns"] = columns
    merged["results"] = {name: _trim([row.get(c) for c in columns]) for name, row in rows.items()}
    merged["durations"] = {**(old.get("durations") or {}), **(new.get("durations") or {})}
    return merged


def _trim(row: list) -> list:
    while row and row[-1] is None:  # as asv writes its rows
        row.pop()
    return row


def _write_json(path: Path, data: dict) -> None:
    from gnnperf.io import write_atomic
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, (json.dumps(data, separators=(",", ":"), sort_keys=True) + "\n").encode())


def _check_result(data: dict, name: str) -> None:
    """Raises ValueError unless :obj:`data` has the shape of asv's result
    file (format 2) named :obj:`name`: what :func:`merge_result_file` reads."""
    commit = data.get("commit_hash")
    if not isinstance(commit, str) or not _COMMIT.match(commit):
        raise ValueError("no commit_hash")
    if not name.startswith(commit[:8] + "-"):
        raise ValueError("the file's name is another commit's")
    columns = data.get("result_columns")
    if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
        raise ValueError("no result_columns")
    results = data.get("results")
    if not isinstance(results, dict):
        raise ValueError("no results")
    for row in results.values():
        if not isinstance(row, list) or len(row) > len(columns):
            raise ValueError("a row that is not a list of the columns")
        for column, value in zip(columns, row):
            if column in PER_PARAMETER and value is not None and not isinstance(value, list):
                raise ValueError(f"{column} is not a list")
    if not isinstance(data.get("durations", {}), dict):
        raise ValueError("durations is not a mapping")


def merge_results(source: Path, history: Path, machine: str | None = None) -> MergeReport:
    """Merges asv's results tree :obj:`source` (one run's) into
    :obj:`history` (the results branch's ``results/``). Only what asv writes
    is taken: ``benchmarks.json`` at the top, and in each machine's folder
    its ``machine.json`` and result files, each parsed and checked; anything
    else (another name, a link, a file that is no asv result) is refused and
    listed, never copied; with :obj:`machine`, another machine's folder is
    refused too (one run measures one machine). Nothing in :obj:`history`
    is deleted."""
    report = MergeReport()
    source, history = Path(source), Path(history)
    if not source.is_dir():
        raise GnnperfError(f"{source}: no results folder (did the run upload its results?)")
    for entry in sorted(source.iterdir()):
        name = entry.name
        if entry.is_symlink() or not _SAFE_NAME.match(name) or (
                entry.is_dir() and machine is not None and name != machine):
            report.refused.append(name)
            continue
        if name == BENCHMARKS_FILE:
            _merge_benchmarks(entry, history / name, report)
        elif entry.is_dir():
            for path in sorted(entry.iterdir()):
                _merge_machine_file(path, history / name / path.name, report)
        else:
            report.refused.append(name)
    return report


def _merge_benchmarks(path: Path, target: Path, report: MergeReport) -> None:
    try:
        new = _load_json(path)
        old = _load_json(target) if target.exists() else {}
    except (ValueError, RecursionError):
        report.refused.append(path.name)
        return
    merged = {**old, **new}  # benchmarks the run did not load stay described
    if merged == old:
        report.unchanged.append(path.name)
        return
    (report.merged if old else report.added).append(path.name)
    _write_json(target, merged)


def _checked(path: Path) -> dict | None:
    """A machine folder's file, parsed and checked (a result file against
    asv's format); None where it is not one."""
    try:
        data = _load_json(path)
        if path.name != MACHINE_FILE:
            _check_result(data, path.name)
        return data
    except (ValueError, TypeError, RecursionError):
        return None


def _merge_machine_file(path: Path, target: Path, report: MergeReport) -> None:
    label = f"{path.parent.name}/{path.name}"
    if path.is_symlink() or not _SAFE_NAME.match(path.name) or path.suffix != ".json":
        report.refused.append(label)
        return
    new = _checked(path)
    if new is None:
        report.refused.append(label)
        return
    if not target.exists():
        _write_json(target, new)
        report.added.append(label)
        return
    old = _checked(target) or {}  # the history's file unreadable: the run's replaces it
    merged = ({**old, **new} if path.name == MACHINE_FILE or not old
              else merge_result_file(old, new))
    if merged == old:
        report.unchanged.append(label)
        return
    _write_json(target, merged)
    report.merged.append(label)


# --- the results branch ------------------------------------------------------

#: The token a hosted job pushes the results branch with, handed to git for
#: the remote's commands only (as actions/checkout's extraheader), so the
#: checkout keeps no credentials while anything else runs.
TOKEN_ENV = "GNNPERF_PUSH_TOKEN"


def _git_run(repo: Path, *args: str, remote: bool = False) -> subprocess.CompletedProcess:
    auth: list[str] = []
    token = os.environ.get(TOKEN_ENV)
    if remote and token:
        basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
        auth = ["-c", f"http.extraheader=AUTHORIZATION: basic {basic}"]
    return subprocess.run(["git", *auth, "-C", str(repo), *args], capture_output=True, text=True)


def _git(repo: Path, *args: str, check: bool = True, remote: bool = False) -> str:
    done = _git_run(repo, *args, remote=remote)
    if check and done.returncode != 0:
        raise GnnperfError(f"git {' '.join(args[:3])} failed: {done.stderr.strip()[-300:]}")
    return done.stdout.strip()


def _remote_has(repo: Path, remote: str, branch: str) -> bool:
    done = _git_run(repo, "ls-remote", "--exit-code", "--heads", remote, branch, remote=True)
    if done.returncode not in (0, 2):  # 2: no such branch; anything else: no remote
        raise GnnperfError(f"git ls-remote {remote} failed: {done.stderr.strip()[-300:]}")
    return done.returncode == 0


#: What git says when another push moved the branch first: worth a retry.
_LOST_RACE = ("non-fast-forward", "fetch first", "[rejected]", "stale info")


_BRANCH_README = """\
# gnnperf's results

asv's results of this repository's nightly benchmark runs, one folder per
machine under `results/`. A trusted job on a GitHub-hosted runner merges each
night's run in (`python -m gnnperf.ci.nightly store`); nothing here is edited
by hand, and nothing is ever removed by a run: a failed run adds what it
measured. `asv publish` over `results/` draws the history.
"""


def store(source: Path, repo: Path, branch: str = DEFAULT_BRANCH, remote: str = "origin",
          message: str = "nightly results", push: bool = True, attempts: int = 5,
          machine: str | None = None) -> str:
    """Merges the results tree :obj:`source` into :obj:`branch` of
    :obj:`remote` (created as an orphan branch on the first run; with
    ``push=False``, the local branch) and pushes it; where another push got
    there first, fetches and merges again, up to :obj:`attempts` times. With
    :obj:`machine`, only that machine's folder is taken. Returns a line
    saying what was stored."""
    repo = Path(repo).resolve()
    for attempt in range(1, attempts + 1):
        with tempfile.TemporaryDirectory(prefix="gnnperf-results-") as tmp:
            tree = Path(tmp) / "branch"
            if push and _remote_has(repo, remote, branch):
                _git(repo, "fetch", "--quiet", remote,
                     f"+refs/heads/{branch}:refs/gnnperf/{branch}", remote=True)
                start = f"refs/gnnperf/{branch}"
            elif not push and _git(repo, "rev-parse", "--verify", "--quiet",
                                   f"refs/heads/{branch}", check=False):
                start = f"refs/heads/{branch}"
            else:
                start = None
            _git(repo, "worktree", "add", "--quiet", "--detach", str(tree),
                 *([start] if start else []))
            try:
                if start is None:  # the first run: an orphan commit of its own
                    _git(tree, "checkout", "--quiet", "--orphan", f"gnnperf-results-{os.getpid()}-{attempt}")
                    _git(tree, "rm", "-r", "-q", "--force", "--ignore-unmatch", ".")
                    (tree / "README.md").write_text(_BRANCH_README)
                report = merge_results(source, tree / RESULTS_FOLDER, machine)
                _git(tree, "add", "-A")
                if not _git(tree, "status", "--porcelain"):
                    return f"{branch}: nothing new ({report.describe()})"
                _git(tree, "-c", "user.name=gnnperf-results",
                     "-c", "user.email=gnnperf-results@users.noreply.github.com",
                     "commit", "--quiet", "-m", f"{message}: {report.describe()}")
                head = _git(tree, "rev-parse", "HEAD")
                if not push:
                    _git(repo, "update-ref", f"refs/heads/{branch}", head)
                    return f"{branch}: committed locally ({report.describe()})"
                pushed = _git_run(tree, "push", "--quiet", remote, f"{head}:refs/heads/{branch}",
                                  remote=True)
                if pushed.returncode == 0:
                    return f"{branch}: pushed ({report.describe()})"
                if attempt == attempts or not any(s in pushed.stderr for s in _LOST_RACE):
                    raise GnnperfError(f"push to {remote} {branch} failed (attempt {attempt}): "
                                       f"{pushed.stderr.strip()[-300:]}")
            finally:
                _git(repo, "worktree", "remove", "--force", str(tree), check=False)
                if start is None:
                    _git(repo, "branch", "-D", f"gnnperf-results-{os.getpid()}-{attempt}",
                         check=False)
        time.sleep(min(2 ** attempt, 30))  # another push won: let it land, then merge again
    raise AssertionError("unreachable")


def _digests(folder: Path) -> dict[str, str]:
    return {str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(folder.rglob("*.json")) if path.is_file()}


def seed(history: Path, results_dir: Path, manifest: Path | None = None) -> int:
    """Copies the results branch's ``results/`` (:obj:`history`, absent on a
    first run) into asv's :obj:`results_dir`, so ``--skip-existing-commits``
    and :func:`select` see what is measured; with :obj:`manifest`, writes
    there what each copied file held, for :func:`collect`. Returns the
    files copied."""
    history, results_dir = Path(history), Path(results_dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    if history.is_dir():
        shutil.copytree(history, results_dir, dirs_exist_ok=True)
    if manifest is not None:
        Path(manifest).write_text(json.dumps(_digests(results_dir)))
    return sum(1 for p in history.rglob("*.json")) if history.is_dir() else 0


def collect(results_dir: Path, machine: str, manifest: Path, out: Path) -> int:
    """Copies into :obj:`out` what the run measured: ``benchmarks.json`` and
    :obj:`machine`'s files that are new or changed since :func:`seed` wrote
    :obj:`manifest`, so the upload holds this run's values only (never a
    stale copy of the history, nor another machine's). Returns the files."""
    seeded = json.loads(Path(manifest).read_text()) if Path(manifest).is_file() else {}
    results_dir, out = Path(results_dir), Path(out)
    copied = 0
    for name, digest in _digests(results_dir).items():
        top = Path(name).parts[0]
        if (top != machine and name != BENCHMARKS_FILE) or seeded.get(name) == digest:
            continue
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(results_dir / name, out / name)
        copied += 1
    return copied


# --- the command -------------------------------------------------------------

def add_parser(sub) -> None:
    """``gnnperf results``'s options (registered by :mod:`gnnperf.cli`)."""
    from gnnperf.cli_help import command_parser
    parser = command_parser(
        sub, "results", results_command, help="the nightly's asv history in git: pick commits, seed, store",
        description="The steps of the nightly workflow (gnnperf adopt writes it): which "
                    "commits to measure, the results branch copied into asv's results "
                    "folder, and a run's results merged into the branch (never removing "
                    "anything) and pushed.")
    add_steps(parser)


def add_steps(parser: argparse.ArgumentParser) -> None:
    """The steps' own options, under :obj:`parser`."""
    steps = parser.add_subparsers(dest="step", required=True)
    pick = steps.add_parser("select", help="the commits the nightly measures, newest first")
    pick.add_argument("--results", type=Path, required=True, help="asv's results folder")
    pick.add_argument("--machine", required=True, help="asv's --machine name")
    pick.add_argument("--rev", default="HEAD", help="the branch tip (default: %(default)s)")
    pick.add_argument("--repo", type=Path, default=Path("."), help="the git repository")
    pick.add_argument("--max", type=int, default=3, dest="limit",
                      help="at most this many commits (default: %(default)s)")
    pick.add_argument("--output", type=Path, required=True, help="a HASHFILE for asv run")
    sow = steps.add_parser("seed", help="copy the results branch's results/ into asv's folder")
    sow.add_argument("--history", type=Path, required=True,
                     help="the results branch's results/ folder (absent: a first run)")
    sow.add_argument("--results", type=Path, required=True, help="asv's results folder")
    sow.add_argument("--manifest", type=Path,
                     help="write what was copied here, for the collect step")
    gather = steps.add_parser("collect", help="copy what this run measured, for the upload")
    gather.add_argument("--results", type=Path, required=True, help="asv's results folder")
    gather.add_argument("--machine", required=True, help="asv's --machine name")
    gather.add_argument("--manifest", type=Path, required=True, help="what seed wrote")
    gather.add_argument("--out", type=Path, required=True, help="a new folder to upload")
    keep = steps.add_parser("store", help="merge a run's results into the results branch, push")
    keep.add_argument("--from", dest="source", type=Path, required=True,
                      help="the run's asv results folder (the nightly's artifact)")
    keep.add_argument("--repo", type=Path, default=Path("."),
                      help="a clone whose remote receives the branch (default: here)")
    keep.add_argument("--machine", help="take this machine's folder only (the run's)")
    keep.add_argument("--branch", default=DEFAULT_BRANCH, help="(default: %(default)s)")
    keep.add_argument("--remote", default="origin", help="(default: %(default)s)")
    keep.add_argument("--message", default="nightly results", help="the commit's subject")
    keep.add_argument("--no-push", action="store_true", help="commit to the local branch only")


def results_command(args: argparse.Namespace) -> int:
    if args.step == "select":
        check_output(args.output, "--output")
        measured = measured_commits(args.results, args.machine)
        history = first_parent_commits(args.rev, args.repo)
        chosen = select(history, measured, args.limit)
        args.output.write_text("".join(f"{c}\n" for c in chosen), encoding="utf-8")
        first = chosen == history[:1] and len(history) > 1 and not measured
        print(f"{len(measured)} commit(s) with results on {args.machine!r}; "
              f"{'first run: the tip only' if first else 'new since the last measured one'}; "
              f"benchmarking {len(chosen)} (at most {args.limit}): "
              + (" ".join(c[:12] for c in chosen) or "none, nothing new"))
    elif args.step == "seed":
        copied = seed(args.history, args.results, args.manifest)
        print(f"{copied} result file(s) from the results branch" if copied
              else "no results branch yet: a first run")
    elif args.step == "collect":
        print(f"{collect(args.results, args.machine, args.manifest, args.out)} file(s) measured "
              f"by this run")
    else:
        print(store(args.source, args.repo, args.branch, args.remote, args.message,
                    push=not args.no_push, machine=args.machine))
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m gnnperf.ci.nightly``: the same steps without the rest of
    gnnperf's command line (the workflows' venv holds gnnperf alone)."""
    parser = argparse.ArgumentParser(prog="python -m gnnperf.ci.nightly")
    add_steps(parser)
    args = parser.parse_args(argv)
    try:
        return results_command(args)
    except GnnperfError as exc:
        print(f"gnnperf results: error: {exc}", file=sys.stderr)
        return 2


__all__ = ["DEFAULT_BRANCH", "MergeReport", "TOKEN_ENV", "add_parser", "collect",
           "first_parent_commits",
           "measured_commits", "merge_result_file", "merge_results", "merge_rows",
           "results_command", "seed", "select", "store"]


if __name__ == "__main__":
    sys.exit(main())
