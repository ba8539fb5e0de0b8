"""Runs a command while a CPU-bound process keeps one core busy: what a shared
CI runner looks like to the gate (another job on the other core).

    python tools/under_load.py --cpu 1 -- gnnperf sensitivity --case baseline@cora \
        --slowdowns 0.06 --trials 10 --json sensitivity-load.json

The load is a pure-Python busy loop pinned to ``--cpu`` (Linux), started
before the command and killed when it ends; the exit status is the command's.
The loop ends with this process however it ends (a SIGTERM, a cancelled
CI job, a SIGKILL on Linux), and a SIGTERM is passed on to the command: a
loop left behind would time every later measurement on the machine under
load.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

# gpu_check's process helpers, beside this script (tools/ is not a package).
sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_check.process import die_with_parent  # noqa: E402

LOOP = "while True: pass"


def _stop(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGTERM to :obj:`proc`, so that it cleans up as it would when stopped
    itself; SIGKILL after :obj:`grace_s`."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", type=int, default=1, help="core the load runs on (default 1)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the command to run")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command after --")
    # A SIGTERM unwinds through the finally below: the command is stopped, then the loop.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    # Killed with this process even by a SIGKILL (no finally runs then), so that the
    # loop stays the pure bytecode loop every loaded figure was measured under.
    load = subprocess.Popen([sys.executable, "-c", LOOP], preexec_fn=die_with_parent)
    proc = None
    try:
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(load.pid, {args.cpu})
        start = time.perf_counter()
        proc = subprocess.Popen(command)
        code = proc.wait()
        print(f"under_load: {' '.join(command[:3])} ... exit {code} in "
              f"{time.perf_counter() - start:.0f} s with a busy loop on CPU {args.cpu}",
              file=sys.stderr)
        return code
    finally:
        if proc is not None:
            _stop(proc)
        load.kill()
        load.wait()


if __name__ == "__main__":
    sys.exit(main())
