"""asv's results folder, read in one place: its machine folders, the
parameter names in ``benchmarks.json``, each result file's rows and the
value of each parameter combination, and the series ``gnnperf history``
judges. Every part of gnnperf (and its tools) that reads what asv measured
reads it here.

The folder, as asv (>= 0.5, results format 2) writes it::

    results/
        benchmarks.json              every benchmark: its param_names, version, ...
        <machine>/
            machine.json             the machine's description ("machine": its name)
            <commit[:8]>-<env>.json  one commit in one environment: result_columns and,
                                     per benchmark, a row of those columns

Stdlib only: :mod:`gnnperf.ci.nightly` reads it from a venv that holds
gnnperf without its dependencies.
"""
from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from gnnperf.errors import GnnperfError

#: asv writes these beside the per-commit result files of a machine (the
#: first) and at the top of the results folder (the second).
MACHINE_FILE = "machine.json"
BENCHMARKS_FILE = "benchmarks.json"
#: asv's results format the reader knows (asv >= 0.5).
FORMAT_VERSION = 2
#: A row's columns where a result file names none.
DEFAULT_COLUMNS = ("result", "params", "version")
#: The columns of a result row that hold one value per parameter combination.
PER_PARAMETER = frozenset({"result", "stats_ci_99_a", "stats_ci_99_b", "stats_q_25",
                           "stats_q_75", "stats_number", "stats_repeat", "samples"})
#: asv figures that are exact counts (gnnperf.measure.workcount): a change
#: in them is any change of value, no detector needed, and it names what
#: moved when a time moved at the same commit.
WORK_METRICS = ("track_aten_ops", "track_flops", "track_profiled_ops", "track_bytes_allocated",
                "track_peak_bytes", "track_compiled_graphs", "track_graph_breaks",
                "track_recompiles")


# ------------------------------------------------------------ one result file

@dataclass
class ResultFile:
    r"""One asv result file: one commit's results in one environment.

    Args:
        path: the file.
        commit: the commit's full hash.
        env: asv's environment name.
        date: the commit's date (ms since the epoch, asv's; 0 where absent).
        started_at: when the run started (ms since the epoch), or ``None``.
        rows: benchmark name -> its row, ``{column: value}``
            (:func:`result_rows`).
    """
    path: Path
    commit: str
    env: str
    date: int
    started_at: int | None
    rows: dict[str, dict]


def result_rows(data: dict) -> dict[str, dict]:
    """A result file's rows by benchmark, each as ``{column: value}``.

    Args:
        data: the parsed result file.

    Returns:
        Benchmark name -> its row; a row shorter than the columns lacks the
        trailing ones (asv leaves off trailing nulls).
    """
    columns = data.get("result_columns") or DEFAULT_COLUMNS
    return {name: dict(zip(columns, row)) for name, row in (data.get("results") or {}).items()}


def combinations(row: dict) -> list[tuple[tuple[str, ...], float | None]]:
    """Each parameter combination of a row with its value, in asv's order
    (the product of the parameters' values, each value a repr: ``"'cora'"``).

    Args:
        row: one benchmark's row (:func:`result_rows`).

    Returns:
        ``(combination, value)`` pairs: a number, ``None`` where asv recorded
        a failure (a whole row of failures is stored as one null) or NaN for
        an n/a (a variant the commit lacks, a combination not run). A
        combination past the stored values is left out; a row whose result
        is no list gives none.
    """
    params = row.get("params") or []
    combos = list(itertools.product(*params)) if params else [()]
    values = row.get("result")
    if values is None:
        values = [None] * len(combos)
    if not isinstance(values, list):
        return []
    return [(combo, values[i]) for i, combo in enumerate(combos) if i < len(values)]


