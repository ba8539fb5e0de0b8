"""``tools/under_load.py``: the load it starts ends with it, however it ends."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from conftest import processes_with

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="finds its processes in /proc (Linux)")

# The command: records a SIGTERM (under_load passes one on) and then waits.
COMMAND = ("import signal, sys, time\n"
           "def stopped(signum, frame):\n"
           "    open(sys.argv[1], 'w').write('SIGTERM')\n"
           "    sys.exit(0)\n"
           "signal.signal(signal.SIGTERM, stopped)\n"
           "time.sleep(60)\n")


def _is_loop(pid: int) -> bool:
    try:
        return "while True" in Path(f"/proc/{pid}/cmdline").read_text()
    except OSError:
        return False


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_the_busy_loop_ends_with_under_load_and_a_sigterm_reaches_the_command(how, tmp_path):
    """A cancelled CI job or a killed study leaves no busy loop on a core to
    time every later measurement under load; a SIGTERM reaches the command
    as a SIGTERM, so it can clean up (a SIGKILL runs no handler: the
    command then ends on its own)."""
    record = tmp_path / "command-saw"
    # Inherited by under_load's children: a reused pid never carries it.
    name, value = "GNNPERF_TEST_UNDER_LOAD", uuid.uuid4().hex
    marker = f"{name}={value}"
    proc = subprocess.Popen([sys.executable, str(ROOT / "tools" / "under_load.py"),
                             "--cpu", str(min(os.sched_getaffinity(0))), "--",
                             sys.executable, "-c", COMMAND, str(record)],
                            env={**os.environ, name: value})
    try:
        deadline = time.monotonic() + 30
        children: list[int] = []
        while len(children) < 2 and time.monotonic() < deadline:
            children = [pid for pid in processes_with(marker) if pid != proc.pid]
            time.sleep(0.05)
        assert len(children) == 2, "under_load starts the loop and the command"
        loop = [pid for pid in children if _is_loop(pid)]
        assert len(loop) == 1
        time.sleep(0.5)  # past both start-ups: the command's handler is set
        proc.send_signal(how)
        proc.wait(timeout=20)
        # A SIGKILL leaves the command to its own end (no handler runs); never the loop.
        must_end = set(children if how == signal.SIGTERM else loop)
        deadline = time.monotonic() + 10
        while must_end & set(processes_with(marker)) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = must_end & set(processes_with(marker))
        assert not left, f"still running after under_load was killed: {sorted(left)}"
        if how == signal.SIGTERM:
            assert record.read_text() == "SIGTERM"
    finally:
        proc.kill()
        for pid in processes_with(marker):
            os.kill(pid, signal.SIGKILL)
