"""One prepared check of every CUDA path of the suite on a GPU machine, in
minutes: ``tools/gpu_check.sh [--device cuda] [--plan call1|call2]
[--budget-s S] [--only|--skip STEPS] [--out DIR]``.

Steps (``--only``/``--skip`` take their keys, or their names), each a
process of its own, so a CUDA error in one cannot poison the next:

- ``stack``: the stack check: torch, CUDA, PyG and gnnperf's own
  dependencies, the GPU, NCCL, and everything a later step needs (asv,
  asv_runner, pymetis, nvidia-ml-py, the compilers, git), naming what is
  missing and which later steps that skips or makes n/a;
- ``doctor``: ``gnnperf doctor`` (its asv check is the ``asv`` step);
- ``variants-cora``, ``variants-large``: every variant of the comparison
  (``gnnperf run``) on Cora and on a 10^6-edge graph (CUDA);
- ``amp-bf16``, ``amp-fp16``: both AMP branches, forced;
- ``ddp``: ``ddp`` and ``sampled+ddp`` in launched ranks: two GPUs, or one
  GPU as a group of one (NCCL: forked ranks, ``set_device``, NCCL's set-up,
  the event-timed all-reduce); one rank on gloo on CPU;
- ``models``: every variant of SAGE, GAT and GIN (CUDA only);
- ``roofs``: ``gnnperf roofs`` and its sanity line against the GPU's
  published fp32 and memory figures;
- ``sampler``: ``gnnperf sampler`` on the large graph;
- ``asv``: ``asv run --quick`` of the ``pr`` profile's CUDA benchmarks (CUDA
  only; in a throwaway commit of a temporary copy where there is no .git).

``--plan call1`` and ``--plan call2`` are the two calls of a borrowed GPU
window (docs/gpu-runner.md). ``--budget-s`` starts no step that cannot
finish inside it (each step's expected seconds on this device) and caps
each step's limit at what is left; what it left is named. Every step's
JSON and log and the summary (``gpu-check.json``, ``gpu-check.md``) are
written as each step ends; in the device tool's ``$OUT`` (the default
``--out`` where it is set), which brings back 8 files, the steps' files go
into one archive beside the summary, rewritten after each step. Exit 0
when every step ran and passed (on CPU the CUDA-only steps skip), 1 when
one failed, was left, or on a GPU was skipped (a package missing), 2 on
bad input. ``--device cpu`` runs the CPU-runnable parts; tests/test_gpu_check.py
runs them, so the script cannot rot.
"""
from __future__ import annotations

import argparse
import atexit
import ctypes
import importlib
import importlib.util
import io
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = Path(__file__).resolve()
PASS, FAIL, SKIP, LEFT = "pass", "fail", "skipped", "left"
PLANS = {
    # The two calls of a borrowed window, each well under its 10-minute
    # command limit; the cheap steps that only a GPU can check come first,
    # so a budget that runs short leaves the longest ones.
    "call1": ("stack", "ddp", "amp-bf16", "amp-fp16", "doctor", "variants-cora",
              "variants-large"),
    "call2": ("stack", "roofs", "sampler", "models", "asv"),
}
# What every gnnperf step imports (pyproject's dependencies; matplotlib only
# for charts, which no step draws): a step is skipped without one.
GNNPERF_NEEDS = ("torch", "torch_geometric", "numpy", "scipy", "tabulate", "tqdm", "filelock")
# Optional packages and what their absence does (the stack check says it).
OPTIONAL = {
    "asv": "the asv step is skipped",
    "asv_runner": "the asv step is skipped",
    "pymetis": "the cluster variants are n/a",
    "pynvml": "the doctor's NVML check is skipped, GPU utilisation columns are n/a",
}
WHEELS_HINT = "install the wheel bundle: tools/gpu_wheels.sh, docs/gpu-runner.md"
# Time kept at the budget's end for the last summary and the archive.
SUMMARY_MARGIN_S = 5
ARCHIVE = "gpu-check-steps.tar.gz"
# The device tool brings back files of at most 16 MiB: a log is cut to its
# end in the archive past this.
LOG_CAP_BYTES = 4 * 2 ** 20
# Accuracy is judged (not at chance) from this many epochs on.
ACCURACY_EPOCHS = 20
# The budget's clock (the tests replace it).
_clock = time.perf_counter


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
    key: str = ""


