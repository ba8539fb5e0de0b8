"""The summary the check writes before and after every step:
``gpu-check.json``, its table ``gpu-check.md`` and, where the steps' files
are packed, one archive of them beside it."""
from __future__ import annotations

import io
import json
import os
import platform
import tarfile
from dataclasses import asdict
from pathlib import Path

from .core import FAIL, SKIP, Plan, StepResult

ARCHIVE = "gpu-check-steps.tar.gz"
# A log is cut to its end in the archive past this, for a runner that
# collects files of at most 16 MiB.
LOG_CAP_BYTES = 4 * 2 ** 20


def summary(plan: Plan, results: list[StepResult], left: list[str], *, plan_name: str | None,
            budget_s: float | None, seconds: float, running: str | None,
            packed: bool) -> dict:
    """The summary of the check so far.

    Args:
        plan (Plan): What the steps ran with (its ``selected`` steps).
        results (list[StepResult]): The steps done (left ones included).
        left (list[str]): The keys the budget left.
        plan_name (str, optional): ``--plan``'s value.
        budget_s (float, optional): ``--budget-s``'s value.
        seconds (float): Since the check started.
        running (str, optional): The step running now.
        packed (bool): Whether the steps' files go into :data:`ARCHIVE`.

    Returns:
        dict: what ``gpu-check.json`` holds.
    """
    failed = any(r.status == FAIL for r in results)
    rest = [key for key in plan.selected if key not in {r.key for r in results}]
    # On a GPU a skipped step (a package missing) left something
    # unverified: not a pass. On CPU the CUDA-only steps skip by design.
    unverified = plan.cuda and any(r.status == SKIP for r in results)
    return {"device": plan.device, "environment": environment_line(plan),
            "plan": plan_name or "every step", "budget_s": budget_s,
            "passed": not failed and not left and not rest and not unverified,
            "failed": failed, "unverified": unverified,
            "complete": not rest, "running": running,
            "seconds": seconds, "left": left,
            "rerun": (f"tools/gpu_check.sh --device {plan.device} --only {','.join(left)}"
                      if left else ""),
            # The roofs step's line, else that of the first run that measured them.
            "roofs_sanity": next((r.figures["roofs_sanity"] for r in sorted(
                results, key=lambda r: r.key != "roofs") if "roofs_sanity" in r.figures), ""),
            "packed": ARCHIVE if packed else None,
            "steps": [asdict(r) for r in results]}


def write_summary(doc: dict, out: Path, packed_from: Path | None) -> None:
    """:obj:`doc` into :obj:`out` as ``gpu-check.md`` and ``gpu-check.json``,
    after the archive of :obj:`packed_from`'s step files where given. The
    JSON last: what a reader of it finds is already in the others."""
    if packed_from is not None:
        pack(packed_from, out)
    write_atomic(out / "gpu-check.md", markdown(doc))
    write_atomic(out / "gpu-check.json", json.dumps(doc, indent=2))


def markdown(summary: dict) -> str:
    """The summary as ``gpu-check.md``: its state, the environment, the
    roofs' sanity line and a table of the steps."""
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


def environment_line(plan: Plan) -> str:
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


def write_atomic(path: Path, text: str) -> None:
    """Whole or not at all: a kill mid-write leaves the previous file."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def pack(work: Path, out: Path) -> None:
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
