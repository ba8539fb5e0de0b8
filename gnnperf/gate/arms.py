"""The gate's arms (a tree under a Python environment) and the worker
processes that measure them: exact work metrics, and interleaved timing."""
from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from gnnperf import warm
from gnnperf.measure.case import Case
from gnnperf.errors import GnnperfError

WORKER = Path(__file__).resolve().with_name("worker.py")
#: The instrument both arms are measured with: this checkout's measure/case.py and measure/workcount.py.
INSTRUMENT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Arm:
    """What one side of a comparison runs: gnnperf from :obj:`tree`, under
    the interpreter :obj:`python` (another virtual environment: other torch
    or torch-geometric releases). :obj:`commit` is the commit the tree holds
    (``None``: read from the tree's own git checkout, if any).
    :obj:`library` is a library under test's source tree (one commit of
    it, exported, or its working tree) put first on the arm's
    ``PYTHONPATH``: gnnperf fixed, the library's commit the arm's
    (``gnnperf bisect --library-repo``, and ``gnnperf gate`` in a model
    repository; see :func:`library_arm`). :obj:`commit` is then the
    library's commit."""
    tree: Path
    python: str = sys.executable
    label: str = ""  # what the tree is, e.g. the git ref it was exported from
    commit: str | None = None
    library: Path | None = None

    def describe(self) -> str:
        where = f"{self.label} ({self.tree})" if self.label else str(self.tree)
        if self.library is not None:
            where += f" with {self.library} first on the path"
        return where if self.python == sys.executable else f"{where} under {self.python}"

    def env(self, base: dict | None = None) -> dict:
        """:obj:`base` (default :func:`~gnnperf.warm.worker_env`) with this
        arm's library first on ``PYTHONPATH`` and its workers started cold:
        never forked from a server that imported another commit of the
        library, and both arms of a pair started alike (one forked, one
        cold would differ in more than the library)."""
        env = dict(base if base is not None else warm.worker_env())
        if self.library is not None:
            env["PYTHONPATH"] = os.pathsep.join(
                [str(self.library), *filter(None, [env.get("PYTHONPATH")])])
            env[warm.COLD_ENV] = "1"
        return env


def git_state(tree: Path) -> tuple[str | None, bool | None]:
    """The commit a checkout's HEAD is at and whether its tracked files
    differ from it; ``(None, None)`` for a tree that is not a checkout's top."""
    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(tree), *args], capture_output=True, text=True)
    top = git("rev-parse", "--show-toplevel")
    if top.returncode != 0 or Path(top.stdout.strip()).resolve() != Path(tree).resolve():
        return None, None
    head = git("rev-parse", "HEAD")
    if head.returncode != 0:
        return None, None
    dirty = git("status", "--porcelain")  # untracked, not ignored files count: they are copied
    return head.stdout.strip(), bool(dirty.stdout.strip())


def git_top(where: Path | str) -> Path | None:
    """The git top level of :obj:`where`, or ``None`` outside a checkout."""
    proc = subprocess.run(["git", "-C", str(where), "rev-parse", "--show-toplevel"],
                          capture_output=True, text=True)
    return Path(proc.stdout.strip()).resolve() if proc.returncode == 0 else None


def gnnperf_checkout(where: Path | str = ".") -> Path | None:
    """The top of the gnnperf checkout :obj:`where` is in, or ``None`` outside
    one (no checkout, or another project's)."""
    top = git_top(where)
    return top if top is not None and (top / "gnnperf" / "gate" / "worker.py").is_file() else None


def is_gnnperf_tree(tree: Path | str) -> bool:
    """Whether :obj:`tree` holds gnnperf's package with its variant registry
    at its top (a tree the gate can run as an arm), not another project."""
    package = Path(tree) / "gnnperf"
    return (package / "__init__.py").is_file() and (package / "variants").is_dir()