@dataclass
class Plan:
    """What the steps run with: the device, the sizes for it, where their
    files go, and what the stack check found (module -> importable)."""
    device: str
    out: Path
    cora_epochs: int
    large_graph: str
    large_epochs: int
    gpus: int
    step_timeout_s: int
    variants: str | None = None
    modules: dict = field(default_factory=dict)
    selected: tuple = ()

    @property
    def cuda(self) -> bool:
        return self.device.startswith("cuda")

    @property
    def ddp_world(self) -> int:
        """Two ranks where two GPUs are; else one (a one-GPU group on CUDA)."""
        return min(2, self.gpus) if self.cuda else 1

    def importable(self, name: str) -> bool:
        """From the stack check where it ran, else found here and now."""
        if name not in self.modules:
            self.modules[name] = probe(name)[0]
        return bool(self.modules[name])


def plan_for(device: str, out: Path, cora_epochs: int | None = None,
             large_graph: str | None = None, large_epochs: int | None = None,
             variants: str | None = None) -> Plan:
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
                gpus=gpus, step_timeout_s=420 if cuda else 240, variants=variants)


def probe(name: str) -> tuple[bool, str]:
    """Whether module :obj:`name` imports here, and its version or the
    error (one line). The stack check and the skip rules ask this (tests
    fake it)."""
    try:
        module = importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 -- a broken install is "missing", with its error
        text = str(exc).strip().splitlines()
        return False, f"{type(exc).__name__}: {text[0] if text else ''}"[:200]
    return True, str(getattr(module, "__version__", "") or "present")


@dataclass
class Step:
    """One step: what it runs, how it is judged, what it needs, how long it
    is expected to take (CUDA, CPU) and its own time limit (None: the plan's)."""
    key: str
    name: str
    argv: Callable[[Plan], list[str]]
    judge: Callable[[Plan, "subprocess.CompletedProcess"], StepResult]
    cuda_only: bool = False
    needs: tuple[str, ...] = GNNPERF_NEEDS
    expected_s: tuple[float, float] = (60, 30)
    env: dict = field(default_factory=dict)
    outputs: tuple[str, ...] = ()  # files it writes into the out folder (removed before it runs)
    timeout_s: int | None = None
    # Runs first; returns a reason to skip the step (the asv step's commit).
    before: Callable[[Plan], str | None] | None = None
    cwd: Callable[[Plan], Path] | None = None

    def expected(self, plan: Plan) -> float:
        return self.expected_s[0 if plan.cuda else 1]


def _tail(text: str, lines: int = 3) -> str:
    kept = [line for line in text.strip().splitlines() if line.strip()]
    return " | ".join(kept[-lines:])[-400:]


# The stack check -------------------------------------------------------------
def stack_report(device: str) -> dict:
    """What this machine has for the check, in its own process (CUDA is
    initialised here, not in the script's): versions, the GPU and a small
    matmul on it, NCCL, every module a step needs (imported), the
    compilers and git."""
    start = time.perf_counter()
    modules = {}
    for name in (*GNNPERF_NEEDS, "gnnperf", *OPTIONAL):
        ok, detail = probe(name)
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


def _stack_argv(plan: Plan) -> list[str]:
    return [str(SCRIPT), "--stack-report", str(plan.out / "stack.json"),
            "--device", plan.device]


def _missing_effects(plan: Plan, report: dict) -> list[str]:
    """Each missing thing and what it does to the selected steps."""
    by_key = {step.key: step for step in steps(plan)}
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


def _step_json(path: Path, step: str, proc, missing: str = "no report"
               ) -> tuple[dict | None, StepResult | None]:
    """The JSON a step wrote, or the failure that says why there is none
    usable (not written, or cut short: a killed step's half file)."""
    try:
        return json.loads(path.read_text()), None
    except FileNotFoundError:
        why = missing
    except ValueError as exc:
        why = f"unreadable {path.name} ({exc})"
    return None, StepResult(step, FAIL, reason=f"{why} (exit {proc.returncode}): "
                                                 f"{_tail(proc.stdout)}")


