"""What every part of the check shares: a plan (the device, its sizes,
where the files go, what imports here), a step (what it runs and how it is
judged) and a step's result (one line of the summary)."""
from __future__ import annotations

import importlib
import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[2]
# What the stack step runs in a process of its own (``python tools/gpu_check``).
SCRIPT = Path(__file__).resolve().parent
PASS, FAIL, SKIP, LEFT = "pass", "fail", "skipped", "left"
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
WHEELS_HINT = "install the wheel bundle tools/gpu_wheels.sh fetches (its header says how)"


def probe(name: str) -> tuple[bool, str]:
    """Whether module :obj:`name` imports here, and its version or the
    error (one line). The stack check and the skip rules ask this (tests
    fake it, here: both look it up in this module)."""
    try:
        module = importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 -- a broken install is "missing", with its error
        text = str(exc).strip().splitlines()
        return False, f"{type(exc).__name__}: {text[0] if text else ''}"[:200]
    return True, str(getattr(module, "__version__", "") or "present")


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
    """The plan for :obj:`device`: on CUDA a 10^6-edge graph and enough
    epochs for the accuracy to mean something; on CPU the smallest sizes
    that still exercise every step (a CPU epoch of synthetic-1m takes
    seconds per variant).

    Args:
        device (str): ``cuda`` (or ``cuda:N``) or ``cpu``.
        out (Path): The folder the steps write into.
        cora_epochs (int, optional): Epochs on Cora (default: the device's).
        large_graph (str, optional): The large-graph step's dataset.
        large_epochs (int, optional): Epochs on the large graph.
        variants (str, optional): The variants the run steps train.

    Returns:
        Plan: with the GPUs counted on CUDA.
    """
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
    # Its whole environment (None: this process's).
    env: Callable[[Plan], dict] | None = None
    outputs: tuple[str, ...] = ()  # files it writes into the out folder (removed before it runs)
    timeout_s: int | None = None
    # Runs first; returns a reason to skip the step (the asv step's commit).
    before: Callable[[Plan], str | None] | None = None
    cwd: Callable[[Plan], Path] | None = None

    def expected(self, plan: Plan) -> float:
        return self.expected_s[0 if plan.cuda else 1]


def tail(text: str, lines: int = 3) -> str:
    """The last non-blank :obj:`lines` of :obj:`text` on one line: a failed
    step's reason."""
    kept = [line for line in text.strip().splitlines() if line.strip()]
    return " | ".join(kept[-lines:])[-400:]


def step_json(path: Path, step: str, proc: subprocess.CompletedProcess,
              missing: str = "no report") -> tuple[dict | None, StepResult | None]:
    """The JSON a step wrote, or the failure that says why there is none
    usable (not written, or cut short: a killed step's half file)."""
    try:
        return json.loads(path.read_text()), None
    except FileNotFoundError:
        why = missing
    except ValueError as exc:
        why = f"unreadable {path.name} ({exc})"
    return None, StepResult(step, FAIL, reason=f"{why} (exit {proc.returncode}): "
                                                 f"{tail(proc.stdout)}")
