"""One gate run: the arms set up, the exact work gate, the time gate, the report."""
from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from gnnperf.case import DEFAULT_DATASETS, Case, default_cases
from gnnperf.errors import GnnperfError
from gnnperf.gate import arms as arm_runner
from gnnperf.gate.arms import Arm
from gnnperf.gate.report import format_time, format_work, markdown
from gnnperf.gate.stats import decide
from gnnperf.gate.work import compare_work


@dataclass
class GateOptions:
    r"""What one gate run compares and how.

    Args:
        base (str): git ref of the base tree (default ``HEAD``; with only
            Python arms given, the head tree itself).
        base_dir (str): A checkout to use as the base instead of a ref.
        head_dir (str): The tree under test (default: this checkout).
        repo (str): The repository :obj:`base` is read from (default: the head tree).
        base_python (str), head_python (str): Interpreters of the arms
            (other virtual environments: dependency releases as arms).
        variants (list): Variants (``None``: the head tree's standard ones).
        datasets (tuple): Graphs every variant runs on.
        processes (int): Worker process pairs (the t-test's replicates).
        rounds (int): Interleaved rounds per pair.
        sample_ms (float): Target CPU time of one timed block of steps.
        clock (str): ``cpu`` (the worker's CPU time) or ``wall``.
        threshold (float): Minimum relative slowdown that may fail.
        alpha (float): One-sided significance level.
        time_gate (bool), work_gate (bool): Which gates run.
        accept_work_change (bool): Report a changed work metric without failing.
        pin_cpus (bool): Both arms' workers of a pair on one CPU (see
            :func:`~gnnperf.gate.arms.run_arms`).
        cases (list): Explicit :class:`~gnnperf.case.Case` s instead of
            :obj:`variants` x :obj:`datasets`.
    """
    base: str | None = None
    base_dir: str | None = None
    head_dir: str = "."
    repo: str | None = None
    base_python: str = sys.executable
    head_python: str = sys.executable
    variants: list[str] | None = None
    datasets: tuple[str, ...] = DEFAULT_DATASETS
    processes: int = 6
    rounds: int = 30
    sample_ms: float = 12.0
    clock: str = "cpu"
    threshold: float = 0.03
    alpha: float = 0.01
    time_gate: bool = True
    work_gate: bool = True
    accept_work_change: bool = False
    pin_cpus: bool = True
    cases: list[Case] = field(default_factory=list)

    def validate(self) -> None:
        if self.processes < 3 or self.rounds < 3:
            raise GnnperfError("need --processes >= 3 (the t-test's replicates) and --rounds >= 3")
        if self.clock not in ("cpu", "wall"):
            raise GnnperfError(f"--clock {self.clock!r}: use cpu or wall")
        if not 0 <= self.threshold < 1 or not 0 < self.alpha < 1:
            raise GnnperfError("need 0 <= --threshold < 1 and 0 < --alpha < 1")
        if self.sample_ms <= 0:
            raise GnnperfError("--sample-ms must be > 0")
        if not (self.time_gate or self.work_gate):
            raise GnnperfError("--no-time and --no-work together leave nothing to compare")
        for python in (self.base_python, self.head_python):
            if not Path(python).is_file():
                raise GnnperfError(f"interpreter {python} not found; give a venv's bin/python")
        if self.base_dir and not (Path(self.base_dir) / "gnnperf").is_dir():
            raise GnnperfError(f"--base-dir {self.base_dir} has no gnnperf folder; give a checkout")
        if not (Path(self.head_dir) / "gnnperf").is_dir():
            raise GnnperfError(f"--head-dir {self.head_dir} has no gnnperf folder; give a checkout")


@dataclass
class GateResult:
    """A gate run's outcome: :obj:`failed`, the printed text and the JSON
    report (samples, verdicts, work metrics)."""
    failed: bool
    text: str
    report: dict

    @property
    def markdown(self) -> str:
        return markdown(self.report)


def run_gate(options: GateOptions, log: Callable[[str], None] = lambda msg: None
             ) -> GateResult:
    """Runs the exact work gate and the statistical time gate on the base and
    head arms; ``failed`` when a work metric changed (unless accepted) or a
    benchmark's time regressed."""
    options.validate()
    head_tree = Path(options.head_dir).resolve()
    head = Arm(head_tree, options.head_python)
    with tempfile.TemporaryDirectory(prefix="gnnperf-gate-") as tmp:
        if options.base_dir:
            base_tree, label = Path(options.base_dir).resolve(), ""
        elif options.base is None and (options.base_python != options.head_python):
            base_tree, label = head_tree, ""  # environments are the arms: one tree in both
        else:
            label = options.base or "HEAD"
            base_tree = arm_runner.export_ref(label, Path(tmp) / "base", options.repo or head_tree)
        arms = {"base": Arm(base_tree, options.base_python, label), "head": head}
        cases = options.cases or default_cases(
            options.variants or arm_runner.standard_variants(head), options.datasets)
        return compare_arms(options, arms, cases, log)


def compare_arms(options: GateOptions, arms: dict[str, Arm], cases: list[Case],
             log: Callable[[str], None]) -> GateResult:
    names = [case.name for case in cases]
    report: dict = {"cases": names,
                    "arms": {name: arm.describe() for name, arm in arms.items()},
                    "settings": {k: getattr(options, k) for k in (
                        "processes", "rounds", "sample_ms", "clock", "threshold", "alpha", "pin_cpus")}}
    text: list[str] = []
    failed = False
    if options.work_gate:
        log(f"work metrics of {len(cases)} benchmarks in both arms ...")
        work = arm_runner.run_work(arms, cases)
        rows = compare_work(names, work["base"], work["head"])
        report["work"] = {"base": work["base"], "head": work["head"], "rows": rows}
        text += ["== exact work metrics (one training step)", format_work(rows)]
        changed = any(not row["same"] and not row.get("new") for row in rows)
        if changed and not options.accept_work_change:
            failed = True
            text.append("work gate: FAILED (a work metric changed; --accept-work-change "
                        "if intended)")
        else:
            text.append("work gate: " + ("changed, accepted" if changed else "passed"))
    if options.time_gate:
        log(f"timing {len(cases)} benchmarks: {options.processes} process pairs x "
            f"{options.rounds} interleaved rounds ...")
        start = time.perf_counter()
        samples = arm_runner.run_time(
            arms, cases, options.processes, options.rounds, options.sample_ms, options.clock,
            progress=lambda i, n: log(f"  pair {i}/{n} done ({time.perf_counter() - start:.0f} s)"),
            pin_cpus=options.pin_cpus)
        verdicts = [decide(s, options.threshold, options.alpha) for s in samples]
        report["time"] = {"samples": [asdict(s) for s in samples],
                          "verdicts": [asdict(v) for v in verdicts],
                          "seconds": time.perf_counter() - start}
        text += [f"== step time, {options.clock} clock (base = A, head = B)",
                 format_time(verdicts, options.threshold, options.alpha)]
        untimed = sorted(set(names) - {v.case for v in verdicts})
        if untimed:
            text.append(f"not timed (absent from an arm): {', '.join(untimed)}")
        regressions = [v.case for v in verdicts if v.verdict == "REGRESSION"]
        if regressions:
            failed = True
            text.append(f"time gate: FAILED ({', '.join(regressions)})")
        else:
            text.append("time gate: passed")
    report["failed"] = failed
    return GateResult(failed, "\n".join(text), report)