def installed_tree(dest: Path) -> Path:
    """A tree holding a copy of the gnnperf this process runs (a pip install,
    no checkout): both arms of an environment comparison import it, so only
    their environments differ."""
    import gnnperf

    shutil.copytree(Path(gnnperf.__file__).resolve().parent, dest / "gnnperf",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dest


def checkout_top(where: Path | str = ".") -> Path:
    """The git top level of :obj:`where` (as git and asv find the tree you
    stand in), or a one-line error outside a checkout."""
    top = git_top(where)
    if top is None:
        raise GnnperfError(f"{Path(where).resolve()} is not inside a git checkout; cd into the "
                           f"checkout to gate, or give --head-dir")
    return top


def fixed_gnnperf(dest: Path, repo: Path | str | None = None) -> Path:
    """The gnnperf every commit of a library is measured with, copied to
    :obj:`dest`: the working tree of the gnnperf checkout :obj:`repo` is in,
    else of the checkout this gnnperf runs from (an editable install), else
    the installed package (a wheel). A copy: edits to the checkout while
    the arms run change neither arm."""
    top = (gnnperf_checkout(repo) if repo is not None else None) or gnnperf_checkout(
        Path(__file__).resolve().parent)
    if top is None:
        return installed_tree(dest)
    dest.mkdir(parents=True)
    return copy_tree(top, dest)


def library_arm(fixed: Path, source: Path, subdir: str, python: str, label: str,
                commit: str | None = None) -> Arm:
    r"""An arm measuring a library's tree with gnnperf fixed: :obj:`subdir`
    of :obj:`source` (one commit of the library, exported, or its working
    tree) goes first on the arm's ``PYTHONPATH``, the gnnperf tree
    :obj:`fixed` (:func:`fixed_gnnperf`) is the same for every arm.

    Args:
        fixed (Path): The gnnperf tree both arms run.
        source (Path): The library's tree of the arm's commit.
        subdir (str): The folder of :obj:`source` that holds the package
            (``""``: its top).
        python (str): The arm's interpreter.
        label (str): What the tree is (the ref it was exported from).
        commit (str, optional): The commit :obj:`source` holds (``None``: a
            working tree, its checkout read by the probe).
    """
    library = source / subdir
    if not library.is_dir():
        where = f"{label} ({commit[:12]})" if commit else str(source)
        raise GnnperfError(f"--library-subdir {subdir!r} is not a folder at {where}; give "
                           f"the folder that holds the package (e.g. src), or none")
    return Arm(fixed, python, label, commit, library=library)


@contextlib.contextmanager
def first_on_path(folder: Path | None) -> Iterator[None]:
    """:obj:`folder` first on this process's ``sys.path`` for the block
    (nothing with ``None``): a library arm's modules imported here as its
    workers import them, and the path left as it was after."""
    if folder is None:
        yield
        return
    sys.path.insert(0, str(folder))
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(str(folder))


@dataclass
class ArmProbe:
    """What an arm is: its tree's commit and state, its gnnperf version, its
    interpreter's Python, torch and PyG versions, its registry's standard
    variants and, per name asked about, the registry's spelling (``None``:
    unknown there). For a library arm (:obj:`gnnperf_fixed`) the tree,
    commit and state are the library's, gnnperf the same in both arms."""
    tree: str
    label: str
    commit: str | None
    dirty: bool | None
    python: str
    interpreter: str
    torch: str
    torch_geometric: str
    standard_variants: list[str]
    known: dict[str, str | None]
    gnnperf: str = "unknown"
    gnnperf_fixed: bool = False

    def headline(self) -> str:
        state = "" if self.dirty is None else " (dirty)" if self.dirty else " (clean)"
        where = (f"{self.tree} at {(self.commit or 'no commit')[:12]}{state}"
                 if self.commit is not None or self.dirty is not None else self.tree)
        label = f"{self.label} " if self.label else ""
        fixed = " (fixed)" if self.gnnperf_fixed else ""
        return (f"{label}{where}; gnnperf {self.gnnperf}{fixed}, Python {self.python} "
                f"({self.interpreter}), torch {self.torch}, torch_geometric "
                f"{self.torch_geometric}")

    def to_dict(self) -> dict:
        found = {k: getattr(self, k) for k in (
            "tree", "label", "commit", "dirty", "gnnperf", "python", "interpreter", "torch",
            "torch_geometric")}
        if self.gnnperf_fixed:  # only a library arm says so: a gnnperf tree's report is as it was
            found["gnnperf_fixed"] = True
        return found


def _arm_probe(arm: Arm, found: dict) -> ArmProbe:
    tree = arm.tree if arm.library is None else arm.library
    # A library's working tree may be a folder of its checkout (src/): its
    # state is the checkout's.
    commit, dirty = git_state(tree if arm.library is None else git_top(tree) or tree)
    if arm.commit is not None:  # an exported ref: the files are exactly that commit
        commit, dirty = arm.commit, False
    return ArmProbe(str(tree), arm.label, commit, dirty, found["python"], arm.python,
                    found["torch"], found["torch_geometric"], found["standard_variants"],
                    found["known"], found.get("gnnperf", "unknown"), arm.library is not None)


def _registry_error(arm: Arm, stderr: str) -> GnnperfError:
    return GnnperfError(f"cannot read the variant registry of {arm.describe()}: "
                        f"{_last_line(stderr)}")


def probe(arm: Arm, names: list[str] = ()) -> ArmProbe:
    """:class:`ArmProbe` of :obj:`arm` (one short process in its interpreter)."""
    proc = warm.start(_worker_cmd("probe", arm, probe_names=names), arm.env(), stdin=False)
    stdout, stderr = proc.communicate()
    if proc.returncode != 0:
        raise _registry_error(arm, stderr)
    return _arm_probe(arm, json.loads(stdout.strip().splitlines()[-1]))


class ProbedWorker:
    """A work or time worker started before its cases are known: it reports
    its arm's :class:`ArmProbe` first (:meth:`read_probe`), then takes the
    cases (:meth:`give`) or is told to quit (:meth:`close`). The gate's first
    workers are so its probes: two interpreter starts fewer per gate run,
    each a costly share of a short gate run."""

    def __init__(self, mode: str, arm: Arm, names: list[str], env: dict | None = None) -> None:
        self.arm = arm
        self.proc = _serving(_worker_cmd(mode, arm, probe_names=names), arm.env(env))
        self.given = False

    def read_probe(self) -> ArmProbe:
        while True:  # the first JSON line with the probe (an import may print first)
            line = self.proc.stdout.readline()
            if not line:
                self.proc.wait()
                raise _registry_error(self.arm, self.proc.stderr.read())
            try:
                reply = json.loads(line)
            except ValueError:
                continue
            if isinstance(reply, dict) and "probe" in reply:
                return _arm_probe(self.arm, reply["probe"])

    def give(self, cases: list[Case]) -> subprocess.Popen:
        """Hands :obj:`cases` over; the process then works as any worker."""
        self.given = True
        try:
            self.proc.stdin.write(json.dumps({"cases": _cases_json(cases)}) + "\n")
            self.proc.stdin.flush()
        except OSError:  # it died after its probe
            self.proc.kill()
            self.proc.wait()
            raise GnnperfError(f"a worker of {self.arm.describe()} died: "
                               f"{_last_line(self.proc.stderr.read())}") from None
        return self.proc

    def close(self) -> None:
        """Stops a worker that was never given its cases (no-op otherwise)."""
        if not self.given:
            _quit(self.proc)


def _quit(proc: subprocess.Popen) -> None:
    """Asks a worker waiting on stdin to quit; kills it if it does not."""
    try:
        proc.stdin.write(json.dumps({"quit": True}) + "\n")
        proc.stdin.close()
        proc.wait(timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        proc.kill()
        proc.wait()


def start_probed(mode: str, arms: dict[str, Arm], names: list[str]
                 ) -> tuple[dict[str, ProbedWorker], dict[str, ArmProbe]]:
    """One :class:`ProbedWorker` per arm (started together) and their probes.
    Time workers are the first timing set, so they start from a layout of
    their own, the arms forked in a drawn order (:func:`run_arms` then draws
    the set's timing order, as for every set)."""
    workers: dict[str, ProbedWorker] = {}
    draw = random.SystemRandom()
    env = warm.fresh_layout_env(draw) if mode == "time" else None
    order = draw.sample(list(arms), len(arms)) if mode == "time" else list(arms)
    try:
        for name in order:  # in the try: a failed start closes the others
            workers[name] = ProbedWorker(mode, arms[name], names, env)
        in_order = {name: workers[name] for name in arms}
        return in_order, {name: w.read_probe() for name, w in in_order.items()}
    except BaseException:
        for w in workers.values():
            w.close()
        raise


def export_ref(ref: str, dest: Path, repo: Path | str = ".") -> Path:
    """Writes the files of git :obj:`ref` of :obj:`repo` into :obj:`dest`
    (``git archive``; the repository's worktrees are left alone)."""
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile() as archive:
        proc = subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", ref],
                              stdout=archive, stderr=subprocess.PIPE)
        if proc.returncode != 0:
            raise GnnperfError(f"git archive {ref} failed ({proc.stderr.decode().strip()}); "
                               f"name a commit, branch or tag of {repo}")
        archive.seek(0)
        with tarfile.open(fileobj=archive) as tar:
            tar.extractall(dest, filter="data")
    return dest


def copy_tree(src: Path, dest: Path) -> Path:
    """Copies the files git tracks or would track (ignored ones excluded)
    from :obj:`src` to :obj:`dest`: the working tree as it is, uncommitted
    edits included."""
    files = subprocess.run(["git", "-C", str(src), "ls-files", "-co", "--exclude-standard", "-z"],
                           capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, files):
        path = src / name
        if path.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, dest / name)
    return dest


