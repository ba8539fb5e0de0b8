"""Running one step: skipped with its reason where this machine cannot run
it, else in a process group of its own with its output streamed into its
log, killed whole at its limit, and judged."""
from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from .core import FAIL, OPTIONAL, ROOT, SKIP, WHEELS_HINT, Plan, Step, StepResult

# What starts a step: (argv after the interpreter, env, limit in seconds,
# log, cwd) -> exit code; raises subprocess.TimeoutExpired at the limit.
# The tests pass their own.
Runner = Callable[[list, dict, float, Path, Path], int]


def skip_reason(step: Step, plan: Plan) -> str:
    """Why :obj:`step` cannot run here, found before it starts ("" when it can)."""
    if step.cuda_only and not plan.cuda:
        return "CUDA only; this run is on CPU"
    missing = [name for name in step.needs if not plan.importable(name)]
    if missing:
        hint = WHEELS_HINT if set(missing) & set(OPTIONAL) else "pip install them"
        return f"needs {', '.join(missing)}, not importable here; {hint}"
    return ""


def run_step(step: Step, plan: Plan, runner: Runner | None = None,
             limit_s: float | None = None) -> StepResult:
    """Runs one step (skipped with its reason where this machine cannot),
    its output streamed into ``<key>.log`` as it runs.

    Args:
        step (Step): The step.
        plan (Plan): What it runs with.
        runner (Runner, optional): What starts it (default: a process
            group of its own).
        limit_s (float, optional): Its time limit (default: its own limit,
            else the plan's).

    Returns:
        StepResult: its judge's verdict; a fail where it timed out or its
        judge raised.
    """
    def done(status: str, reason: str, seconds: float = 0.0, **more) -> StepResult:
        return StepResult(step.name, status, seconds, reason=reason, key=step.key, **more)
    why = skip_reason(step, plan)
    if why:
        return done(SKIP, why)
    for name in step.outputs:  # a step that dies before writing is not judged on old files
        (plan.out / name).unlink(missing_ok=True)
    if step.before is not None:
        why = step.before(plan)
        if why:
            return done(SKIP, why)
    argv = step.argv(plan)
    env = step.env(plan) if step.env is not None else {**os.environ}
    limit = limit_s if limit_s is not None else (step.timeout_s or plan.step_timeout_s)
    log = plan.out / f"{step.key}.log"
    command = "python " + " ".join(argv)
    log.write_text(f"$ {command}\n")
    start = time.perf_counter()
    try:
        code = (runner or _subprocess)(argv, env, limit,
                                       log, step.cwd(plan) if step.cwd else ROOT)
    except subprocess.TimeoutExpired:
        return done(FAIL, f"timed out after {limit:.0f} s (its output so far: {log.name})",
                    time.perf_counter() - start, command=command, log=log.name)
    seconds = time.perf_counter() - start
    proc = subprocess.CompletedProcess(argv, code, log.read_text(errors="replace"), "")
    try:
        result = step.judge(plan, proc)
    except Exception as exc:  # noqa: BLE001 -- a judge's bug fails its step, not the check
        result = done(FAIL, f"its output could not be judged ({type(exc).__name__}: {exc}); "
                            f"see {log.name}")
    result.seconds, result.command, result.log, result.key = seconds, command, log.name, step.key
    return result


def die_with_parent() -> None:
    """A ``preexec_fn``: the child is SIGKILLed when the process that started
    it dies, SIGKILL included (a killed script leaves no step running on the
    GPU; ``tools/under_load.py`` no busy loop on a core)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the timeout's group kill remains
        pass


def _subprocess(argv: list[str], env: dict, timeout: float, log: Path, cwd: Path) -> int:
    """The step in a process group of its own, its output appended to
    :obj:`log` as it comes: at its limit the whole group (asv's benchmark
    processes, DDP's ranks) is killed, so nothing of it holds the GPU while
    the next step runs. The same session as the script: a command runner
    that ends the session's processes ends the step's too."""
    with open(log, "a") as out:
        proc = subprocess.Popen([sys.executable, *argv], cwd=cwd, env=env, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                process_group=0, preexec_fn=die_with_parent)
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
