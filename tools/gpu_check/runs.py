"""The steps that run gnnperf's own commands and judge what they wrote:
``gnnperf doctor`` and the ``gnnperf run`` steps (the variants on Cora and
on the large graph, both AMP branches, DDP's launched ranks, the models)."""
from __future__ import annotations

import subprocess
from typing import Callable

from .core import FAIL, PASS, SKIP, Plan, StepResult, step_json, tail
from .roofs import roofs_sanity

# Accuracy is judged (not at chance) from this many epochs on.
ACCURACY_EPOCHS = 20


# gnnperf doctor --------------------------------------------------------------
def doctor_argv(plan: Plan) -> list[str]:
    # Its asv check is this script's own asv step.
    return ["-m", "gnnperf", "doctor", "--device", plan.device, "--skip-asv",
            "--json", str(plan.out / "doctor.json")]


def judge_doctor(plan: Plan, proc: subprocess.CompletedProcess) -> StepResult:
    """Passes when the doctor exits 0, completes and fails no check; its
    skipped checks are the reason."""
    report, failure = step_json(plan.out / "doctor.json", "doctor", proc)
    if failure:
        return failure
    checks = report["checks"]
    failed = [f"{c['name']} ({c['reason']})" if c["reason"] else c["name"]
              for c in checks if c["status"] == FAIL]
    skipped = [f"{c['name']} ({c['reason']})" for c in checks if c["status"] == SKIP]
    figures = {c["name"]: c["figure"] for c in checks if c["figure"]}
    figures["counts"] = {status: sum(c["status"] == status for c in checks)
                         for status in (PASS, FAIL, SKIP)}
    ok = proc.returncode == 0 and report["passed"] and not failed and report.get("complete")
    reason = (f"failed: {'; '.join(failed)}" if failed else
              f"skipped: {'; '.join(skipped)}" if skipped else "")
    if not failed and not ok:
        reason = f"exit {proc.returncode}, complete: {report.get('complete')}; {reason}"
    return StepResult("doctor", PASS if ok else FAIL, figures=figures, reason=reason)


# gnnperf run steps -----------------------------------------------------------
def run_argv(json_name: str, dataset: Callable[[Plan], str], epochs: Callable[[Plan], int],
             extra: Callable[[Plan], list[str]] = lambda plan: [],
             all_variants: bool = True) -> Callable[[Plan], list]:
    """A ``gnnperf run`` step's command line, writing :obj:`json_name`;
    ``--variants`` from the plan unless :obj:`all_variants` is False (the
    step names its own in :obj:`extra`)."""
    def argv(plan: Plan) -> list[str]:
        chosen = ["--variants", plan.variants] if plan.variants and all_variants else []
        return ["-m", "gnnperf", "run", "--device", plan.device, "--dataset", dataset(plan),
                "--epochs", str(epochs(plan)), "--warmup", "3", "--no-progress",
                "--json", str(plan.out / json_name), *chosen, *extra(plan)]
    return argv


