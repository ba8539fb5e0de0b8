"""One prepared check of every CUDA path of the suite on a GPU machine, in
minutes: ``tools/gpu_check.sh [--device cuda] [--out DIR]``.

Steps, each a ``python -m gnnperf`` (or ``asv``) run of its own, so a CUDA
error in one cannot poison the next:

1. ``doctor``: ``gnnperf doctor`` (synchronised timing, AMP's dtype and
   fp16 with its gradient scaler, the sampler and its syncs, whole-step
   compilation, offload's side-stream copy, NVML, DDP on NCCL with two GPUs,
   the asv CUDA benchmarks, the peak-memory probe);
2. ``variants on cora`` and ``variants on <large graph>``: every variant of
   the comparison (``gnnperf run``): time, peak, accuracy; none may fail or
   train to chance (``synthetic-1m``, 10^6 edges, on CUDA);
3. ``amp bf16`` and ``amp fp16``: the two AMP branches, forced;
4. ``ddp on 2 ranks``: ``ddp`` and ``sampled+ddp`` (NCCL with two GPUs;
   gloo on CPU) with the all-reduce share;
5. ``models on cora``: every variant of SAGE, GAT and GIN (CUDA only: the
   tests train them on CPU); a variant a model cannot run is n/a there;
6. ``asv pr profile, CUDA benchmarks``: ``asv run --quick`` of the ``pr``
   profile's CUDA-only benchmarks.

It writes ``gpu-check.json``, ``gpu-check.md`` (a table) and each step's
output (``<step>.log``) into ``--out``
and exits 1 when a step failed. ``--device cpu`` runs the CPU-runnable
parts (CUDA-only steps are skipped and named); ``tests/test_gpu_check.py``
runs it that way, so it cannot rot. See docs/gpu-runner.md.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
PASS, FAIL, SKIP = "pass", "fail", "skipped"


@dataclass
class StepResult:
    """One line of the summary."""
    name: str
    status: str
    seconds: float = 0.0
    figures: dict = field(default_factory=dict)
    reason: str = ""
    command: str = ""
    log: str = ""  # the step's output, beside the summary


@dataclass
class Plan:
    """What the steps run with: the device and the sizes for it."""
    device: str
    out: Path
    cora_epochs: int
    large_graph: str
    large_epochs: int
    gpus: int
    step_timeout_s: int


def plan_for(device: str, out: Path, cora_epochs: int | None = None,
             large_graph: str | None = None, large_epochs: int | None = None) -> Plan:
    """On CUDA a 10^6-edge graph and enough epochs for the accuracy to mean
    something; on CPU the smallest sizes that still exercise every step (a
    CPU epoch of synthetic-1m takes seconds per variant)."""
    cuda = device.startswith("cuda")
    gpus = 0
    if cuda:
        import torch
        gpus = torch.cuda.device_count()
    return Plan(device=device, out=out,
                cora_epochs=cora_epochs or (50 if cuda else 20),
                large_graph=large_graph or ("synthetic-1m" if cuda else "synthetic-10k"),
                large_epochs=large_epochs or (10 if cuda else 6),
                gpus=gpus, step_timeout_s=420 if cuda else 240)


# Each step: name, CUDA-only or GPUs needed, the argv after the interpreter,
# and what its output must show.
@dataclass
class Step:
    name: str
    argv: Callable[[Plan], list[str]]
    judge: Callable[[Plan, "subprocess.CompletedProcess"], StepResult]
    cuda_only: bool = False
    gpus_needed: int = 0
    env: dict = field(default_factory=dict)
    outputs: tuple[str, ...] = ()  # files it writes into --out (removed before it runs)
    timeout_s: int | None = None  # its own limit (None: the plan's)
    before: Callable[[Plan], None] | None = None


def _tail(text: str, lines: int = 3) -> str:
    kept = [line for line in text.strip().splitlines() if line.strip()]
    return " | ".join(kept[-lines:])[-400:]


def _doctor_argv(plan: Plan) -> list[str]:
    # Its asv check is this script's own asv step.
    return ["-m", "gnnperf", "doctor", "--device", plan.device, "--skip-asv",
            "--json", str(plan.out / "doctor.json")]


def _judge_doctor(plan: Plan, proc) -> StepResult:
    path = plan.out / "doctor.json"
    if not path.is_file():
        return StepResult("doctor", FAIL, reason=f"no report (exit {proc.returncode}): "
                                                 f"{_tail(proc.stderr or proc.stdout)}")
    report = json.loads(path.read_text())
    checks = report["checks"]
    failed = [c["name"] for c in checks if c["status"] == FAIL]
    skipped = [f"{c['name']} ({c['reason']})" for c in checks if c["status"] == SKIP]
    figures = {c["name"]: c["figure"] for c in checks if c["figure"]}
    figures["counts"] = {status: sum(c["status"] == status for c in checks)
                         for status in (PASS, FAIL, SKIP)}
    ok = proc.returncode == 0 and report["passed"] and not failed and report.get("complete")
    reason = (f"failed: {'; '.join(failed)}" if failed else
              f"skipped: {'; '.join(skipped)}" if skipped else "")
    return StepResult("doctor", PASS if ok else FAIL, figures=figures, reason=reason)


def _run_argv(json_name: str, dataset: Callable[[Plan], str], epochs: Callable[[Plan], int],
              extra: Callable[[Plan], list[str]] = lambda plan: []) -> Callable[[Plan], list]:
    def argv(plan: Plan) -> list[str]:
        return ["-m", "gnnperf", "run", "--device", plan.device, "--dataset", dataset(plan),
                "--epochs", str(epochs(plan)), "--warmup", "3", "--no-progress",
                "--json", str(plan.out / json_name), *extra(plan)]
    return argv


def _judge_run(name: str, json_name: str, want: Callable[[dict], list[str]] | None = None,
               allow_chance: bool = False) -> Callable[[Plan, object], StepResult]:
    """A ``gnnperf run`` step passes when it exits 0, completes, gives a
    result for every variant asked for (n/a only where an optional package is
    missing: its reason names the ``pip install``), none at chance unless
    :obj:`allow_chance`, and :obj:`want` finds nothing wrong in a result."""
    def judge(plan: Plan, proc) -> StepResult:
        path = plan.out / json_name
        if not path.is_file():
            return StepResult(name, FAIL, reason=f"no results (exit {proc.returncode}): "
                                                 f"{_tail(proc.stderr or proc.stdout)}")
        doc = json.loads(path.read_text())
        failures = doc.get("failures", {})
        problems = [f"{variant}: {error}" for variant, error in failures.items()]
        if not doc.get("complete", False):
            problems.append("the run stopped before every variant had run")
        unavailable = doc.get("unavailable", {})
        # n/a is right for a missing optional package and for a variant a
        # model cannot run (sparse with GAT), nothing else.
        problems += [f"{variant} n/a: {why}" for variant, why in unavailable.items()
                     if "pip install" not in why and "cannot run with model" not in why]
        measured = {_label(result) for result in doc.get("results", [])}
        config = doc.get("config", {})
        problems += [f"{label}: no result" for label in (
            variant if model == "gcn" else f"{variant} [{model}]"
            for model in config.get("models", ["gcn"]) for variant in config.get("variants", []))
            if label not in measured | set(unavailable) | set(failures)]
        figures = {}
        for result in doc.get("results", []):
            variant = _label(result)
            peak = result.get("cuda_peak_bytes") or result.get("step_peak_bytes")
            figures[variant] = {
                "epoch_ms": round(result["epoch_time"]["median"] * 1e3, 3),
                "peak_mib": None if peak is None else round(peak / 2 ** 20, 1),
                "test_acc": round(result["test_acc"], 3),
                **({"compile_s": round(result["compile_s"], 2)}
                   if result.get("compile_s") is not None else {}),
                **{key: result["extra"][key] for key in ("allreduce_share", "amp_dtype",
                                                         "copy_ms_per_step")
                   if result["extra"].get(key) is not None}}
            if result.get("at_chance") and not allow_chance:
                problems.append(f"{variant}: test accuracy {result['test_acc']:.3f} is at chance")
            if want is not None:
                problems.extend(f"{variant}: {problem}" for problem in want(result))
        if proc.returncode != 0 and not problems:
            problems.append(f"exit {proc.returncode}: {_tail(proc.stderr or proc.stdout)}")
        reason = "; ".join(problems) or (
            "n/a here: " + "; ".join(f"{v} ({why})" for v, why in unavailable.items())
            if unavailable else "")
        return StepResult(name, FAIL if problems else PASS, figures=figures, reason=reason)
    return judge


def _label(result: dict) -> str:
    """A result's row name: the variant, with its model unless GCN (as
    ``gnnperf run`` keys its failures and n/a rows)."""
    model = result.get("model", "gcn")
    return result["variant"] if model == "gcn" else f"{result['variant']} [{model}]"


def _amp_is(dtype: str) -> Callable[[dict], list[str]]:
    def want(result: dict) -> list[str]:
        got = result["extra"].get("amp_dtype")
        return [] if got == dtype else [f"ran as {got}, not {dtype}"]
    return want


def _allreduce_share(result: dict) -> list[str]:
    share = result["extra"].get("allreduce_share")
    if share is None or not 0 < share < 1:
        return [f"all-reduce share {share!r} (must be in (0, 1))"]
    return []


def _ddp_argv(plan: Plan) -> list[str]:
    return ["-m", "gnnperf", "run", "--device", plan.device, "--dataset", "cora",
            "--variants", "ddp,sampled+ddp", "--world-size", "2", "--epochs", "8",
            "--warmup", "3", "--no-progress", "--json", str(plan.out / "ddp.json")]


def _head() -> str:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True).stdout.strip()


def _asv_machine(plan: Plan) -> None:
    # asv asks for the machine's details once, on stdin, unless told --yes.
    subprocess.run([sys.executable, "-m", "asv", "machine", "--yes"], cwd=ROOT,
                   capture_output=True, stdin=subprocess.DEVNULL, timeout=120)


def _asv_argv(plan: Plan) -> list[str]:
    # spawn: the config's forkserver is unverified on CUDA (docs/asv.md).
    return ["-m", "asv", "run", "--quick", "--python=same", "--launch-method", "spawn",
            "-b", "track_cuda|Offload", "--set-commit-hash", _head()]


def _judge_asv(plan: Plan, proc) -> StepResult:
    from gnnperf.doctor import judge_asv_run
    status, figure, reason = judge_asv_run(proc, ROOT, _head())
    return StepResult("asv pr profile, CUDA benchmarks", status, figures={"asv": figure},
                      reason=reason)


def steps(plan: Plan) -> list[Step]:
    large = f"variants on {plan.large_graph}" + (" (large-graph step)"
                                                  if plan.large_graph == "cora" else "")
    return [
        Step("doctor", _doctor_argv, _judge_doctor, outputs=("doctor.json",)),
        Step("variants on cora",
             _run_argv("variants-cora.json", lambda p: "cora", lambda p: p.cora_epochs),
             _judge_run("variants on cora", "variants-cora.json"),
             outputs=("variants-cora.json",)),
        # A handful of epochs on a large graph measures time and memory, not
        # accuracy: a crash, a non-finite loss or an n/a fails this step.
        Step(large,
             _run_argv("variants-large.json", lambda p: p.large_graph, lambda p: p.large_epochs),
             _judge_run(large, "variants-large.json", allow_chance=True),
             outputs=("variants-large.json",)),
        Step("amp bf16",
             _run_argv("amp-bf16.json", lambda p: "cora", lambda p: p.cora_epochs,
                       lambda p: ["--variants", "amp", "--amp-dtype", "bf16"]),
             _judge_run("amp bf16", "amp-bf16.json", _amp_is("bfloat16")),
             outputs=("amp-bf16.json",)),
        Step("amp fp16",
             _run_argv("amp-fp16.json", lambda p: "cora", lambda p: p.cora_epochs,
                       lambda p: ["--variants", "amp", "--amp-dtype", "fp16"]),
             _judge_run("amp fp16", "amp-fp16.json", _amp_is("float16")),
             outputs=("amp-fp16.json",)),
        Step("ddp on 2 ranks", _ddp_argv, _judge_run("ddp on 2 ranks", "ddp.json",
                                                     _allreduce_share),
             gpus_needed=2, outputs=("ddp.json",)),
        Step("models on cora",
             _run_argv("models-cora.json", lambda p: "cora", lambda p: p.cora_epochs,
                       lambda p: ["--model", "sage,gat,gin"]),
             _judge_run("models on cora", "models-cora.json"), cuda_only=True,
             outputs=("models-cora.json",)),
        # asv's quick run compiles the compiled variants cold in fresh
        # interpreters: the longest step.
        Step("asv pr profile, CUDA benchmarks", _asv_argv, _judge_asv, cuda_only=True,
             env={"GNNPERF_ASV_PROFILE": "pr"}, timeout_s=900, before=_asv_machine),
    ]


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def run_step(step: Step, plan: Plan,
             runner: Callable[[list[str], dict, int], object] | None = None) -> StepResult:
    """Runs one step (skipped with its reason where this machine cannot)."""
    cuda = plan.device.startswith("cuda")
    if step.cuda_only and not cuda:
        return StepResult(step.name, SKIP, reason="CUDA only; this run is on CPU")
    if cuda and step.gpus_needed > plan.gpus:
        return StepResult(step.name, SKIP, reason=f"needs {step.gpus_needed} GPUs; this "
                                                  f"machine has {plan.gpus}")
    for name in step.outputs:  # a step that dies before writing is not judged on old files
        (plan.out / name).unlink(missing_ok=True)
    if step.before is not None:
        step.before(plan)
    argv = step.argv(plan)
    env = {**os.environ, **step.env}
    limit = step.timeout_s or plan.step_timeout_s
    log = plan.out / f"{_slug(step.name)}.log"
    command = "python " + " ".join(argv)
    start = time.perf_counter()
    try:
        proc = (runner or _subprocess)(argv, env, limit)
    except subprocess.TimeoutExpired as exc:
        log.write_text(f"$ {command}\n{_text(exc.stdout)}\n{_text(exc.stderr)}")
        return StepResult(step.name, FAIL, time.perf_counter() - start,
                          reason=f"timed out after {limit} s (its output so far: {log.name})",
                          command=command, log=log.name)
    seconds = time.perf_counter() - start
    log.write_text(f"$ {command}\n{proc.stdout}\n{proc.stderr}")
    result = step.judge(plan, proc)
    result.seconds, result.command, result.log = seconds, command, log.name
    return result


def _text(output) -> str:
    return output.decode(errors="replace") if isinstance(output, bytes) else (output or "")


def _subprocess(argv: list[str], env: dict, timeout: int):
    """The step in a session of its own: on a timeout its whole process group
    (asv's benchmark processes, DDP's ranks) is killed, so nothing of it holds
    the GPU while the next step runs."""
    proc = subprocess.Popen([sys.executable, *argv], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        raise subprocess.TimeoutExpired(proc.args, timeout, stdout, stderr) from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def markdown(summary: dict) -> str:
    lines = [f"# GPU check on {summary['device']}: "
             f"{'PASSED' if summary['passed'] else 'FAILED'} in {summary['seconds']:.0f} s",
             "", f"{summary['environment']}", "",
             "| step | status | seconds | figures | reason |", "|---|---|---|---|---|"]
    for step in summary["steps"]:
        figures = "; ".join(
            f"{key}: " + (", ".join(f"{k} {_short(v)}" for k, v in value.items())
                          if isinstance(value, dict) else str(value))
            for key, value in step["figures"].items())
        lines.append(f"| {step['name']} | {step['status']} | {step['seconds']:.1f} | "
                     f"{figures.replace('|', '/')[:1500]} | {step['reason'].replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def _short(value) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def _environment(device: str) -> str:
    import torch
    where = "CPU"
    if device.startswith("cuda") and torch.cuda.is_available():
        where = (f"{torch.cuda.get_device_name(0)} x {torch.cuda.device_count()}, "
                 f"CUDA {torch.version.cuda}")
    return f"torch {torch.__version__}, {where}, {os.cpu_count()} CPU cores"


def main(argv: list[str] | None = None,
         runner: Callable[[list[str], dict, int], object] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/gpu_check.sh", description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--out", type=Path, default=Path("gpu-check"),
                        help="folder for gpu-check.json, gpu-check.md and each step's output")
    parser.add_argument("--cora-epochs", type=int)
    parser.add_argument("--large-graph")
    parser.add_argument("--large-epochs", type=int)
    args = parser.parse_args(argv)
    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("gnnperf") is None:
        print(f"gpu_check: {sys.executable} has no torch or gnnperf; run it in the environment "
              f"gnnperf is installed in (e.g. . .venv/bin/activate, or PYTHON=...)",
              file=sys.stderr)
        return 2
    if args.device.startswith("cuda"):
        import torch
        if not torch.cuda.is_available():
            print(f"gpu_check: --device {args.device} but this machine has no CUDA "
                  f"(torch {torch.__version__}); use --device cpu for the CPU part",
                  file=sys.stderr)
            return 2
    elif args.device != "cpu":
        print(f"gpu_check: unknown device {args.device!r}; use cuda or cpu", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    plan = plan_for(args.device, args.out.resolve(), args.cora_epochs, args.large_graph,
                    args.large_epochs)
    started = time.perf_counter()
    results = []
    summary_path = plan.out / "gpu-check.json"
    for step in steps(plan):
        result = run_step(step, plan, runner)
        results.append(result)
        print(f"{result.status.upper():8s}{result.name} ({result.seconds:.0f} s)"
              f"{': ' + result.reason if result.reason else ''}", flush=True)
        summary = {"device": plan.device, "environment": _environment(plan.device),
                   "passed": all(r.status != FAIL for r in results),
                   "seconds": time.perf_counter() - started,
                   "steps": [asdict(r) for r in results]}
        # Written after every step: a step that hangs the machine loses no result.
        summary_path.write_text(json.dumps(summary, indent=2))
        (plan.out / "gpu-check.md").write_text(markdown(summary))
    print(f"{'passed' if summary['passed'] else 'FAILED'} in {summary['seconds']:.0f} s; "
          f"summary in {plan.out / 'gpu-check.md'}")
    return 0 if summary["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