def _judge_stack(plan: Plan, proc) -> StepResult:
    report, failure = _step_json(plan.out / "stack.json", "stack check", proc)
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
    effects = _missing_effects(plan, report)
    reason = "; ".join(problems + (["missing: " + "; ".join(effects)] if effects else []))
    return StepResult("stack check", FAIL if problems else PASS, figures=figures, reason=reason)


# gnnperf doctor --------------------------------------------------------------
def _doctor_argv(plan: Plan) -> list[str]:
    # Its asv check is this script's own asv step.
    return ["-m", "gnnperf", "doctor", "--device", plan.device, "--skip-asv",
            "--json", str(plan.out / "doctor.json")]


def _judge_doctor(plan: Plan, proc) -> StepResult:
    report, failure = _step_json(plan.out / "doctor.json", "doctor", proc)
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
def _run_argv(json_name: str, dataset: Callable[[Plan], str], epochs: Callable[[Plan], int],
              extra: Callable[[Plan], list[str]] = lambda plan: [],
              all_variants: bool = True) -> Callable[[Plan], list]:
    def argv(plan: Plan) -> list[str]:
        chosen = ["--variants", plan.variants] if plan.variants and all_variants else []
        return ["-m", "gnnperf", "run", "--device", plan.device, "--dataset", dataset(plan),
                "--epochs", str(epochs(plan)), "--warmup", "3", "--no-progress",
                "--json", str(plan.out / json_name), *chosen, *extra(plan)]
    return argv