def judge_run(name: str, json_name: str, want: Callable[[dict], list[str]] | None = None,
              allow_chance: bool = False) -> Callable[[Plan, object], StepResult]:
    """A ``gnnperf run`` step passes when it exits 0, completes, gives a
    result for every variant asked for (n/a only where
    :func:`gnnperf.doctor.na_problem` accepts it: a package the variant
    declares and this machine lacks, a pair that cannot combine, a
    technique's own "cannot on this device"), none at chance where its
    epochs are enough to judge, and :obj:`want` finds nothing wrong."""
    def judge(plan: Plan, proc) -> StepResult:
        from gnnperf.doctor import na_problem
        path = plan.out / json_name
        doc, failure = step_json(path, name, proc, missing="no results")
        if failure:
            return failure
        failures = doc.get("failures", {})
        problems = [f"{variant}: {error}" for variant, error in failures.items()]
        if not doc.get("complete", False):
            problems.append("the run stopped before every variant had run")
        unavailable = doc.get("unavailable", {})
        problems += [problem for problem in (
            na_problem(label, why, plan.device, plan.importable)
            for label, why in unavailable.items()) if problem]
        measured = {_label(result) for result in doc.get("results", [])}
        config = doc.get("config", {})
        problems += [f"{label}: no result" for label in (
            variant if model == "gcn" else f"{variant} [{model}]"
            for model in config.get("models", ["gcn"]) for variant in config.get("variants", []))
            if label not in measured | set(unavailable) | set(failures)]
        judged = not allow_chance and config.get("epochs", 0) >= ACCURACY_EPOCHS
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
                **{key: result["extra"][key] for key in (
                    "allreduce_share", "amp_dtype", "copy_ms_per_step", "pin_ms_per_step",
                    "world_size", "backend")
                   if result["extra"].get(key) is not None}}
            if result.get("at_chance") and judged:
                problems.append(f"{variant}: test accuracy {result['test_acc']:.3f} is at chance")
            if want is not None:
                problems.extend(f"{variant}: {problem}" for problem in want(result))
        if proc.returncode != 0 and not problems:
            problems.append(f"exit {proc.returncode}: {tail(proc.stdout)}")
        notes = [f"n/a here: {'; '.join(f'{v} ({why})' for v, why in unavailable.items())}"
                 ] if unavailable else []
        if not judged and not allow_chance:
            notes.append(f"accuracy not judged at {config.get('epochs')} epochs "
                         f"(from {ACCURACY_EPOCHS})")
        roofs = doc.get("environment", {}).get("roofs")
        if roofs:  # the roofs this run was held to: their sanity line, whichever call runs
            plausible, line = roofs_sanity(roofs)
            figures["roofs_sanity"] = line
            if not plausible:
                problems.append(line)
        reason = "; ".join(problems) or "; ".join(notes)
        return StepResult(name, FAIL if problems else PASS, figures=figures, reason=reason)
    return judge


def _label(result: dict) -> str:
    """A result's row name: the variant, with its model unless GCN (as
    ``gnnperf run`` keys its failures and n/a rows)."""
    model = result.get("model", "gcn")
    return result["variant"] if model == "gcn" else f"{result['variant']} [{model}]"


def amp_is(dtype: str) -> Callable[[dict], list[str]]:
    """A ``want`` for :func:`judge_run`: the result ran AMP in :obj:`dtype`."""
    def want(result: dict) -> list[str]:
        got = result["extra"].get("amp_dtype")
        return [] if got == dtype else [f"ran as {got}, not {dtype}"]
    return want


def _ddp_wants(plan: Plan) -> Callable[[dict], list[str]]:
    """Launched ranks on the backend the device calls for, each with a
    measured all-reduce."""
    backend = "nccl" if plan.cuda else "gloo"

    def want(result: dict) -> list[str]:
        extra, problems = result["extra"], []
        share = extra.get("allreduce_share")
        if share is None or not 0 < share < 1:
            problems.append(f"all-reduce share {share!r} (must be in (0, 1))")
        if extra.get("world_size") != plan.ddp_world or extra.get("backend") != backend:
            problems.append(f"ran on {extra.get('world_size')} rank(s) over "
                            f"{extra.get('backend')}, not {plan.ddp_world} over {backend}")
        return problems
    return want


def ddp_argv(plan: Plan) -> list[str]:
    return ["-m", "gnnperf", "run", "--device", plan.device, "--dataset", "cora",
            "--variants", "ddp,sampled+ddp", "--world-size", str(plan.ddp_world),
            "--backend", "nccl" if plan.cuda else "gloo", "--epochs",
            str(min(8, plan.cora_epochs)), "--warmup", "3",
            "--no-progress", "--json", str(plan.out / "ddp.json")]


def judge_ddp(plan: Plan, proc: subprocess.CompletedProcess) -> StepResult:
    return judge_run(ddp_name(plan), "ddp.json", _ddp_wants(plan), allow_chance=True)(plan, proc)


def ddp_name(plan: Plan) -> str:
    """The ddp step's name: its ranks and backend on this device."""
    return (f"ddp on {plan.ddp_world} rank{'s' if plan.ddp_world > 1 else ''} "
            f"({'nccl' if plan.cuda else 'gloo'})")
