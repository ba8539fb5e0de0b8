"""The plan of the check: every step in the order a whole check runs them,
the two calls (``--plan call1|call2``), and the step names ``--only``,
``--skip`` and ``--expect-from`` take."""
from __future__ import annotations

import json
import re
from functools import partial
from pathlib import Path

from .asv_step import asv_argv, asv_before, asv_cwd, asv_env, judge_asv
from .core import FAIL, GNNPERF_NEEDS, PASS, Plan, Step
from .environment import judge_stack, stack_argv
from .roofs import judge_roofs, judge_sampler, roofs_argv, sampler_argv
from .runs import (amp_is, ddp_argv, ddp_name, doctor_argv, judge_ddp, judge_doctor,
                   judge_run, run_argv)

PLANS = {
    # The check in two commands, for a runner that limits how long one
    # command may run (each well under 10 minutes); the cheap steps that
    # only a GPU can check come first, so a budget that runs short leaves
    # the longest ones.
    "call1": ("stack", "ddp", "amp-bf16", "amp-fp16", "doctor", "variants-cora",
              "variants-large"),
    "call2": ("stack", "roofs", "sampler", "models", "asv"),
}


def steps(plan: Plan) -> list[Step]:
    """Every step, in the order a whole check runs them. Expected seconds:
    CUDA ones are estimates for one H100/H200 (no GPU has run them yet;
    ``--expect-from`` takes a run's measured ones), CPU ones measured at
    the CPU sizes on a 2-core machine.

    Args:
        plan (Plan): The device and sizes the steps' command lines take.

    Returns:
        list[Step]: the stack check first, the asv step last.
    """
    large = f"variants on {plan.large_graph}" + (" (large-graph step)"
                                                  if plan.large_graph == "cora" else "")
    return [
        # The stack check names which of these a missing module skips.
        Step("stack", "stack check", stack_argv, partial(judge_stack, all_steps=steps),
             needs=(), expected_s=(20, 6), outputs=("stack.json",), timeout_s=120),
        Step("doctor", "doctor", doctor_argv, judge_doctor, expected_s=(150, 45),
             outputs=("doctor.json",)),
        Step("variants-cora", "variants on cora",
             run_argv("variants-cora.json", lambda p: "cora", lambda p: p.cora_epochs),
             judge_run("variants on cora", "variants-cora.json"), expected_s=(90, 35),
             outputs=("variants-cora.json",)),
        # A handful of epochs on a large graph measures time and memory, not
        # accuracy: a crash, a non-finite loss or an n/a fails this step.
        Step("variants-large", large,
             run_argv("variants-large.json", lambda p: p.large_graph, lambda p: p.large_epochs),
             judge_run(large, "variants-large.json", allow_chance=True), expected_s=(120, 25),
             outputs=("variants-large.json",)),
        Step("amp-bf16", "amp bf16",
             run_argv("amp-bf16.json", lambda p: "cora", lambda p: p.cora_epochs,
                      lambda p: ["--variants", "amp", "--amp-dtype", "bf16"], False),
             judge_run("amp bf16", "amp-bf16.json", amp_is("bfloat16")), expected_s=(20, 8),
             outputs=("amp-bf16.json",)),
        Step("amp-fp16", "amp fp16",
             run_argv("amp-fp16.json", lambda p: "cora", lambda p: p.cora_epochs,
                      lambda p: ["--variants", "amp", "--amp-dtype", "fp16"], False),
             judge_run("amp fp16", "amp-fp16.json", amp_is("float16")), expected_s=(20, 8),
             outputs=("amp-fp16.json",)),
        Step("ddp", ddp_name(plan), ddp_argv, judge_ddp, expected_s=(30, 10),
             outputs=("ddp.json",)),
        Step("models", "models on cora",
             run_argv("models-cora.json", lambda p: "cora", lambda p: p.cora_epochs,
                      lambda p: ["--model", "sage,gat,gin"]),
             judge_run("models on cora", "models-cora.json"), cuda_only=True,
             expected_s=(180, 60), outputs=("models-cora.json",)),
        Step("roofs", "roofs", roofs_argv, judge_roofs, expected_s=(15, 6),
             outputs=("roofs.json",)),
        Step("sampler", "sampler", sampler_argv, judge_sampler, expected_s=(20, 8),
             outputs=("sampler.json",)),
        # asv's quick run compiles the compiled variants cold in fresh
        # interpreters: the longest step.
        Step("asv", "asv CUDA benchmarks", asv_argv, judge_asv, cuda_only=True,
             needs=(*GNNPERF_NEEDS, "asv", "asv_runner"), expected_s=(300, 300),
             env=asv_env, timeout_s=900, before=asv_before, cwd=asv_cwd),
    ]


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def resolve_names(text: str | None, option: str, known: list[Step]) -> list[str] | str:
    """Step keys from a comma list of keys, names or names' slugs.

    Args:
        text (str, optional): The option's value (None: not given).
        option (str): The option, for the error.
        known (list[Step]): The steps to pick from.

    Returns:
        list[str] | str: the keys in the order given, or the one-line
        error naming the valid ones.
    """
    if text is None:
        return []
    by_name = {}
    for step in known:
        for alias in (step.key, step.name, _slug(step.name)):
            by_name[alias.lower()] = step.key
    by_name["stack-check"] = by_name["stack"]
    keys, unknown = [], []
    for part in (p.strip() for p in text.split(",")):
        if part:
            key = by_name.get(part.lower())
            (keys.append(key) if key else unknown.append(part))
    if unknown or not keys:
        return (f"gpu_check: unknown step {', '.join(map(repr, unknown)) or repr(text)} in "
                f"{option}; valid: {', '.join(step.key for step in known)}")
    return keys


def expected_from(path: Path | None) -> dict[str, float] | str:
    """Measured seconds per step key from an earlier run's gpu-check.json
    (steps that ran to a pass or a fail), or the one-line error."""
    if path is None:
        return {}
    try:
        summary = json.loads(path.read_text())
        return {step["key"]: float(step["seconds"]) for step in summary["steps"]
                if step.get("key") and step["status"] in (PASS, FAIL) and step["seconds"] > 0}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"gpu_check: --expect-from {path}: not a gpu-check.json ({type(exc).__name__})"
