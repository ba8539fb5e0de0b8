"""The time gate's sensitivity: false-alarm and detection rates, measured
on the gate's default path.

Copies the working tree (arm A, and A' for the A/A comparison) and makes
copies in which one variant's training step burns extra CPU time equal to
``s`` times the step's own (:mod:`gnnperf.gate.faults`, self-calibrating, so
the injected slowdown stays ``s`` whatever the load); a scratch change
(``copy-input``: an allocation-bound step) can go into every copy alike. A
trial runs the gate's own timing (:func:`gnnperf.gate.compare.time_gate`)
once per comparison, A'/A and B/A per slowdown, each with its own process
pairs, layouts, arm orders and adaptive extra pairs, exactly as
``gnnperf gate`` times base and head.

From the stored ratios and p-values it reports, per decision threshold
(the gate's ``--threshold``) and clock, the false-alarm rate (A/A trials
judged a regression), the A/A trials judged wrong either way (a regression
or an improvement) and the detection rate per slowdown
(``gnnperf sensitivity``; ``--aa-only``: the A/A comparisons alone), for the fixed gate (the first ``--processes``
pairs) and the adaptive one (one more pair at a time while a comparison is
inconclusive, up to ``--max-processes``: what the gate ran), with the wall
time each took.
"""
from __future__ import annotations

import math
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from gnnperf.gate import faults
from gnnperf.measure.case import Case
from gnnperf.errors import GnnperfError
from gnnperf.gate.arms import Arm, TimeWorker, copy_tree
from gnnperf.gate.compare import GateOptions, time_gate
from gnnperf.gate.decision import (TimeSamples, adaptive_test, decide, judge, pair_log_ratios,
                                   pair_test)


@dataclass
class StudySettings:
    """One sensitivity study: the case, the slowdowns injected and the gate
    each trial's comparisons run.

    Args:
        case (Case): The case every comparison times.
        slowdowns (tuple): The injected slowdowns (0.05: +5%); empty: the
            A/A comparisons alone.
        trials (int): Gate runs per slowdown and A/A.
        options (GateOptions): The gate each comparison is a timing of: its
            process pairs, rounds, sample size, threshold, alpha, pinning and
            adaptive budget (by default the gate's own: a study measures the
            gate users run).
        scratch (str, optional): A fault kind every arm carries (e.g.
            ``copy-input``).
    """
    case: Case
    slowdowns: tuple[float, ...] = (0.05, 0.10, 0.20)
    trials: int = 10
    options: GateOptions = field(default_factory=lambda: GateOptions(work_gate=False))
    scratch: str | None = None


def calibrate(arm: Arm, case: Case, samples: int = 30) -> float:
    """Median CPU seconds of one step of :obj:`case` in :obj:`arm`."""
    worker = TimeWorker(arm, [case])
    try:
        _, states = worker.ready()
        if states[0] is not None:
            raise GnnperfError(f"{case.name} cannot run in this tree: {states[0]['reason']}")
        return statistics.median(worker.time(0, 1)["cpu"] for _ in range(samples))
    finally:
        worker.close()


