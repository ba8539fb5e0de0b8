"""Processes started from a warm interpreter: forked from Python's
multiprocessing forkserver, which imported torch and torch_geometric once,
instead of a fresh interpreter importing them again for every process. The
gate's workers (:func:`start`) and the data-parallel ranks
(:func:`rank_context`, :func:`adopt_environment`) start so.

A gate run starts one worker per arm per process set, and bisect a gate per
step: a worker's interpreter start and those imports are most of a
probe's or a short time worker's CPU time. The
forked worker is the same ``worker.py`` run as ``__main__`` with the same
argv, environment and stdio pipes; gnnperf itself is never preloaded (each
worker imports its arm's tree). A worker is forked only when it would run
under this interpreter and agree with the server on every variable read
when an interpreter, torch or PyG starts (:data:`START_TIME`:
``PYTHONHASHSEED``, ``OMP_NUM_THREADS``, ``TORCH_CPP_LOG_LEVEL``, ...): those
cannot change in a fork, while the rest (``PYTEST_CURRENT_TEST`` changes
every test) is the worker's own, set before it runs. Any other worker
(another arm's Python, another start-time environment) starts cold, as a
subprocess. ``GNNPERF_COLD_START=1`` starts every worker cold."""
from __future__ import annotations

import atexit
import contextlib
import multiprocessing
import multiprocessing.util  # its exit hook registered before ours, so ours runs first
import os
import random
import subprocess
import sys
import threading
from multiprocessing.connection import Connection

COLD_ENV = "GNNPERF_COLD_START"
#: What every forked process starts with: one intra-op thread (also for the
#: OpenMP/MKL pools; a rank or worker sets its own count) and a fixed hash seed.
FIXED_START = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
#: What the server imports once: the environment's, never the arm's gnnperf.
PRELOAD = ["torch", "torch_geometric"]

# Run in the forked child by builtins.exec (picklable by reference, unlike a
# function of gnnperf's, whose unpickling would import this checkout's
# gnnperf before the worker puts its arm's tree first).
_TRAMPOLINE = """
import os, runpy, sys
for _conn, _fd in zip(fds, (0, 1, 2)):
    os.dup2(_conn.fileno(), _fd)
    _conn.close()
os.environ.clear()
os.environ.update(env)
sys.stdin = open(0, closefd=False)
sys.stdout = open(1, "w", buffering=1, closefd=False)
sys.stderr = open(2, "w", buffering=1, closefd=False)
sys.argv = list(argv)
try:
    runpy.run_path(argv[0], run_name="__main__")
finally:
    sys.stdout.flush()
    sys.stderr.flush()
"""

#: Prefixes of the variables read when a process starts: Python's own, the
#: C runtime's and allocator's, OpenMP/BLAS pools', CUDA's, torch's and PyG's.
START_TIME = ("PYTHON", "LD_", "MALLOC", "OMP_", "GOMP_", "KMP_", "MKL_", "OPENBLAS_",
              "CUDA", "NVIDIA_", "NCCL_", "TORCH", "PYTORCH", "PYG_", "LANG", "LC_")

_lock = threading.Lock()
_server_env: dict | None = None  # its start-time variables
_server_full_env: dict = {}  # its whole environment, which its forks inherit
# Every forked process, with the pid of the process that forked it, held even
# where its WarmWorker was dropped unwaited: multiprocessing still joins it at
# exit (pruned of the ended at each fork).
_forked: set = set()


def _own_live_forks() -> list:
    """This process's forked workers still running (a plain ``os.fork()``
    child inherits :data:`_forked` but owns none of them)."""
    return [process for owner, process in list(_forked)
            if owner == os.getpid() and process.exitcode is None]


#: ...but read by the launcher when it launches: torch's elastic launcher sets
#: TORCHELASTIC_SIGNALS_TO_HANDLE in its own environment for good.
LAUNCH_TIME = ("TORCHELASTIC_",)


def _start_time(env: dict) -> dict:
    return {key: value for key, value in env.items()
            if key.startswith(START_TIME) and not key.startswith(LAUNCH_TIME)}


def worker_env() -> dict:
    """This process's environment with :data:`FIXED_START`."""
    return dict(os.environ, **FIXED_START)


