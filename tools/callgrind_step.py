#!/usr/bin/env python3
"""Instructions per training step, counted by valgrind's callgrind.

``perf stat -e instructions`` is unavailable on these VMs; callgrind counts
every instruction the process executes, nearly free of timing noise. Start-up
(imports, data, model build, warm-up) dominates a short run, so the per-step
figure is the difference of a short and a long run divided by the difference
of their step counts::

    python tools/callgrind_step.py --variant baseline --dataset cora --short 3 --long 53

prints one line per run and the per-step figure (``--json`` for JSON). Both
runs use one thread and ``PYTHONHASHSEED=0``; each takes minutes under
callgrind, which runs far slower than native.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _worker(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(ROOT))
    from gnnperf.measure.case import Case, prepare

    case = prepare(Case(args.variant, args.dataset, threads=1))
    for _ in range(args.steps):
        case.step()


def callgrind_instructions(variant: str, dataset: str, steps: int,
                           valgrind: str = "valgrind") -> int:
    """Total instructions (``Ir``) of a worker process that warms up and runs
    :obj:`steps` steps, under callgrind."""
    with tempfile.TemporaryDirectory(prefix="gnnperf-callgrind-") as tmp:
        out = Path(tmp) / "callgrind.out"
        env = dict(os.environ, PYTHONHASHSEED="0", OMP_NUM_THREADS="1")
        cmd = [valgrind, "--tool=callgrind", f"--callgrind-out-file={out}",
               sys.executable, str(Path(__file__).resolve()), "--worker",
               "--variant", variant, "--dataset", dataset, "--steps", str(steps)]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"callgrind run failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        return parse_total(out.read_text())


def parse_total(text: str) -> int:
    """The ``Ir`` total of a callgrind output file (``totals:`` or ``summary:``)."""
    for key in ("totals:", "summary:"):
        match = re.search(rf"^{key}\s+(\d+)", text, re.MULTILINE)
        if match:
            return int(match.group(1))
    raise ValueError("callgrind output has no totals/summary line")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", default="baseline")
    parser.add_argument("--dataset", default="cora")
    parser.add_argument("--short", type=int, default=3, help="steps of the short run")
    parser.add_argument("--long", type=int, default=53, help="steps of the long run")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        _worker(args)
        return 0
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        print("valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 2
    if not 0 <= args.short < args.long:
        parser.error("need 0 <= --short < --long")
    runs = {}
    for steps in (args.short, args.long):
        start = time.perf_counter()
        runs[steps] = callgrind_instructions(args.variant, args.dataset, steps, valgrind)
        if not args.json:
            print(f"{steps:4d} steps: {runs[steps]:,} instructions "
                  f"({time.perf_counter() - start:.0f} s under callgrind)", flush=True)
    per_step = (runs[args.long] - runs[args.short]) / (args.long - args.short)
    result = {"variant": args.variant, "dataset": args.dataset, "runs": runs,
              "instructions_per_step": round(per_step)}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{args.variant} on {args.dataset}: {per_step / 1e6:.2f}M instructions per step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