def run_study(settings: StudySettings, source: Path,
              on_trial: Callable[[dict, list[dict]], None] | None = None) -> dict:
    """Runs the trials; returns ``{"settings": ..., "trials": [...]}``, each
    comparison's per-round log ratios kept so :func:`rejudge` can apply another
    rule. :obj:`on_trial` sees the study so far after each trial.

    Each comparison of a trial (A'/A, then B/A per slowdown) is one run of
    the gate's own timing, :func:`~gnnperf.gate.compare.time_gate`, with the
    gate's defaults for whatever :obj:`settings` leaves open: its own process
    pairs (each from a layout of its own), its adaptive extra pairs, its
    arm order. The rates measured are the default gate's."""
    case, options = settings.case, settings.options
    record_settings = {"case": case.name, "trials": settings.trials,
                       "processes": options.processes, "rounds": options.rounds,
                       "sample_ms": options.sample_ms, "alpha": options.alpha,
                       "threads": case.threads, "pin_cpus": options.pin_cpus,
                       "threshold": options.threshold, "max_processes": options.budget,
                       "scratch": settings.scratch, "path": "gate"}
    with tempfile.TemporaryDirectory(prefix="gnnperf-sensitivity-") as tmp:
        def tree(name: str, slowdown: float = 0.0) -> Path:
            try:
                copy = copy_tree(source, Path(tmp) / name)
            except subprocess.CalledProcessError:
                raise GnnperfError(f"{source} is not a git checkout; the study copies the files "
                                   f"git tracks") from None
            if settings.scratch:  # the change under study, in every arm alike
                faults.inject(copy, settings.scratch, case.variant)
            if slowdown:
                faults.inject(copy, "slowdown", case.variant, slowdown)
            return copy

        arm_a = Arm(tree("A"))
        record_settings["step_cpu_s"] = calibrate(arm_a, case)
        comparisons = [(0.0, Arm(tree("A2")))] + [
            (s, Arm(tree(f"B{round(s * 1000)}", s))) for s in settings.slowdowns]
        trials: list[dict] = []
        start = time.perf_counter()
        for trial in range(settings.trials):
            for s, arm_b in comparisons:
                compare_start = time.perf_counter()
                states: dict = {}
                samples = time_gate({"base": arm_a, "head": arm_b}, [case], options, states)
                if not samples:
                    why = "; ".join(f"{arm}: {st['reason']}"
                                    for arm, st in states.get(case.name, {}).items())
                    raise GnnperfError(f"{case.name} cannot run in this tree ({why or 'absent'})")
                sample = samples[0]
                by_clock = {sample.clock: (sample.a, sample.b),
                            "wall" if sample.clock == "cpu" else "cpu":
                            (sample.a_other, sample.b_other)}
                record = {"trial": trial, "slowdown": s, "steps": sample.steps,
                          "sets": len(sample.a), "seconds": time.perf_counter() - compare_start}
                for clock in ("cpu", "wall"):
                    a, b = by_clock[clock]
                    v = decide(TimeSamples(case.name, sample.steps, clock,
                                           a[:options.processes], b[:options.processes]),
                               options.threshold, options.alpha)
                    record[clock] = {"ratio": v.ratio, "p_slower": v.p_slower,
                                     "p_faster": v.p_faster, "ci": [v.ci_low, v.ci_high],
                                     "log_ratios": pair_log_ratios(a, b)}
                ratio, p_slower, p_faster, used, _ = adaptive_test(
                    record["cpu"]["log_ratios"], options.processes, options.budget,
                    options.threshold, options.alpha)
                record["adaptive"] = {"ratio": ratio, "p_slower": p_slower,
                                      "p_faster": p_faster, "pairs": used}
                trials.append(record)
            if on_trial is not None:
                on_trial({"settings": record_settings, "trials": trials},
                         trials[-len(comparisons):])
        record_settings["wall_s"] = time.perf_counter() - start
    return {"settings": record_settings, "trials": trials}


def rejudge(study: dict) -> dict:
    """The study's trials judged by the current decision rule (the fixed
    gate on the first ``processes`` pairs; the adaptive one by
    :func:`evaluate`)."""
    processes = study["settings"]["processes"]
    for t in study["trials"]:
        t["slowdown"] = float(t["slowdown"])
        for clock in ("cpu", "wall"):
            center, p_slower, p_faster, lo, hi = pair_test(t[clock]["log_ratios"][:processes])
            t[clock].update(ratio=math.exp(center), p_slower=p_slower, p_faster=p_faster,
                            ci=[math.exp(lo), math.exp(hi)])
    return study