def _judge_run(name: str, json_name: str, want: Callable[[dict], list[str]] | None = None,
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
        doc, failure = _step_json(path, name, proc, missing="no results")
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
            problems.append(f"exit {proc.returncode}: {_tail(proc.stdout)}")
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


def _amp_is(dtype: str) -> Callable[[dict], list[str]]:
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


def _ddp_argv(plan: Plan) -> list[str]:
    return ["-m", "gnnperf", "run", "--device", plan.device, "--dataset", "cora",
            "--variants", "ddp,sampled+ddp", "--world-size", str(plan.ddp_world),
            "--backend", "nccl" if plan.cuda else "gloo", "--epochs",
            str(min(8, plan.cora_epochs)), "--warmup", "3",
            "--no-progress", "--json", str(plan.out / "ddp.json")]


def _judge_ddp(plan: Plan, proc) -> StepResult:
    return _judge_run(_ddp_name(plan), "ddp.json", _ddp_wants(plan), allow_chance=True)(plan, proc)


def _ddp_name(plan: Plan) -> str:
    return (f"ddp on {plan.ddp_world} rank{'s' if plan.ddp_world > 1 else ''} "
            f"({'nccl' if plan.cuda else 'gloo'})")


# roofs and the sampler ------------------------------------------------------
# Published figures (fp32 without tensor cores, memory bandwidth), by name
# as torch reports it; the more specific names first.
PUBLISHED = (
    ("H100 PCIe", "H100 PCIe", 51e12, 2.0e12),
    ("H100 NVL", "H100 NVL", 60e12, 3.9e12),
    ("H100", "H100 SXM", 67e12, 3.35e12),
    ("H200 NVL", "H200 NVL", 60e12, 4.8e12),
    ("H200", "H200", 67e12, 4.8e12),
)
# Below this share of the published figure a roof is mismeasured (a timer
# that does not wait, a clock that idles); above the ceiling, impossible
# (caches, a timer that stops early).
PLAUSIBLE = (0.10, 1.10)


def roofs_sanity(roofs: dict) -> tuple[bool, str]:
    """Whether :obj:`roofs` (``gnnperf roofs --json``) are plausible for
    the GPU they name, and the one line that says so: the fp32 GEMM and the
    copy bandwidth at the ladder's largest working set (past the caches)
    against the published figures. A device without figures here is not
    judged (plausible, and the line says so)."""
    name = roofs.get("device_name", "")
    flops = roofs["peak_flops_per_s"]
    stream = {int(size): value for size, value in roofs["stream_bytes_per_s"].items()}
    copy = stream[max(stream)]
    found = next((row for row in PUBLISHED if row[0] in name), None)
    measured = f"fp32 GEMM {_si(flops)}FLOP/s, copy {_si(copy)}B/s"
    if found is None or not roofs.get("device", "").startswith("cuda"):
        return True, f"roofs: {measured} on {name or 'this device'}: no published figures here"
    _, label, peak, bandwidth = found
    low, high = PLAUSIBLE
    shares = (flops / peak, copy / bandwidth)
    ok = all(low <= share <= high for share in shares)
    return ok, (f"roofs: fp32 GEMM {flops / 1e12:.1f} TFLOP/s = {shares[0]:.0%} of {label}'s "
                f"{peak / 1e12:.0f}, copy {copy / 1e12:.2f} TB/s = {shares[1]:.0%} of "
                f"{bandwidth / 1e12:.2f} TB/s: "
                f"{'plausible' if ok else f'IMPLAUSIBLE (outside {low:.0%}-{high:.0%})'}")


def _si(value: float) -> str:
    """1.2 T, 95.3 G: a rate in the unit that reads (CPUs measure in G)."""
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M")):
        if value >= scale:
            return f"{value / scale:.3g} {prefix}"
    return f"{value:.3g} "


def _roofs_argv(plan: Plan) -> list[str]:
    return ["-m", "gnnperf", "roofs", "--device", plan.device, "--json",
            str(plan.out / "roofs.json")]


def _judge_roofs(plan: Plan, proc) -> StepResult:
    path = plan.out / "roofs.json"
    if proc.returncode != 0 or not path.is_file():
        return StepResult("roofs", FAIL, reason=f"exit {proc.returncode}: {_tail(proc.stdout)}")
    roofs = json.loads(path.read_text())
    if not roofs["peak_flops_per_s"] > 0 or not all(
            value > 0 for value in roofs["stream_bytes_per_s"].values()):
        return StepResult("roofs", FAIL, reason="a roof is not a positive number")
    ok, line = roofs_sanity(roofs)
    figures = {"roofs": {"tflops_fp32": round(roofs["peak_flops_per_s"] / 1e12, 2),
                         "measured_s": round(roofs["measured_s"], 1)}, "roofs_sanity": line}
    return StepResult("roofs", PASS if ok else FAIL, figures=figures, reason="" if ok else line)


def _sampler_argv(plan: Plan) -> list[str]:
    return ["-m", "gnnperf", "sampler", "--device", plan.device, "--dataset", plan.large_graph,
            "--json", str(plan.out / "sampler.json")]


def _judge_sampler(plan: Plan, proc) -> StepResult:
    path = plan.out / "sampler.json"
    if proc.returncode != 0 or not path.is_file():
        return StepResult("sampler", FAIL, reason=f"exit {proc.returncode}: {_tail(proc.stdout)}")
    result = json.loads(path.read_text())["result"]
    rates = {key: result.get(key) for key in ("sampler_edges_per_s", "loader_edges_per_s")}
    problems = [f"{key} {value!r}" for key, value in rates.items() if not (value or 0) > 0]
    if not result.get("device", "").startswith(plan.device.split(":")[0]):
        problems.append(f"sampled on {result.get('device')}, not {plan.device}")
    figures = {"sampler": {key.removesuffix("_edges_per_s") + "_m_edges_per_s":
                           round((value or 0) / 1e6, 2) for key, value in rates.items()}}
    if result.get("gather_roof_pct") is not None:
        figures["sampler"]["gather_roof_pct"] = round(result["gather_roof_pct"], 1)
    return StepResult("sampler", FAIL if problems else PASS, figures=figures,
                      reason="; ".join(problems))


# asv -------------------------------------------------------------------------
@dataclass
class _AsvRepo:
    root: Path = ROOT
    commit: str = ""


_ASV = _AsvRepo()
#: The CUDA figures, CPU offload, and the history figure, whose references
#: on a GPU (cuSPARSE's CSR product and its backward, torch's fused dropout)
#: nothing else runs.
ASV_BENCHMARKS = "track_cuda|Offload|track_step_over_reference"


def _git(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-c", "user.name=gpu_check", "-c",
                           "user.email=gpu_check@localhost", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=60)


def asv_commit(root: Path, scratch: Path) -> tuple[Path, str, str]:
    """Where asv runs and the commit it labels the results with:
    :obj:`root` and its HEAD in a git checkout; else a throwaway commit of
    the files asv reads in a copy under :obj:`scratch`. asv ties every
    result to a commit (``--set-commit-hash`` resolves it through git and
    stores its date), and a copied tree (the device tool's) has no .git; a
    copy keeps the tree itself untouched. Returns (root, commit, "") or
    (root, "", the reason asv cannot run)."""
    if (root / ".git").exists():
        head = _git(["rev-parse", "HEAD"], root) if shutil.which("git") else None
        if head is not None and head.returncode == 0:
            return root, head.stdout.strip(), ""
    if shutil.which("git") is None:
        return root, "", ("no .git here and no git to make a throwaway commit: asv labels "
                          "results by commit (run from a git checkout, or where git exists)")
    copy = scratch / "asv-repo"
    shutil.rmtree(copy, ignore_errors=True)
    copy.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".asv", "node_modules")
    for name in ("asv.conf.json", "pyproject.toml", "README.md"):
        if (root / name).is_file():
            shutil.copy2(root / name, copy / name)
    for name in ("benchmarks", "gnnperf"):
        shutil.copytree(root / name, copy / name, ignore=ignore)
    for args in (["-c", "init.defaultBranch=main", "init", "-q"], ["add", "-A"],
                 ["commit", "-q", "--no-verify", "-m", "gpu_check: the tree asv measures"],
                 ["rev-parse", "HEAD"]):
        done = _git(args, copy)
        if done.returncode != 0:
            return root, "", f"git {args[0]} failed in the throwaway copy: {_tail(done.stderr)}"
    return copy, done.stdout.strip(), ""