def _load(path: Path) -> object:
    """The JSON in :obj:`path`; ValueError where it is none (nesting too
    deep for the parser included)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except RecursionError:
        raise ValueError("nested too deeply") from None


def read_result_file(path: Path) -> ResultFile | None:
    """One file of a machine's folder, parsed.

    Args:
        path: a ``.json`` file of a machine's folder.

    Returns:
        The result file, or ``None`` where the file is no result file (the
        machine's ``machine.json``, a file without a commit).

    Raises:
        GnnperfError: the file is not JSON, or is another results format
            than :data:`FORMAT_VERSION` (each with the fix).
    """
    path = Path(path)
    try:
        data = _load(path)
    except ValueError as exc:
        raise GnnperfError(f"{path}: not JSON ({exc}); delete it or re-run asv") from None
    if path.name == MACHINE_FILE or not isinstance(data, dict) \
            or not isinstance(data.get("commit_hash"), str) or not data["commit_hash"]:
        return None
    if data.get("version") != FORMAT_VERSION:
        raise GnnperfError(f"{path}: asv results format {data.get('version')}, not "
                           f"{FORMAT_VERSION}; upgrade it with asv >= 0.5: asv update")
    return ResultFile(path, data["commit_hash"], data.get("env_name", ""),
                      int(data.get("date") or 0), data.get("started_at"), result_rows(data))


def result_files(machine_dir: Path) -> list[ResultFile]:
    """Every result file of one machine's folder, in file-name order.

    Args:
        machine_dir: ``<results>/<machine>``.

    Returns:
        The parsed result files (none where the folder is absent).

    Raises:
        GnnperfError: a file is not JSON or of another results format.
    """
    machine_dir = Path(machine_dir)
    files = (read_result_file(path) for path in sorted(machine_dir.glob("*.json")))
    return [f for f in files if f is not None]


def commit_files(results_dir: Path, commit: str) -> list[ResultFile]:
    """Every machine's result files of one commit.

    Args:
        results_dir: asv's results folder.
        commit: the commit's hash, full or abbreviated (8 characters at least,
            as asv names its files).

    Returns:
        The result files of :obj:`commit`, machine by machine.
    """
    results_dir = Path(results_dir)
    found = []
    for machine in machines(results_dir):
        for path in sorted((results_dir / machine).glob(f"{commit[:8]}-*.json")):
            f = read_result_file(path)
            if f is not None and f.commit.startswith(commit):
                found.append(f)
    return found


def measured_commits(machine_dir: Path) -> set[str]:
    """The commits with a result file in one machine's folder, whatever its
    results format; a file that cannot be read measures nothing.

    Args:
        machine_dir: ``<results>/<machine>``.

    Returns:
        Full commit hashes (none where the folder is absent).
    """
    hashes: set[str] = set()
    for path in Path(machine_dir).glob("*.json"):
        if path.name in (MACHINE_FILE, BENCHMARKS_FILE):
            continue
        try:
            commit = _load(path).get("commit_hash")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(commit, str) and commit:
            hashes.add(commit)
    return hashes


# ------------------------------------------------------------ the folder

def machines(results_dir: Path) -> list[str]:
    """The machine folders of asv's results folder that hold results.

    Args:
        results_dir: asv's results folder.

    Returns:
        The machines' names, sorted; none where asv wrote no results folder
        (a run that failed before measuring anything).
    """
    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        return []
    return sorted(p.name for p in results_dir.iterdir()
                  if p.is_dir() and any(p.glob("*.json")))


def machine_name(machine_dir: Path) -> str:
    """The name a machine folder's ``machine.json`` gives its machine.

    Args:
        machine_dir: ``<results>/<machine>``.

    Raises:
        GnnperfError: the folder has no readable ``machine.json``.
    """
    path = Path(machine_dir) / MACHINE_FILE
    try:
        return str(_load(path)["machine"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise GnnperfError(f"{path}: no machine name ({exc!r}); point it at a machine's "
                           f"folder of asv's results") from None


def param_names(results_dir: Path) -> dict[str, list[str]]:
    """Each benchmark's parameter names, from the folder's ``benchmarks.json``.

    Args:
        results_dir: asv's results folder.

    Returns:
        Benchmark name -> its parameter names (empty where the file is
        absent or unreadable).
    """
    try:
        listing = _load(Path(results_dir) / BENCHMARKS_FILE)
    except (OSError, ValueError):
        return {}
    return {name: b.get("param_names", []) for name, b in listing.items() if isinstance(b, dict)}


# ------------------------------------------------------------ the series

@dataclass
class Series:
    r"""One benchmark at one parameter combination in one environment: its
    values in commit order.

    Args:
        name: asv's name of the series, e.g.
            ``training.TrainStep.time_train_step('cora', 'baseline', 'gcn')``.
        benchmark: the benchmark's name.
        params: parameter name -> value, as asv stores it (``"'cora'"``).
        commits: commit hashes, oldest first.
        values: the figure at each commit.
        weights: asv's weight of each point (2 / its 99% interval's width),
            ``None`` where asv has no interval.
        env: asv's environment name.
        failed: the commits where asv recorded a failure (no value: the
            benchmark raised, e.g. the history figure's environment guard,
            or its environment did not build), oldest first. An n/a (a
            variant the commit lacks) is neither a point nor a failure.
    """
    name: str
    benchmark: str
    params: dict[str, str]
    commits: list[str] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    weights: list[float | None] = field(default_factory=list)
    env: str = ""
    failed: list[str] = field(default_factory=list)

    @property
    def exact(self) -> bool:
        """An exact work metric: counted, not timed."""
        return self.benchmark.rsplit(".", 1)[-1] in WORK_METRICS


@dataclass
class Results:
    r"""What one machine's asv results folder holds, in commit order.

    Args:
        machine: asv's machine name.
        series: every series with at least one value or failure.
        order: ``"git"`` (``git rev-list --all --date-order``, asv publish's
            order) or ``"date"`` (the results files' commit dates).
        dates: commit hash -> its date (ms since the epoch, asv's).
        commits: every commit with results, in that order.
        dropped: points left out because a later result carries another
            benchmark version (asv starts a new history then).
    """
    machine: str
    series: list[Series]
    order: str
    dates: dict[str, int]
    commits: list[str] = field(default_factory=list)
    dropped: int = 0


def _git_order(repo: Path | None) -> dict[str, int] | None:
    """Commit -> position in ``git rev-list --all --date-order --reverse``
    (what ``asv publish`` orders by), or None without a repository."""
    import subprocess
    if repo is None:
        return None
    try:
        out = subprocess.run(["git", "-C", str(repo), "rev-list", "--all", "--date-order",
                              "--reverse"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return {commit: i for i, commit in enumerate(out.split())}


def _weight(row: dict, i: int) -> float | None:
    """asv's weight of a row's :obj:`i`-th value: 2 / its 99% interval's
    width, ``None`` without a finite interval."""
    ci_a, ci_b = row.get("stats_ci_99_a") or [], row.get("stats_ci_99_b") or []
    a = ci_a[i] if i < len(ci_a) else None
    b = ci_b[i] if i < len(ci_b) else None
    finite = a is not None and b is not None and math.isfinite(a) and math.isfinite(b)
    return 2 / abs(b - a) if finite and b != a else None


def read_asv_results(results_dir: Path, machine: str | None = None,
                     repo: Path | None = None) -> Results:
    """Reads one machine of asv's results folder (format version 2, asv >=
    0.5): each parameter combination of each benchmark is a series of its
    own.

    Args:
        results_dir: asv's results folder (``results_dir`` of asv.conf.json).
        machine: the machine; ``None`` where the folder holds one.
        repo: the git repository the results are of: the commits are in its
            git order where every one is in it, else in date order.

    Returns:
        The machine's series, commits and dates.

    Raises:
        GnnperfError: the folder is not one, holds no such machine (or
            several and none named) or no results, or a file is not one
            asv writes; each with the fix.
    """
    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        raise GnnperfError(f"--results {results_dir}: no such folder; point it at asv.conf.json's "
                           f"results_dir (e.g. .asv/results) after an asv run")
    found = machines(results_dir)
    if machine is None:
        if len(found) != 1:
            raise GnnperfError(
                f"--results {results_dir}: "
                + (f"{len(found)} machines ({', '.join(found)}); name one with --machine"
                   if found else "no machine folder with results; run asv first"))
        machine = found[0]
    elif machine not in found:
        raise GnnperfError(f"--machine {machine}: not in {results_dir} (there: "
                           f"{', '.join(found) or 'none'})")
    names = param_names(results_dir)
    files = result_files(results_dir / machine)
    if not files:
        raise GnnperfError(f"--results {results_dir}: no results for machine {machine}; "
                           f"run asv first")
    dates = {f.commit: f.date for f in files}
    position = _git_order(repo)
    order = "git"
    if position is None or any(c not in position for c in dates):
        position = {c: i for i, c in enumerate(sorted(dates, key=lambda c: (dates[c], c)))}
        order = "date"
    files.sort(key=lambda f: position[f.commit])
    envs = {f.env for f in files}
    series: dict[tuple, Series] = {}
    # key -> (commit, value or None for a failure, weight, asv's version), in order.
    points: dict[tuple, list[tuple[str, float | None, float | None, object]]] = {}
    for f in files:
        env = f.env if len(envs) > 1 else ""
        for bench, row in f.rows.items():
            pnames = names.get(bench) or [f"p{i}" for i in range(len(row.get("params") or []))]
            for i, (combo, value) in enumerate(combinations(row)):
                # asv writes a failure as null and an n/a (or a combination
                # not run) as NaN: a failure is a gap to report, an n/a nothing.
                if value is not None and (not isinstance(value, (int, float))
                                          or value != value):
                    continue
                key = (bench, combo, env)
                name = (bench + (f"({', '.join(combo)})" if combo else "")
                        + (f" [{env}]" if env else ""))
                series.setdefault(key, Series(name, bench, dict(zip(pnames, combo)), env=env))
                points.setdefault(key, []).append(
                    (f.commit, None if value is None else float(value), _weight(row, i),
                     row.get("version")))
    dropped = 0
    for key, s in series.items():
        # asv's benchmark version: a new one restarts the history (its
        # figure means something else), so only the latest version's points.
        latest = points[key][-1][3]
        kept = [p for p in points[key] if p[3] == latest]
        dropped += sum(p[1] is not None for p in points[key]) - sum(p[1] is not None
                                                                    for p in kept)
        s.commits = [c for c, v, _, _ in kept if v is not None]
        s.values = [v for _, v, _, _ in kept if v is not None]
        s.weights = [w for _, v, w, _ in kept if v is not None]
        s.failed = [c for c, v, _, _ in kept if v is None]
    commits = list(dict.fromkeys(f.commit for f in files))
    return Results(machine, list(series.values()), order, dates, commits, dropped)


__all__ = ["BENCHMARKS_FILE", "DEFAULT_COLUMNS", "FORMAT_VERSION", "MACHINE_FILE",
           "PER_PARAMETER", "ResultFile", "Results", "Series", "WORK_METRICS", "combinations",
           "commit_files", "machine_name", "machines", "measured_commits", "param_names",
           "read_asv_results", "read_result_file", "result_files", "result_rows"]
