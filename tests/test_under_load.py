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


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            # The parent's pid is the 2nd field after the command's closing parenthesis.
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_the_busy_loop_and_the_command_end_when_under_load_is_killed(how):
    """A cancelled CI job or a killed study must not leave a busy loop on a
    core, timing every later measurement under load (it did, once: a
    SIGTERM skipped the loop's ``finally``)."""
    proc = subprocess.Popen([sys.executable, str(ROOT / "tools" / "under_load.py"), "--cpu", "0",
                             "--", sys.executable, "-c", "import time; time.sleep(60)"])
    children: list[int] = []
    try:
        deadline = time.monotonic() + 30
        while len(_children(proc.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        children = _children(proc.pid)
        assert len(children) == 2, "under_load starts the loop and the command"
        loop = [pid for pid in children
                if "while True" in Path(f"/proc/{pid}/cmdline").read_text()]
        assert len(loop) == 1
        time.sleep(0.3)  # past the loop's start-up
        proc.send_signal(how)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in children) and time.monotonic() < deadline:
            time.sleep(0.05)
        # A SIGKILL leaves the command to its own end (no handler runs); never the loop.
        must_end = children if how == signal.SIGTERM else loop
        left = [pid for pid in must_end if _alive(pid)]
        assert not left, f"still running after under_load was killed: {left}"
    finally:
        for pid in children:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        proc.kill()