def _asv_before(plan: Plan) -> str | None:
    scratch = Path(tempfile.mkdtemp(prefix="gpu-check-asv-"))
    # Its results are copied beside the summary by the judge; the copy goes.
    atexit.register(shutil.rmtree, scratch, True)
    root, commit, reason = asv_commit(ROOT, scratch)
    if reason:
        return reason
    _ASV.root, _ASV.commit = root, commit
    # asv asks for the machine's details once, on stdin, unless told --yes.
    subprocess.run([sys.executable, "-m", "asv", "machine", "--yes"], cwd=root,
                   capture_output=True, stdin=subprocess.DEVNULL, timeout=120,
                   env=_asv_env(plan))
    return None


def _asv_env(plan: Plan) -> dict:
    # The benchmarks import gnnperf from the tree asv runs in, before any
    # installed one; asv itself may come from the wheel bundle's PYTHONPATH.
    paths = [str(_ASV.root), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "GNNPERF_ASV_PROFILE": "pr"}


def _asv_argv(plan: Plan) -> list[str]:
    # spawn: the config's forkserver is unverified on CUDA (docs/asv.md).
    return ["-m", "asv", "run", "--quick", "--python=same", "--launch-method", "spawn",
            "-b", ASV_BENCHMARKS, "--set-commit-hash", _ASV.commit]


def _judge_asv(plan: Plan, proc) -> StepResult:
    from gnnperf.doctor import asv_config, judge_asv_run
    status, figure, reason = judge_asv_run(proc, _ASV.root, _ASV.commit, plan.device,
                                           plan.importable)
    # The results beside the summary (the copy they were written in is scratch).
    config = asv_config(_ASV.root)
    kept = [path for path in (_ASV.root / config.get("results_dir", ".asv/results")).glob(
        f"*/{_ASV.commit[:8]}*.json")]
    for path in kept:
        shutil.copy2(path, plan.out / f"asv-{path.parent.name}-{path.name}")
    where = (f"commit {_ASV.commit[:8]} of "
             f"{'a throwaway copy (no .git here)' if _ASV.root != ROOT else 'this checkout'}")
    return StepResult("asv CUDA benchmarks", status, figures={"asv": figure, "results": where},
                      reason=reason)


