"""The stack check: what this machine has for the check (torch, CUDA, the
GPU, NCCL, every module a step needs, the compilers, git), found in a
process of its own, and what each missing thing does to the chosen steps."""
from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import time
from typing import Callable

from . import core
from .core import FAIL, GNNPERF_NEEDS, OPTIONAL, PASS, ROOT, SCRIPT, Plan, Step, StepResult


def stack_report(device: str) -> dict:
    """What this machine has for the check, in its own process (CUDA is
    initialised here, not in the script's).

    Args:
        device (str): The device the check runs on; on ``cuda`` the GPUs
            are listed and a small matmul runs on one.

    Returns:
        dict: versions, the GPUs, whether CUDA works, NCCL's version, every
        module a step needs (imported: ``ok`` and its version or error),
        the compilers and git, and the seconds it took.
    """
    start = time.perf_counter()
    modules = {}
    for name in (*GNNPERF_NEEDS, "gnnperf", *OPTIONAL):
        ok, detail = core.probe(name)
        modules[name] = {"ok": ok, "detail": detail}
    report = {"python": platform.python_version(), "executable": sys.executable,
              "modules": modules, "cores": os.cpu_count()}
    if modules["torch"]["ok"]:
        import torch
        report["torch"] = torch.__version__
        report["cuda"] = torch.version.cuda
        report["gpus"] = []
        if device.startswith("cuda"):
            try:
                for index in range(torch.cuda.device_count()):
                    props = torch.cuda.get_device_properties(index)
                    report["gpus"].append({"name": props.name,
                                           "capability": f"{props.major}.{props.minor}",
                                           "memory_gib": round(props.total_memory / 2 ** 30, 1)})
                a = torch.randn(1024, 1024, device=device)
                (a @ a).sum().item()  # the runtime works, not only the driver
                report["cuda_works"] = "ok"
                nccl = torch.cuda.nccl.version()  # a tuple; an int in older torch
                report["nccl"] = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl)
            except Exception as exc:  # noqa: BLE001 -- reported: every CUDA step will fail
                report["cuda_works"] = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
    tools = {"git": shutil.which("git"), "dot_git": (ROOT / ".git").exists(),
             # Triton builds its launcher with a C compiler ($CC, else gcc or clang).
             "cc": shutil.which(os.environ.get("CC", "gcc")) or shutil.which("clang")}
    if modules["gnnperf"]["ok"]:
        from gnnperf.variants.compiled import cpp_compiler
        tools["c++"] = cpp_compiler()  # Inductor's CPU kernels, found as Inductor does
    report["tools"] = tools
    if modules["torch_geometric"]["ok"]:
        report["pyg"] = modules["torch_geometric"]["detail"]
    report["seconds"] = time.perf_counter() - start
    return report


def stack_argv(plan: Plan) -> list[str]:
    return [str(SCRIPT), "--stack-report", str(plan.out / "stack.json"),
            "--device", plan.device]


def missing_effects(plan: Plan, report: dict, all_steps: Callable[[Plan], list[Step]]
                    ) -> list[str]:
    """Each missing thing in :obj:`report` and what it does to the selected
    steps (of :obj:`all_steps`, the step table, which imports this module)."""
    by_key = {step.key: step for step in all_steps(plan)}
    chosen = [by_key[key] for key in plan.selected if key in by_key]
    lines = []
    for name, entry in report.get("modules", {}).items():
        if entry["ok"]:
            continue
        skipped = [step.key for step in chosen if name in step.needs]
        effect = (f"skips {', '.join(skipped)}" if skipped
                  else OPTIONAL.get(name, "every gnnperf step fails"))
        lines.append(f"{name} ({entry['detail']}): {effect}")
    tools = report.get("tools", {})
    compiled = [key for key in plan.selected
                if key in ("doctor", "variants-cora", "variants-large", "models", "asv")]
    if plan.cuda and not tools.get("cc") and compiled:
        lines.append(f"no C compiler (Triton builds its launcher with $CC, gcc or clang): the "
                     f"compiled variants fail in {', '.join(compiled)}")
    if not plan.cuda and not tools.get("c++") and compiled:
        lines.append(f"no C++ compiler: the compiled variants are n/a in {', '.join(compiled)}")
    if "asv" in plan.selected and not tools.get("dot_git") and not tools.get("git"):
        lines.append("no .git and no git: the asv step is skipped (asv labels results by commit)")
    return lines


def judge_stack(plan: Plan, proc: subprocess.CompletedProcess,
                all_steps: Callable[[Plan], list[Step]]) -> StepResult:
    """Fails on a missing gnnperf dependency or (on CUDA) a CUDA that does
    not work; records what imports here in :obj:`plan` for the later
    steps' skip rules, and names what is missing and which of the selected
    steps that skips."""
    report, failure = core.step_json(plan.out / "stack.json", "stack check", proc)
    if failure:
        return failure
    plan.modules.update({name: entry["ok"] for name, entry in report["modules"].items()})
    problems = [f"{name} missing ({report['modules'][name]['detail']})"
                for name in (*GNNPERF_NEEDS, "gnnperf") if not report["modules"][name]["ok"]]
    if plan.cuda and report.get("cuda_works") != "ok":
        problems.append(f"CUDA does not work: {report.get('cuda_works', 'not tried')}")
    gpus = report.get("gpus") or []
    figures = {"versions": {"python": report["python"], "torch": report.get("torch"),
                            "cuda": report.get("cuda"), "pyg": report.get("pyg"),
                            "nccl": report.get("nccl")},
               "gpu": (f"{gpus[0]['name']} x {len(gpus)} (capability {gpus[0]['capability']}, "
                       f"{gpus[0]['memory_gib']} GiB)" if gpus else "none"),
               "tools": {k: v for k, v in report.get("tools", {}).items()}}
    effects = missing_effects(plan, report, all_steps)
    reason = "; ".join(problems + (["missing: " + "; ".join(effects)] if effects else []))
    return StepResult("stack check", FAIL if problems else PASS, figures=figures, reason=reason)
