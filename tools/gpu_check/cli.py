"""The check's command line (``tools/gpu_check.sh``): the steps chosen by
``--plan``, ``--only`` and ``--skip``, run one by one inside ``--budget-s``,
the summary rewritten around each."""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from .core import LEFT, StepResult, plan_for
from .environment import stack_report
from .plan import PLANS, expected_from, resolve_names, steps
from .process import Runner, run_step, skip_reason
from .report import ARCHIVE, summary, write_summary

# Time kept at the budget's end for the last summary and the archive.
SUMMARY_MARGIN_S = 5
# The budget's clock (the tests replace it).
_clock = time.perf_counter


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tools/gpu_check.sh",
        description="One prepared check of every CUDA path of the suite on a GPU machine, "
                    "in minutes.")
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--out", type=Path,
                        help="folder for gpu-check.json, gpu-check.md and each step's files "
                             "(default: $OUT where it is set, else ./gpu-check)")
    pack = parser.add_mutually_exclusive_group()
    pack.add_argument("--pack", action="store_true", default=None,
                      help=f"the steps' files in one archive ({ARCHIVE}) beside the summary "
                           f"(default where --out is $OUT: for a runner that collects a few "
                           f"files from there)")
    pack.add_argument("--no-pack", dest="pack", action="store_false")
    parser.add_argument("--plan", choices=sorted(PLANS),
                        help="the check in two commands, for a runner that limits how long "
                             "one may run: " + "; ".join(
                                 f"{name}: {', '.join(keys)}" for name, keys in PLANS.items()))
    parser.add_argument("--only", help="comma-separated steps to run (keys or names)")
    parser.add_argument("--skip", help="comma-separated steps to leave out")
    parser.add_argument("--budget-s", type=float,
                        help="seconds for the whole check: no step starts that cannot end "
                             "inside it, and each step's limit is capped at what is left")
    parser.add_argument("--expect-from", type=Path,
                        help="an earlier gpu-check.json: its measured seconds are the "
                             "expected ones")
    parser.add_argument("--cora-epochs", type=int)
    parser.add_argument("--large-graph")
    parser.add_argument("--large-epochs", type=int)
    parser.add_argument("--variants", help="the variants the run steps train (default: the "
                                           "comparison's; ddp and amp keep their own)")
    parser.add_argument("--stack-report", type=Path, help=argparse.SUPPRESS)
    return parser


def _input_error(args: argparse.Namespace) -> str:
    """The one line that says why the check cannot start here ("" when it can)."""
    absent = [name for name in ("torch", "gnnperf") if importlib.util.find_spec(name) is None]
    if absent:
        return (f"gpu_check: {sys.executable} has no {' or '.join(absent)}; run it with the "
                f"Python that has torch (PYTHON=...), through tools/gpu_check.sh (it puts this "
                f"checkout's gnnperf on PYTHONPATH)")
    if args.device.startswith("cuda"):
        import torch
        if not torch.cuda.is_available():
            return (f"gpu_check: --device {args.device} but this machine has no CUDA "
                    f"(torch {torch.__version__}); use --device cpu for the CPU part")
    elif args.device != "cpu":
        return f"gpu_check: unknown device {args.device!r}; use cuda or cpu"
    if args.budget_s is not None and args.budget_s <= SUMMARY_MARGIN_S:
        return (f"gpu_check: --budget-s {args.budget_s:g} leaves no time for a step; give more "
                f"than {SUMMARY_MARGIN_S} s")
    return ""


def main(argv: list[str] | None = None, runner: Runner | None = None) -> int:
    """Runs the check.

    Args:
        argv (list[str], optional): The command line (default: ``sys.argv``'s).
        runner (Runner, optional): What starts each step (the tests' own).

    Returns:
        int: 0 when every step ran and passed, 1 when one failed, was left
        or on a GPU was skipped, 2 on bad input.
    """
    args = _parser().parse_args(argv)
    if args.stack_report is not None:  # the stack step's own process
        args.stack_report.write_text(json.dumps(stack_report(args.device), indent=2))
        return 0
    problem = _input_error(args)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    env_out = os.environ.get("OUT")
    out = args.out or (Path(env_out) if env_out else Path("gpu-check"))
    pack = args.pack if args.pack is not None else bool(
        env_out and out.resolve() == Path(env_out).resolve())
    probe_plan = plan_for(args.device, out.resolve(), args.cora_epochs, args.large_graph,
                          args.large_epochs, args.variants)
    known = steps(probe_plan)
    pool = list(PLANS[args.plan]) if args.plan else [step.key for step in known]
    only = resolve_names(args.only, "--only", known)
    skip = resolve_names(args.skip, "--skip", known)
    expected = expected_from(args.expect_from)
    for problem in (only, skip, expected):
        if isinstance(problem, str):
            print(problem, file=sys.stderr)
            return 2
    outside = [key for key in only if key not in pool]
    if outside:
        print(f"gpu_check: --only {', '.join(outside)} is not in --plan {args.plan} (its steps: "
              f"{', '.join(pool)}); drop --plan or pick from those", file=sys.stderr)
        return 2
    selected = [key for key in pool if (not only or key in only) and key not in skip]
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gpu-check-")) if pack else out.resolve()
    plan = replace(probe_plan, out=work, selected=tuple(selected))
    by_key = {step.key: step for step in steps(plan)}
    started = _clock()
    results: list[StepResult] = []
    left: list[str] = []

    def write(running: str | None) -> dict:
        # Written before and after every step: a step that hangs the machine
        # or a kill loses nothing before it, and names the step it cut.
        doc = summary(plan, results, left, plan_name=args.plan, budget_s=args.budget_s,
                      seconds=_clock() - started, running=running, packed=pack)
        write_summary(doc, out, work if pack else None)
        return doc

    for key in selected:
        step = by_key[key]
        limit = step.timeout_s or plan.step_timeout_s
        if args.budget_s is not None:
            remaining = args.budget_s - SUMMARY_MARGIN_S - (_clock() - started)
            want = expected.get(key, step.expected(plan))
            # A step that is skipped anyway costs nothing; one that would run
            # must be expected to end inside what is left.
            if want > remaining and not skip_reason(step, plan):
                left.append(key)
                result = StepResult(step.name, LEFT, reason=(
                    f"expected ~{want:.0f} s, {max(remaining, 0):.0f} s of the budget left"),
                    key=key)
                results.append(result)
                print(f"{'LEFT':8s}{step.name}: {result.reason}", flush=True)
                continue
            limit = min(limit, max(remaining, 1))
        write(running=step.name)
        result = run_step(step, plan, runner, limit)
        own = step.timeout_s or plan.step_timeout_s
        if result.reason.startswith("timed out") and limit < own:
            result.reason += f"; cut at the budget's end (its own limit: {own} s)"
        results.append(result)
        print(f"{result.status.upper():8s}{result.name} ({result.seconds:.0f} s)"
              f"{': ' + result.reason if result.reason else ''}", flush=True)
    doc = write(running=None)
    if doc["roofs_sanity"]:
        print(doc["roofs_sanity"])
    if left:
        print(f"left for the budget: {', '.join(left)}; next: {doc['rerun']}")
    state = "passed" if doc["passed"] else ("FAILED" if doc["failed"] else "INCOMPLETE")
    print(f"{state} in {doc['seconds']:.0f} s; summary in {out / 'gpu-check.md'}"
          + (f" (steps' files in {out / ARCHIVE})" if pack else ""), flush=True)
    if pack:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if doc["passed"] else 1