def steps(plan: Plan) -> list[Step]:
    """Every step, in the order a whole check runs them. Expected seconds:
    CUDA ones are estimates for one H100/H200 (no GPU has run them yet;
    ``--expect-from`` takes a run's measured ones), CPU ones measured at
    the CPU sizes on a 2-core machine."""
    large = f"variants on {plan.large_graph}" + (" (large-graph step)"
                                                  if plan.large_graph == "cora" else "")
    return [
        Step("stack", "stack check", _stack_argv, _judge_stack, needs=(), expected_s=(20, 6),
             outputs=("stack.json",), timeout_s=120),
        Step("doctor", "doctor", _doctor_argv, _judge_doctor, expected_s=(150, 45),
             outputs=("doctor.json",)),
        Step("variants-cora", "variants on cora",
             _run_argv("variants-cora.json", lambda p: "cora", lambda p: p.cora_epochs),
             _judge_run("variants on cora", "variants-cora.json"), expected_s=(90, 35),
             outputs=("variants-cora.json",)),
        # A handful of epochs on a large graph measures time and memory, not
        # accuracy: a crash, a non-finite loss or an n/a fails this step.
        Step("variants-large", large,
             _run_argv("variants-large.json", lambda p: p.large_graph, lambda p: p.large_epochs),
             _judge_run(large, "variants-large.json", allow_chance=True), expected_s=(120, 25),
             outputs=("variants-large.json",)),
        Step("amp-bf16", "amp bf16",
             _run_argv("amp-bf16.json", lambda p: "cora", lambda p: p.cora_epochs,
                       lambda p: ["--variants", "amp", "--amp-dtype", "bf16"], False),
             _judge_run("amp bf16", "amp-bf16.json", _amp_is("bfloat16")), expected_s=(20, 8),
             outputs=("amp-bf16.json",)),
        Step("amp-fp16", "amp fp16",
             _run_argv("amp-fp16.json", lambda p: "cora", lambda p: p.cora_epochs,
                       lambda p: ["--variants", "amp", "--amp-dtype", "fp16"], False),
             _judge_run("amp fp16", "amp-fp16.json", _amp_is("float16")), expected_s=(20, 8),
             outputs=("amp-fp16.json",)),
        Step("ddp", _ddp_name(plan), _ddp_argv, _judge_ddp, expected_s=(30, 10),
             outputs=("ddp.json",)),
        Step("models", "models on cora",
             _run_argv("models-cora.json", lambda p: "cora", lambda p: p.cora_epochs,
                       lambda p: ["--model", "sage,gat,gin"]),
             _judge_run("models on cora", "models-cora.json"), cuda_only=True,
             expected_s=(180, 60), outputs=("models-cora.json",)),
        Step("roofs", "roofs", _roofs_argv, _judge_roofs, expected_s=(15, 6),
             outputs=("roofs.json",)),
        Step("sampler", "sampler", _sampler_argv, _judge_sampler, expected_s=(20, 8),
             outputs=("sampler.json",)),
        # asv's quick run compiles the compiled variants cold in fresh
        # interpreters: the longest step.
        Step("asv", "asv CUDA benchmarks", _asv_argv, _judge_asv, cuda_only=True,
             needs=(*GNNPERF_NEEDS, "asv", "asv_runner"), expected_s=(300, 300),
             timeout_s=900, before=_asv_before, cwd=lambda p: _ASV.root),
    ]


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