#: Where :func:`fresh_layout_env` puts its filler: the environment's size
#: moves the initial stack of an exec'd interpreter (the server, or a cold
#: worker), so a drawn size is a drawn stack alignment.
LAYOUT_FILLER = "GNNPERF_LAYOUT_FILLER"


def fresh_layout_env(rng: random.Random | None = None) -> dict:
    """:func:`worker_env` with a newly drawn hash seed and environment size.

    Forked workers inherit their server's address layout, heap and hash seed
    (fork re-randomises none of them), so processes forked from one server
    share one layout, and a layout's effect on an arm's speed is the same in
    all of them. A changed hash seed is a start-time variable
    (:data:`START_TIME`): the next :func:`start` under this environment
    replaces the server with a freshly exec'd one (new ASLR draw, new heap),
    which the workers started under the same environment then share. Timing
    draws one per process pair, so pairs are independent replicates and the
    arms of a pair share a layout only with each other."""
    draw = rng if rng is not None else random.SystemRandom()
    return dict(worker_env(), PYTHONHASHSEED=str(draw.randrange(1, 2 ** 32)),
                **{LAYOUT_FILLER: "x" * draw.randrange(0, 4096, 16)})


def _forkable(env: dict) -> bool:
    """Whether a process with :obj:`env` can fork from the server, which is
    made sure to run (started, or started again after it died) under
    :obj:`env`'s start-time variables. A server started under other values
    is replaced when none of its workers is alive (a live one's exit status
    comes through it). Called with :data:`_lock` held."""
    global _server_env
    if (os.environ.get(COLD_ENV) == "1" or env.get(COLD_ENV) == "1"
            or "forkserver" not in multiprocessing.get_all_start_methods()):
        return False
    wanted = _start_time(env)
    if _server_env is not None and wanted != _server_env:
        if _own_live_forks():
            return False  # a live worker, dropped unwaited or not, holds the server open
        _stop_server()
    from multiprocessing import forkserver
    multiprocessing.get_context("forkserver").set_forkserver_preload(PRELOAD)
    # The server's own start (its children inherit its environment). Not the
    # test runner's current-test variable: PyG's import runs CUDA ops when
    # it is set (and pyg_lib present), which no forked child could use.
    server_env = {key: value for key, value in env.items() if key != "PYTEST_CURRENT_TEST"}
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(server_env)
    try:
        forkserver.ensure_running()  # a no-op while it runs
    finally:
        os.environ.clear()
        os.environ.update(saved)
    if _server_env != wanted:
        _server_env = wanted
        _server_full_env.clear()
        _server_full_env.update(server_env)
    return True


def _stop_server() -> None:
    """Stops multiprocessing's forkserver so the next start takes a new
    environment. CPython's private ``ForkServer._stop`` (3.8-3.13; its test
    suite's way): the one private touch point here, its canary in
    tests/test_warm.py."""
    from multiprocessing import forkserver
    forkserver._forkserver._stop()


@contextlib.contextmanager
def _main_hidden():
    """multiprocessing re-imports the parent's ``__main__`` in every child
    it starts (as ``__mp_main__``), unless it is a package's ``__main__``
    (``python -m gnnperf``): the ``gnnperf`` console script would import
    this checkout's gnnperf into a worker that must import its arm's. The
    worker is a script of its own and needs no main of ours, so the start
    sees none."""
    main = sys.modules["__main__"]
    saved = main.__dict__.get("__spec__"), main.__dict__.get("__file__", _ABSENT)
    main.__spec__ = None
    main.__dict__.pop("__file__", None)
    try:
        yield
    finally:
        main.__spec__ = saved[0]
        if saved[1] is not _ABSENT:
            main.__file__ = saved[1]


_ABSENT = object()


