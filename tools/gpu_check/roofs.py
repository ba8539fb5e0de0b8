"""The measuring steps: ``gnnperf roofs`` with its sanity line against the
GPU's published figures, and ``gnnperf sampler`` on the large graph."""
from __future__ import annotations

import json
import subprocess

from .core import FAIL, PASS, Plan, StepResult, tail

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
    """Whether :obj:`roofs` are plausible for the GPU they name, and the
    one line that says so: the fp32 GEMM and the copy bandwidth at the
    ladder's largest working set (past the caches) against the published
    figures. A device without figures here is not judged (plausible, and
    the line says so).

    Args:
        roofs (dict): What ``gnnperf roofs --json`` writes.

    Returns:
        tuple[bool, str]: plausible, and the line for the summary.
    """
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


def roofs_argv(plan: Plan) -> list[str]:
    return ["-m", "gnnperf", "roofs", "--device", plan.device, "--json",
            str(plan.out / "roofs.json")]


def judge_roofs(plan: Plan, proc: subprocess.CompletedProcess) -> StepResult:
    """Passes when every roof is a positive number and plausible for the GPU."""
    path = plan.out / "roofs.json"
    if proc.returncode != 0 or not path.is_file():
        return StepResult("roofs", FAIL, reason=f"exit {proc.returncode}: {tail(proc.stdout)}")
    roofs = json.loads(path.read_text())
    if not roofs["peak_flops_per_s"] > 0 or not all(
            value > 0 for value in roofs["stream_bytes_per_s"].values()):
        return StepResult("roofs", FAIL, reason="a roof is not a positive number")
    ok, line = roofs_sanity(roofs)
    figures = {"roofs": {"tflops_fp32": round(roofs["peak_flops_per_s"] / 1e12, 2),
                         "measured_s": round(roofs["measured_s"], 1)}, "roofs_sanity": line}
    return StepResult("roofs", PASS if ok else FAIL, figures=figures, reason="" if ok else line)


def sampler_argv(plan: Plan) -> list[str]:
    return ["-m", "gnnperf", "sampler", "--device", plan.device, "--dataset", plan.large_graph,
            "--json", str(plan.out / "sampler.json")]


def judge_sampler(plan: Plan, proc: subprocess.CompletedProcess) -> StepResult:
    """Passes when the sampler and the loader both measured a positive rate
    on the plan's device."""
    path = plan.out / "sampler.json"
    if proc.returncode != 0 or not path.is_file():
        return StepResult("sampler", FAIL, reason=f"exit {proc.returncode}: {tail(proc.stdout)}")
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