# Running a step --------------------------------------------------------------
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
    its output streamed into ``<key>.log`` as it runs, within
    :obj:`limit_s` (default: its own limit, else the plan's)."""
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
    env = {**os.environ, **step.env}
    if step.key == "asv":
        env = _asv_env(plan)
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


# The summary -----------------------------------------------------------------
def markdown(summary: dict) -> str:
    state = ("PASSED" if summary["passed"] else
             "RUNNING" if summary.get("running") else
             "INCOMPLETE" if not summary.get("failed") else "FAILED")
    lines = [f"# GPU check on {summary['device']}: {state} in {summary['seconds']:.0f} s"
             + (f" ({summary['plan']}, budget {summary['budget_s']:.0f} s)"
                if summary.get("budget_s") else f" ({summary['plan']})"),
             "", summary["environment"], ""]
    if summary.get("roofs_sanity"):
        lines += [summary["roofs_sanity"], ""]
    if summary.get("running"):
        lines += [f"Running now (or cut off in): {summary['running']}", ""]
    lines += ["| step | status | seconds | figures | reason |", "|---|---|---|---|---|"]
    for step in summary["steps"]:
        figures = "; ".join(
            f"{key}: " + (", ".join(f"{k} {_short(v)}" for k, v in value.items())
                          if isinstance(value, dict) else str(value))
            for key, value in step["figures"].items())
        lines.append(f"| {step['name']} | {step['status']} | {step['seconds']:.1f} | "
                     f"{figures.replace('|', '/')[:1500]} | {step['reason'].replace('|', '/')} |")
    if summary.get("left"):
        lines += ["", f"Left (not started: the budget): {', '.join(summary['left'])}. "
                      f"Run them next: `{summary['rerun']}`"]
    return "\n".join(lines) + "\n"


def _short(value) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def _environment(plan: Plan) -> str:
    """From the stack check's report where it ran (the script itself
    imports no torch and touches no GPU); else Python and the cores."""
    path = plan.out / "stack.json"
    if path.is_file():
        report = json.loads(path.read_text())
        gpus = report.get("gpus") or []
        where = (f"{gpus[0]['name']} x {len(gpus)}, CUDA {report.get('cuda')}" if gpus else "CPU")
        return (f"torch {report.get('torch')}, PyG {report.get('pyg')}, {where}, "
                f"Python {report['python']}, {report.get('cores')} CPU cores")
    return f"Python {platform.python_version()}, {os.cpu_count()} CPU cores (no stack check)"


def _write(path: Path, text: str) -> None:
    """Whole or not at all: a kill mid-write leaves the previous file."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _pack(work: Path, out: Path) -> None:
    """Every step file of :obj:`work` into one archive in :obj:`out`
    (atomically; a log past :data:`LOG_CAP_BYTES` by its end)."""
    tmp = out / f".{ARCHIVE}.tmp"
    with tarfile.open(tmp, "w:gz") as tar:
        for path in sorted(work.iterdir()):
            if not path.is_file() or path.name.startswith("."):
                continue
            data = path.read_bytes()
            if len(data) > LOG_CAP_BYTES:
                data = b"[cut: its last bytes only]\n" + data[-LOG_CAP_BYTES:]
            info = tarfile.TarInfo(f"gpu-check/{path.name}")
            info.size, info.mtime = len(data), int(path.stat().st_mtime)
            tar.addfile(info, io.BytesIO(data))
    os.replace(tmp, out / ARCHIVE)


# The command line ------------------------------------------------------------
def _resolve_names(text: str | None, option: str, known: list[Step]) -> list[str] | str:
    """Step keys from a comma list of keys, names or names' slugs; or the
    one-line error naming the valid ones."""
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


def _expected_from(path: Path | None) -> dict[str, float] | str:
    """Measured seconds per step key from an earlier run's gpu-check.json."""
    if path is None:
        return {}
    try:
        summary = json.loads(path.read_text())
        return {step["key"]: float(step["seconds"]) for step in summary["steps"]
                if step.get("key") and step["status"] in (PASS, FAIL) and step["seconds"] > 0}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"gpu_check: --expect-from {path}: not a gpu-check.json ({type(exc).__name__})"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tools/gpu_check.sh",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--out", type=Path,
                        help="folder for gpu-check.json, gpu-check.md and each step's files "
                             "(default: $OUT where it is set, else ./gpu-check)")
    pack = parser.add_mutually_exclusive_group()
    pack.add_argument("--pack", action="store_true", default=None,
                      help=f"the steps' files in one archive ({ARCHIVE}) beside the summary "
                           f"(default where --out is $OUT: the device tool brings back 8 files)")
    pack.add_argument("--no-pack", dest="pack", action="store_false")
    parser.add_argument("--plan", choices=sorted(PLANS),
                        help="the steps of one call of a GPU window: " + "; ".join(
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


def main(argv: list[str] | None = None, runner: Runner | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.stack_report is not None:  # the stack step's own process
        args.stack_report.write_text(json.dumps(stack_report(args.device), indent=2))
        return 0
    absent = [name for name in ("torch", "gnnperf") if importlib.util.find_spec(name) is None]
    if absent:
        print(f"gpu_check: {sys.executable} has no {' or '.join(absent)}; run it with the Python "
              f"that has torch (PYTHON=...), through tools/gpu_check.sh (it puts this checkout's "
              f"gnnperf on PYTHONPATH)", file=sys.stderr)
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
    if args.budget_s is not None and args.budget_s <= SUMMARY_MARGIN_S:
        print(f"gpu_check: --budget-s {args.budget_s:g} leaves no time for a step; give more "
              f"than {SUMMARY_MARGIN_S} s", file=sys.stderr)
        return 2
    env_out = os.environ.get("OUT")
    out = args.out or (Path(env_out) if env_out else Path("gpu-check"))
    pack = args.pack if args.pack is not None else bool(
        env_out and out.resolve() == Path(env_out).resolve())
    probe_plan = plan_for(args.device, out.resolve(), args.cora_epochs, args.large_graph,
                          args.large_epochs, args.variants)
    known = steps(probe_plan)
    pool = list(PLANS[args.plan]) if args.plan else [step.key for step in known]
    only = _resolve_names(args.only, "--only", known)
    skip = _resolve_names(args.skip, "--skip", known)
    expected = _expected_from(args.expect_from)
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

    def summary(running: str | None) -> dict:
        failed = any(r.status == FAIL for r in results)
        rest = [key for key in selected if key not in {r.key for r in results}]
        # On a GPU a skipped step (a package missing) left something
        # unverified: not a pass. On CPU the CUDA-only steps skip by design.
        unverified = plan.cuda and any(r.status == SKIP for r in results)
        doc = {"device": plan.device, "environment": _environment(plan),
               "plan": args.plan or "every step", "budget_s": args.budget_s,
               "passed": not failed and not left and not rest and not unverified,
               "failed": failed, "unverified": unverified,
               "complete": not rest, "running": running,
               "seconds": _clock() - started, "left": left,
               "rerun": (f"tools/gpu_check.sh --device {plan.device} --only {','.join(left)}"
                         if left else ""),
               # The roofs step's line, else that of the first run that measured them.
               "roofs_sanity": next((r.figures["roofs_sanity"] for r in sorted(
                   results, key=lambda r: r.key != "roofs") if "roofs_sanity" in r.figures), ""),
               "packed": ARCHIVE if pack else None,
               "steps": [asdict(r) for r in results]}
        # Written before and after every step: a step that hangs the machine
        # or a kill loses nothing before it, and names the step it cut.
        # The JSON last: what a reader of it finds is already in the others.
        if pack:
            _pack(work, out)
        _write(out / "gpu-check.md", markdown(doc))
        _write(out / "gpu-check.json", json.dumps(doc, indent=2))
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
        summary(running=step.name)
        result = run_step(step, plan, runner, limit)
        own = step.timeout_s or plan.step_timeout_s
        if result.reason.startswith("timed out") and limit < own:
            result.reason += f"; cut at the budget's end (its own limit: {own} s)"
        results.append(result)
        print(f"{result.status.upper():8s}{result.name} ({result.seconds:.0f} s)"
              f"{': ' + result.reason if result.reason else ''}", flush=True)
    doc = summary(running=None)
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


if __name__ == "__main__":
    sys.exit(main())