def evaluate(trials: list[dict], thresholds: list[float], alpha: float,
             clocks=("cpu", "wall"), adaptive: tuple[int, int, float] | None = None
             ) -> list[dict]:
    """Rates per clock and threshold as ``(hits, trials)``: under key 0.0
    the A/A trials judged a regression, under ``aa_wrong`` those judged
    anything but "same" (an improvement is as wrong), under each slowdown
    s the trials judged a regression. With
    :obj:`adaptive` ``(processes, budget, threshold)``, also the adaptive
    gate's rates on the CPU clock at that threshold (the one the trials ran
    their extra pairs for), replayed on each trial's pairs (``pairs``: their
    mean number), as a row with ``clock`` ``cpu, adaptive``."""
    rows = []
    conditions = sorted({t["slowdown"] for t in trials})
    for clock in clocks:
        for threshold in thresholds:
            row = {"clock": clock, "threshold": threshold, "alpha": alpha}
            for s in conditions:
                runs = [t[clock] for t in trials if t["slowdown"] == s]
                verdicts = [judge(r["ratio"], r["p_slower"], r["p_faster"], threshold, alpha)
                            for r in runs]
                row[s] = (verdicts.count("REGRESSION"), len(runs))
                if s == 0.0:  # an A/A read as an improvement is as wrong as a regression
                    row["aa_wrong"] = (len(runs) - verdicts.count("same"), len(runs))
            rows.append(row)
    if adaptive is not None:
        processes, budget, threshold = adaptive
        for threshold in [threshold]:
            row = {"clock": "cpu, adaptive", "threshold": threshold, "alpha": alpha}
            pairs = []
            for s in conditions:
                verdicts = []
                runs = [t for t in trials if t["slowdown"] == s]
                for t in runs:
                    ratio, p_slower, p_faster, used, _ = adaptive_test(
                        t["cpu"]["log_ratios"], processes, budget, threshold, alpha)
                    pairs.append(used)
                    verdicts.append(judge(ratio, p_slower, p_faster, threshold, alpha))
                row[s] = (verdicts.count("REGRESSION"), len(runs))
                if s == 0.0:
                    row["aa_wrong"] = (len(runs) - verdicts.count("same"), len(runs))
            row["pairs"] = statistics.fmean(pairs) if pairs else float("nan")
            rows.append(row)
    return rows


def smallest_clean(row: dict, min_rate: float = 0.9) -> float | None:
    """Smallest slowdown detected in >= :obj:`min_rate` of its trials, if the
    row gave no wrong A/A verdict (a regression or an improvement)."""
    if row.get("aa_wrong", row.get(0.0, (0, 0)))[0] > 0:
        return None
    for s in sorted(k for k in row if isinstance(k, float) and k > 0):
        hits, n = row[s]
        if n and hits / n >= min_rate:
            return s
    return None


def format_table(trials: list[dict], rows: list[dict]) -> str:
    conditions = sorted({t["slowdown"] for t in trials})
    lines = ["Measured ratio B/A per condition (median over trials [min, max]):", ""]
    lines.append("| condition | clock | median ratio | range |")
    lines.append("|---|---|---|---|")
    for s in conditions:
        for clock in ("cpu", "wall"):
            ratios = [t[clock]["ratio"] for t in trials if t["slowdown"] == s]
            if ratios:
                name = "A/A" if s == 0 else f"+{s:.0%}"
                lines.append(f"| {name} | {clock} | {statistics.median(ratios):.3f} | "
                             f"[{min(ratios):.3f}, {max(ratios):.3f}] |")
    lines += ["", "Alarm rates per decision threshold (ratio > 1 + threshold and p < alpha):", ""]
    header = "| clock | threshold | alpha | false alarms (A/A) | A/A wrong either way | " + "".join(
        f"detected +{s:.0%} | " for s in conditions if s > 0) + "smallest clean | mean pairs |"
    lines.append(header)
    lines.append("|" + "---|" * (header.count("|") - 1))
    for row in rows:
        clean = smallest_clean(row)
        cells = [row["clock"], f"{row['threshold']:.1%}", f"{row['alpha']}",
                 "{}/{}".format(*row.get(0.0, (0, 0))),
                 "{}/{}".format(*row.get("aa_wrong", (0, 0)))]
        cells += ["{}/{}".format(*row[s]) for s in conditions if s > 0]
        cells.append(f"+{clean:.0%}" if clean is not None else "-")
        cells.append(f"{row['pairs']:.1f}" if "pairs" in row else "fixed")
        lines.append("| " + " | ".join(cells) + " |")
    timed = [t for t in trials if "seconds" in t]
    if timed:
        lines += ["", f"Wall time of {len(timed)} gate runs: {sum(t['seconds'] for t in timed):.0f}"
                      f" s, {statistics.fmean(t['sets'] for t in timed):.1f} pairs each on "
                      f"average (the adaptive gate's extra pairs included)."]
    return "\n".join(lines)
