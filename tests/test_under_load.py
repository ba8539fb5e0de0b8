"""``tools/under_load.py``: the load it starts ends with it, however it ends."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="reads children from /proc (Linux)")

# The command: records a SIGTERM (under_load passes one on) and then waits.
COMMAND = ("import signal, sys, time\n"
           "def stopped(signum, frame):\n"
           "    open(sys.argv[1], 'w').write('SIGTERM')\n"
           "    sys.exit(0)\n"
           "signal.signal(signal.SIGTERM, stopped)\n"
           "time.sleep(60)\n")


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command's name (state first), or None."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _children(pid: int) -> dict[int, str]:
    """pid -> start time (field 22, which tells a reused pid apart) of :obj:`pid`'s children."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields and int(fields[1]) == pid:
                found[int(entry.name)] = fields[19]
    return found


def _alive(pid: int, started: str) -> bool:
    fields = _stat(pid)
    return fields is not None and fields[19] == started and fields[0] != "Z"


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_the_busy_loop_ends_with_under_load_and_a_sigterm_reaches_the_command(how, tmp_path):
    """A cancelled CI job or a killed study leaves no busy loop on a core to
    time every later measurement under load; a SIGTERM reaches the command
    as a SIGTERM, so it can clean up (a SIGKILL runs no handler: the
    command then ends on its own)."""
    record = tmp_path / "command-saw"
    cpu = min(os.sched_getaffinity(0))
    proc = subprocess.Popen([sys.executable, str(ROOT / "tools" / "under_load.py"),
                             "--cpu", str(cpu), "--", sys.executable, "-c", COMMAND,
                             str(record)])
    children: dict[int, str] = {}
    try:
        deadline = time.monotonic() + 30
        while len(children) < 2 and time.monotonic() < deadline:
            children = _children(proc.pid)
            time.sleep(0.05)
        assert len(children) == 2, "under_load starts the loop and the command"
        loop = [pid for pid in children
                if "while True" in Path(f"/proc/{pid}/cmdline").read_text()]
        assert len(loop) == 1
        time.sleep(0.5)  # past both start-ups: the command's handler is set
        proc.send_signal(how)
        proc.wait(timeout=20)
        must_end = list(children) if how == signal.SIGTERM else loop
        deadline = time.monotonic() + 10
        while any(_alive(p, children[p]) for p in must_end) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = [p for p in must_end if _alive(p, children[p])]
        assert not left, f"still running after under_load was killed: {left}"
        if how == signal.SIGTERM:
            assert record.read_text() == "SIGTERM"
    finally:
        for pid, started in children.items():
            if _alive(pid, started):
                os.kill(pid, signal.SIGKILL)
        proc.kill()