class WarmWorker:
    """A forked worker with a :class:`subprocess.Popen`'s face: text
    ``stdin``/``stdout``/``stderr`` pipes, ``pid``, ``returncode``,
    :meth:`wait`, :meth:`kill` and :meth:`communicate`."""

    def __init__(self, cmd: list[str], env: dict) -> None:
        """Forks :obj:`cmd`; called with :data:`_lock` held, the server running."""
        self.args = cmd
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        child_ends = [Connection(in_r, writable=False), Connection(out_w, readable=False),
                      Connection(err_w, readable=False)]
        self._process = multiprocessing.get_context("forkserver").Process(
            target=exec, daemon=False,
            args=(_TRAMPOLINE, {"argv": cmd[1:], "env": env, "fds": child_ends}))
        try:
            with _main_hidden():
                self._process.start()
        except BaseException:
            for fd in (in_w, out_r, err_r):
                os.close(fd)
            raise
        finally:
            for conn in child_ends:  # the child has its own copies now
                conn.close()
        self.stdin = open(in_w, "w", buffering=1)
        self.stdout = open(out_r)
        self.stderr = open(err_r)
        self.pid = self._process.pid
        _forked.difference_update([entry for entry in _forked if entry[1].exitcode is not None])
        _forked.add((os.getpid(), self._process))

    @property
    def returncode(self) -> int | None:
        return self._process.exitcode

    def poll(self) -> int | None:
        return self._process.exitcode

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        if self._process.exitcode is None:
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self._process.exitcode

    def kill(self) -> None:
        if self._process.exitcode is None:
            self._process.kill()

    def communicate(self) -> tuple[str, str]:
        """Everything the worker writes (stderr read beside stdout, so a
        full stderr pipe never blocks it) once it exits."""
        if not self.stdin.closed:
            self.stdin.close()
        errors = [""]

        def read_errors() -> None:
            errors[0] = self.stderr.read()
        # A daemon: CPython joins other threads before the exit hooks run, so
        # an interrupted read would keep the worker (and the exit) waiting.
        reader = threading.Thread(target=read_errors, daemon=True)
        reader.start()
        out = self.stdout.read()
        reader.join()
        self.stdout.close()
        self.stderr.close()
        self.wait()
        return out, errors[0]


def _end_live_workers() -> None:
    """At exit: ends the workers still alive (a gate that stopped on an
    error mid-run). multiprocessing joins non-daemon children at exit, after
    this (atexit runs last-registered first), and a worker still waiting on
    the stdin whose write end this process holds would never end: the exit
    hung for good."""
    for process in _own_live_forks():
        process.kill()


atexit.register(_end_live_workers)


def start(cmd: list[str], env: dict, stdin: bool = True):
    """``cmd`` (``[python, worker.py, args...]``) as a worker with text pipes:
    forked warm when ``cmd[0]`` is this interpreter and :obj:`env` the
    server's, else a cold :class:`subprocess.Popen` (stdin a pipe only with
    :obj:`stdin`)."""
    # Paths compared as written: two virtual environments' pythons are links
    # to one binary, with different packages.
    if os.path.abspath(cmd[0]) == os.path.abspath(sys.executable):
        with _lock:  # no restart of the server between its check and this fork
            if _forkable(env):
                worker = WarmWorker(cmd, env)
                if not stdin:  # end of input at once, as DEVNULL gives a cold one
                    worker.stdin.close()
                return worker
    return subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            bufsize=1)


def rank_context() -> tuple[str, tuple[dict, dict] | None]:
    """The start method of data-parallel ranks (``forkserver`` when this
    interpreter's server can fork them, else ``spawn``) and, for forked
    ranks, what :func:`adopt_environment` needs: the launcher's environment
    and the server's, which the fork inherited."""
    with _lock:
        if not _forkable(worker_env()):
            return "spawn", None
        # The variables a spawned rank would see (the launcher's own); the
        # start-time ones are the server's (a fixed hash seed, one thread
        # per pool until the rank sets its count).
        return "forkserver", (dict(os.environ), dict(_server_full_env))


#: What torch's elastic launcher sets for each rank (kept even where the
#: server's inherited environment happened to hold the same value).
ELASTIC_RANK_VARIABLES = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                          "MASTER_PORT", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
                          "NCCL_ASYNC_ERROR_HANDLING"}


def adopt_environment(handover: tuple[dict, dict] | None) -> None:
    """In a forked rank: the launcher's environment, with what the launcher
    (``torch.distributed.elastic``: ``RANK``, ``MASTER_PORT``, ...) set for
    this rank on top of the server's inherited one. A spawned rank
    (``None``) has the launcher's already."""
    if handover is None:
        return
    launcher, server = handover
    for_this_rank = {key: value for key, value in os.environ.items()
                     if server.get(key) != value or key in ELASTIC_RANK_VARIABLES
                     or key.startswith(("TORCHELASTIC_", "GROUP_", "ROLE_"))}
    os.environ.clear()
    os.environ.update(launcher)
    os.environ.update(for_this_rank)
