"""Gate workers forked from the warm interpreter (``gnnperf.warm``):
what a worker sees is what a fresh interpreter would give it (argv, its own
environment, the fixed hash seed, stdio pipes, exit status), and a worker
the server cannot stand in for starts cold."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import os

import pytest

from gnnperf import warm

pytestmark = pytest.mark.skipif(os.environ.get(warm.COLD_ENV) == "1",
                                reason=f"{warm.COLD_ENV}=1: every process starts cold")

ECHO = """
import json, os, sys
line = sys.stdin.readline()
print(json.dumps({"argv": sys.argv, "got": line.strip(), "hash": hash("gnnperf"),
                  "server": os.getppid(),
                  "marker": os.environ.get("GNNPERF_TEST_MARKER"),
                  "gnnperf_loaded": "gnnperf" in sys.modules,
                  "torch_loaded": "torch" in sys.modules}), flush=True)
print("a line on stderr", file=sys.stderr, flush=True)
sys.exit(int(sys.argv[1]))
"""


@pytest.fixture
def echo(tmp_path):
    path = tmp_path / "echo.py"
    path.write_text(ECHO)
    return str(path)


def _hash_with_seed_0() -> int:
    out = subprocess.run([sys.executable, "-c", "print(hash('gnnperf'))"], capture_output=True,
                         text=True, env={**warm.worker_env(), "PYTHONHASHSEED": "0"}, check=True)
    return int(out.stdout)


def test_a_warm_worker_gets_its_argv_environment_pipes_and_exit_status(echo, monkeypatch):
    monkeypatch.setenv("GNNPERF_TEST_MARKER", "first")
    first = warm.start([sys.executable, echo, "0"], warm.worker_env())
    assert isinstance(first, warm.WarmWorker)
    first.stdin.write("hello\n")
    reply = json.loads(first.stdout.readline())
    out, err = first.communicate()
    assert first.returncode == 0 and out == "" and err.strip() == "a line on stderr"
    assert reply["argv"] == [echo, "0"] and reply["got"] == "hello"
    assert reply["marker"] == "first"
    # Forked from the server: torch already there, never this checkout's gnnperf.
    assert reply["torch_loaded"] and not reply["gnnperf_loaded"]
    assert reply["hash"] == _hash_with_seed_0()  # PYTHONHASHSEED=0, as a fresh worker's

    # A variable read only at run time changes per worker; the exit status comes back.
    monkeypatch.setenv("GNNPERF_TEST_MARKER", "second")
    second = warm.start([sys.executable, echo, "3"], warm.worker_env())
    assert isinstance(second, warm.WarmWorker)
    out, _ = second.communicate()
    assert json.loads(out)["marker"] == "second" and second.returncode == 3
    assert json.loads(out)["server"] == reply["server"]  # both forked by one server


def test_a_worker_the_server_cannot_stand_in_for_starts_cold(echo, monkeypatch):
    alive = warm.start([sys.executable, echo, "0"], warm.worker_env())  # waits on stdin
    # A variable read when torch starts, while a worker of the server lives:
    # a fork would keep the server's value, and a restart would orphan it.
    changed = {**warm.worker_env(), "TORCH_CPP_LOG_LEVEL": "INFO"}
    cold = warm.start([sys.executable, echo, "0"], changed)
    assert isinstance(cold, subprocess.Popen)
    out, _ = cold.communicate("x\n")
    assert cold.returncode == 0 and not json.loads(out)["torch_loaded"]
    alive.communicate()
    assert alive.returncode == 0
    monkeypatch.setenv(warm.COLD_ENV, "1")
    assert isinstance(warm.start([sys.executable, echo, "0"], warm.worker_env(),
                                 stdin=False), subprocess.Popen)


def test_the_parents_main_script_is_not_run_in_a_worker(echo, tmp_path, monkeypatch):
    # The `gnnperf` console script is a __main__ with a __file__: multiprocessing
    # would run it (importing this checkout's gnnperf) in every child.
    marker = tmp_path / "main-ran"
    script = tmp_path / "console_script.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n")
    main = sys.modules["__main__"]
    monkeypatch.setattr(main, "__spec__", None, raising=False)
    monkeypatch.setattr(main, "__file__", str(script), raising=False)
    worker = warm.start([sys.executable, echo, "0"], warm.worker_env())
    assert isinstance(worker, warm.WarmWorker)
    out, _ = worker.communicate()
    assert worker.returncode == 0 and not marker.exists()
    assert main.__file__ == str(script)  # put back after the start


def test_a_changed_start_time_environment_restarts_an_idle_server(echo, monkeypatch):
    # The gnnperf CLI sets TORCH_CPP_LOG_LEVEL for good: later gates must not
    # all start cold because an earlier one started the server without it.
    before, _ = warm.start([sys.executable, echo, "0"], warm.worker_env(),
                           stdin=False).communicate()
    monkeypatch.setenv("TORCH_CPP_LOG_LEVEL", "WARNING")
    worker = warm.start([sys.executable, echo, "0"], warm.worker_env(), stdin=False)
    assert isinstance(worker, warm.WarmWorker)
    after, _ = worker.communicate()
    assert worker.returncode == 0
    assert json.loads(after)["server"] != json.loads(before)["server"]  # a new server


def test_canary_multiprocessing_forkserver_can_be_stopped():
    # warm._stop_server's private CPython API (see its docstring).
    from multiprocessing import forkserver
    assert callable(getattr(forkserver._forkserver, "_stop", None))


_LEAVES_A_WORKER_WAITING = """
import sys
from gnnperf import warm
worker = warm.start([sys.executable, sys.argv[1], "0"], warm.worker_env())
print(worker.pid, flush=True)
# One that never reads its stdin, its WarmWorker dropped unwaited (closing
# its pipes would not end it).
dropped = warm.start([sys.executable, sys.argv[2]], warm.worker_env())
print(dropped.pid, flush=True)
del dropped
# Exits (as an uncaught error in a gate would) with the worker still
# waiting on its stdin, whose write end this process holds.
"""


def test_a_process_that_exits_with_a_worker_alive_ends_it_and_does_not_hang(echo, tmp_path):
    # multiprocessing joins non-daemon children at exit, and a worker waiting
    # on stdin never ends while its parent lives: the exit hung for good.
    script, sleeper = tmp_path / "leaves_one.py", tmp_path / "sleeps.py"
    script.write_text(_LEAVES_A_WORKER_WAITING)
    sleeper.write_text("import time\ntime.sleep(600)\n")
    out = subprocess.run([sys.executable, str(script), echo, str(sleeper)], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    for pid in map(int, out.stdout.split()):
        deadline = time.monotonic() + 10  # its server reaps it
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            pytest.fail(f"worker {pid} was left alive after its parent exited")