def _cases_json(cases: list[Case]) -> list[dict]:
    return [json.loads(case.to_json()) for case in cases]


def _worker_cmd(mode: str, arm: Arm, cases: list[Case] = (),
                probe_names: list[str] | None = None) -> list[str]:
    """``worker.py`` in :obj:`arm`'s interpreter: with :obj:`probe_names` it
    reports the arm first and takes its cases on stdin."""
    what = (["--probe", json.dumps(list(probe_names))] if probe_names is not None
            else ["--cases", json.dumps(_cases_json(cases))])
    return [arm.python, str(WORKER), "--mode", mode, "--tree", str(arm.tree),
            "--instrument", str(INSTRUMENT), *what]


def _serving(cmd: list[str], env: dict | None = None):
    """A worker that reads requests on stdin and answers a line each, under
    :obj:`env` (default :func:`~gnnperf.warm.worker_env`)."""
    return warm.start(cmd, env if env is not None else warm.worker_env())


def resolve_commit(ref: str, repo: Path | str = ".") -> str:
    """The commit :obj:`ref` names in :obj:`repo`."""
    proc = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", f"{ref}^{{commit}}"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise GnnperfError(f"git archive {ref} failed ({proc.stderr.strip()}); name a commit, "
                           f"branch or tag of {repo}")
    return proc.stdout.strip()


def run_work(arms: dict[str, Arm], cases: list[Case],
             started: dict[str, ProbedWorker] | None = None) -> dict[str, list[dict]]:
    """Work metrics of every case in each arm (the arms in parallel); a case
    an arm cannot measure is ``{"status": ..., "reason": ...}``
    (see :mod:`gnnperf.gate.worker`). :obj:`started`: work workers already
    running (:func:`start_probed`), given the cases here."""
    procs: dict[str, subprocess.Popen] = {}
    try:
        for name, arm in arms.items():
            procs[name] = started[name].give(cases) if started else warm.start(
                _worker_cmd("work", arm, cases), arm.env(), stdin=False)
    except BaseException:  # one arm's worker died: stop the other
        for proc in procs.values():
            proc.kill()
            proc.wait()
        raise
    results = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate()
        if proc.returncode != 0:
            raise GnnperfError(f"work metrics of the {name} arm ({arms[name].describe()}) "
                               f"failed: {_last_line(stderr)}")
        results[name] = json.loads(stdout.strip().splitlines()[-1])
    return results


def _last_line(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


class TimeWorker:
    """A worker process timing blocks of steps on request."""

    def __init__(self, arm: Arm, cases: list[Case], started: ProbedWorker | None = None,
                 env: dict | None = None) -> None:
        self.arm = arm
        self.proc = (started.give(cases) if started is not None
                     else _serving(_worker_cmd("time", arm, cases), arm.env(env)))
        self.layout: dict | None = None  # the worker's layout_fingerprint(), once ready

    def read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise GnnperfError(f"a time worker of {self.arm.describe()} died: "
                               f"{_last_line(self.proc.stderr.read())}")
        return json.loads(line)

    def ready(self) -> tuple[list[float | None], list[dict | None]]:
        """Per case, a rough step time and its status (``None``: timeable)."""
        while True:
            reply = self.read()
            if reply.get("ready"):
                self.layout = reply.get("layout")
                return reply["step_s"], reply.get("status") or [None] * len(reply["step_s"])

    def time(self, case: int, steps: int) -> dict[str, float]:
        """Wall-clock and CPU seconds per step of a block of :obj:`steps`
        steps (``{"error": ...}`` when its loss was not finite)."""
        self.proc.stdin.write(json.dumps({"case": case, "steps": steps}) + "\n")
        return self.read()

    def close(self) -> None:
        _quit(self.proc)


def run_arms(arms: dict[str, Arm], cases: list[Case], processes: int, rounds: int,
             sample_ms: float, progress: Callable[[int, int], None] | None = None,
             pin_cpus: bool = True, first_set: int = 0, steps: list[int] | None = None,
             states: dict | None = None, started: dict[str, ProbedWorker] | None = None,
             layouts: list[dict] | None = None) -> tuple[list[int], dict]:
    """Interleaved timing of every case in every arm.

    ``processes`` times, one worker process per arm is started (together):
    a set of workers, the t-test's replicate. Each set starts from a layout
    of its own (:func:`~gnnperf.warm.fresh_layout_env`: a freshly exec'd
    server, hash seed and environment size; the set's workers fork from that
    server, or start cold) and a randomly drawn arm order, so what a set's
    workers share (layout, who starts first, who is timed first) differs
    independently from set to set and averages out across replicates instead
    of biasing every one alike. Then ``rounds`` rounds (plus one dropped
    warm-up round) time each case in every arm, one block of steps each:
    for two arms alternately in the set's order and reversed (each sample
    follows one of the other arm as often as one of its own), for more arms
    in a random order each round, since a fixed rotation makes each arm
    always follow the same one (a sample after a busy-loop arm runs
    slower). With :obj:`pin_cpus`
    the workers of a set share one CPU (Linux), so a CPU's speed is common
    to both arms of a pair and cancels in their ratio. Returns the block
    size per case (the first arm's step time sets it, the same for all arms)
    and ``times[case][arm][clock][process][round]`` in seconds per step, for
    the ``cpu`` and ``wall`` clocks.

    More sets of an earlier run continue it: :obj:`first_set` numbers them on
    (CPU rotation), :obj:`steps` keeps its block sizes. A case an arm
    cannot time (absent, unavailable, a crash, a non-finite loss) gets 0
    steps from then on, and its status in :obj:`states`
    (``states[case][arm]``, filled in when given). :obj:`started`: the
    first set's workers, already running (:func:`start_probed`). Each set's
    workers' layout fingerprints (``{arm: {...}}``, see ``worker.py``) are
    appended to :obj:`layouts` when given."""
    names = list(arms)
    steps = list(steps) if steps is not None else []
    states = {} if states is None else states
    times = {case.name: {arm: {"cpu": [], "wall": []} for arm in names} for case in cases}
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    draw = random.SystemRandom()
    for proc_set in range(first_set, first_set + processes):
        first = started if started and proc_set == first_set else {}
        # Each set is one independent replicate: its own exec'd server (a new
        # address layout, heap and hash seed) that only this set's workers
        # fork from, and its own arm order, started and timed.
        env = warm.fresh_layout_env(draw)
        set_order = draw.sample(names, len(names))
        workers: dict[str, TimeWorker] = {}
        try:
            for name in set_order:  # in the try: a failed start closes the others
                workers[name] = TimeWorker(arms[name], cases, first.get(name), env)
            ready = {name: w.ready() for name, w in workers.items()}
            if layouts is not None:
                layouts.append({name: w.layout for name, w in workers.items()})
            step_s = {name: r[0] for name, r in ready.items()}
            for name, (_, case_states) in ready.items():
                for case, state in zip(cases, case_states):
                    if state is not None:
                        states.setdefault(case.name, {})[name] = state
            if pin_cpus and len(cpus) > 1:
                # Once started (in parallel), every arm's worker of this set
                # moves to one CPU, the CPU rotating over the sets. A worker
                # otherwise lives on whichever CPU it started on, and one CPU
                # of a VM can run slower than the other for minutes, which
                # spreads A/A pair estimates far wider unpinned than pinned.
                for w in workers.values():
                    try:
                        os.sched_setaffinity(w.proc.pid, {cpus[proc_set % len(cpus)]})
                    except OSError:  # the CPU set changed, or not permitted: unpinned
                        pass
            if not steps:  # a case missing from an arm is not timed (0 steps)
                steps = [0 if any(step_s[name][i] is None for name in names)
                         else max(1, round(sample_ms / 1e3 / step_s[names[0]][i]))
                         for i in range(len(cases))]
            steps = [0 if any(step_s[name][i] is None for name in names) else n
                     for i, n in enumerate(steps)]
            if not any(steps):
                # A case's steps only ever drop to 0 (absent, unavailable,
                # failed), so no later set could time anything either: each
                # would be two interpreter starts for nothing.
                break
            for case in cases:
                for name in names:
                    for clock in ("cpu", "wall"):
                        times[case.name][name][clock].append([])
            for rnd in range(rounds + 1):  # round 0 warms up and is dropped
                if len(names) == 2:  # A B, B A, A B, ...: each follows the other equally
                    order = set_order if rnd % 2 == 0 else set_order[::-1]
                else:  # a fresh order each round: no arm always follows the same one
                    order = draw.sample(names, len(names))
                for i, case in enumerate(cases):
                    if not steps[i]:
                        continue
                    for name in order:
                        sample = workers[name].time(i, steps[i])
                        if "error" in sample:  # a non-finite loss: this case is done
                            states.setdefault(case.name, {})[name] = {
                                "status": "error", "reason": sample["error"]}
                            steps[i] = 0
                            break
                        if rnd > 0:
                            for clock in ("cpu", "wall"):
                                times[case.name][name][clock][-1].append(sample[clock])
            if progress is not None:
                progress(proc_set + 1, first_set + processes)
        finally:
            for w in workers.values():
                w.close()
    return steps, times
