"""What moved: the gate's explanation of a change it found.

A verdict says *that* a step got slower or does other work; this module
says *what*: for each case to explain, the operators whose CPU self time
changed most between the arms (a torch profile of the step the gate timed,
taken in each arm's own worker and environment, interleaved as the timing
is); whether the time change is one shift common to every case (one cause:
dispatch, the allocator, threads, the build) or particular to some, with
the cases grouped; and each environment's per-op overhead (the cost of an
op that does no work). It runs only when there is something to explain (a
regression, a changed work metric) or when asked
(``gnnperf gate --explain``), and never changes the gate's verdict.
"""
from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import time
from typing import Callable

from gnnperf import warm
from gnnperf.errors import GnnperfError
from gnnperf.gate.arms import INSTRUMENT, WORKER, Arm
from gnnperf.measure.case import Case

#: Ops listed per case, by absolute change of self time per step.
TOP_OPS = 5
#: Profiles per case and arm (the median of each op's self time is kept).
ROUNDS = 15
#: Target wall time of one profile of a case (at least 3 steps are profiled).
PROFILE_MS = 200.0
#: The per-op overhead figures of :func:`~gnnperf.measure.workcount.empty_op_ns`.
OVERHEADS = ("add_ns", "empty_ns", "add_grad_ns")
#: Ratios closer than this (relative) are one shift whatever their intervals:
#: a difference this small is no second cause a reader could act on.
TOLERANCE = 0.01


def to_explain(verdicts: list[dict], rows: list[dict], force: bool = False) -> list[str]:
    r"""The cases whose change the gate explains: a time verdict of
    ``REGRESSION``, or a changed work metric; every case measured in both
    arms with :obj:`force` (``--explain``). A passing gate (an improvement
    included) gives an empty list and costs nothing more.

    Args:
        verdicts (list): The time gate's verdicts (as dicts).
        rows (list): The work gate's rows (:func:`~gnnperf.gate.work.compare_work`).
        force (bool): Explain every case.
    """
    names: list[str] = []
    for v in verdicts:
        if force or v["verdict"] == "REGRESSION":
            names.append(v["case"])
    for row in rows:
        if row.get("new") or row["metric"] == "(benchmark)":
            continue
        if force or not row["same"]:
            names.append(row["case"])
    return list(dict.fromkeys(names))


# ---------------------------------------------------------------- the op diff
def _scaled(profile: dict) -> dict:
    """A profile's self times scaled by its CPU time over its wall time
    (at most 1): the profiler's clock is the wall's, so time the core gave
    other processes during a profile (a shared machine) is taken out,
    spread over the ops as evenly as it fell on them. A profile already
    scaled (a median, a sum) is returned as it is."""
    if profile.get("scaled") or not profile.get("cpu_us"):
        return profile
    factor = min(1.0, profile["cpu_us"] / profile["wall_us"])
    return {"steps": profile["steps"], "wall_us": profile["wall_us"],
            "cpu_us": profile["cpu_us"], "scaled": True,
            "ops": {name: {"self_us": op["self_us"] * factor, "calls": op["calls"]}
                    for name, op in profile["ops"].items()}}


def median_profile(profiles: list[dict]) -> dict:
    """One profile from several of the same step: per op, the median of its
    self time (each profile's scaled to its CPU time, :func:`_scaled`) and
    calls over :obj:`profiles` (0 where a profile lacks the op), and the
    median wall and CPU time per step."""
    profiles = [_scaled(p) for p in profiles]
    names = sorted({name for p in profiles for name in p["ops"]})
    ops = {}
    for name in names:
        found = [p["ops"].get(name, _NONE) for p in profiles]
        ops[name] = {"self_us": statistics.median(f["self_us"] for f in found),
                     "calls": statistics.median(f["calls"] for f in found)}
    return {"steps": min(p["steps"] for p in profiles), "profiles": len(profiles),
            "wall_us": statistics.median(p["wall_us"] for p in profiles),
            "cpu_us": statistics.median(p.get("cpu_us", p["wall_us"]) for p in profiles),
            "scaled": True, "ops": ops}


_NONE = {"self_us": 0.0, "calls": 0.0}


def self_time_diff(base: dict, head: dict, top: int = TOP_OPS,
                   paired: list[tuple[dict, dict]] | None = None) -> list[dict]:
    r"""The :obj:`top` operators whose CPU self time per step changed most
    (by absolute change) from :obj:`base` to :obj:`head`, two profiles as
    :func:`~gnnperf.measure.workcount.profile_self_times` returns them (or
    :func:`median_profile` of several); after them, any other op whose
    calls per step changed (a work change is always named).

    Each row: ``op``, ``base_us``, ``head_us``, ``delta_us`` (µs per step),
    ``ratio`` (``None`` for an op new in the head) and the calls per step
    in each arm. With :obj:`paired` (each round's base and head profiles,
    taken one right after the other) the change and the ratio are the
    medians of the rounds' own (a slow spell of a shared machine falls on
    both profiles of a round, and cancels there), and ``agree`` counts the
    rounds whose difference has the sign of the change, of ``rounds``: a
    change that noise made holds in about half of them, a real one in all.
    """
    pairs = [(_scaled(a), _scaled(b)) for a, b in paired or ()]
    rows = []
    for name in set(base["ops"]) | set(head["ops"]):
        a, b = base["ops"].get(name, _NONE), head["ops"].get(name, _NONE)
        row = {"op": name, "base_us": a["self_us"], "head_us": b["self_us"],
               "delta_us": b["self_us"] - a["self_us"],
               "ratio": b["self_us"] / a["self_us"] if a["self_us"] > 0 else None,
               "base_calls": a["calls"], "head_calls": b["calls"]}
        if pairs:
            times = [(pa["ops"].get(name, _NONE)["self_us"], pb["ops"].get(name, _NONE)["self_us"])
                     for pa, pb in pairs]
            row["delta_us"] = statistics.median(tb - ta for ta, tb in times)
            ratios = [tb / ta for ta, tb in times if ta > 0]
            row["ratio"] = statistics.median(ratios) if ratios else None
            sign = math.copysign(1.0, row["delta_us"])
            row["agree"] = sum(1 for ta, tb in times if (tb - ta) * sign > 0)
            row["rounds"] = len(times)
        rows.append(row)
    rows.sort(key=lambda r: (-abs(r["delta_us"]), r["op"]))
    return rows[:top] + [r for r in rows[top:] if r["base_calls"] != r["head_calls"]]


def consistent_from(rounds: int, alpha: float = 0.01) -> int:
    """The fewest of :obj:`rounds` rounds that must agree on a change's
    direction for a two-sided sign test to reject "no change" at
    :obj:`alpha` (``rounds + 1`` when no count can): below it, the top
    ops of an A/A comparison agree as often by chance."""
    for k in range(rounds // 2 + 1, rounds + 1):
        tail = sum(math.comb(rounds, i) for i in range(k, rounds + 1)) / 2 ** rounds
        if 2 * tail < alpha:
            return k
    return rounds + 1


def step_change(paired: list[tuple[dict, dict]]) -> dict:
    """The profiled step's change over the rounds: the median of each
    round's head/base CPU time per step, and the rounds that agree on its
    direction."""
    ratios = [b.get("cpu_us", b["wall_us"]) / a.get("cpu_us", a["wall_us"]) for a, b in paired]
    ratio = statistics.median(ratios)
    return {"ratio": ratio, "agree": sum(1 for r in ratios if (r - 1) * (ratio - 1) > 0),
            "rounds": len(ratios)}


def _summed(profiles: list[dict]) -> dict:
    """Profiles of several cases as one: per op, self time and calls summed
    (one step of each case)."""
    ops: dict[str, dict[str, float]] = {}
    wall = cpu = 0.0
    for profile in profiles:
        wall += profile["wall_us"]
        cpu += profile.get("cpu_us", profile["wall_us"])
        for name, op in _scaled(profile)["ops"].items():
            into = ops.setdefault(name, {"self_us": 0.0, "calls": 0.0})
            into["self_us"] += op["self_us"]
            into["calls"] += op["calls"]
    return {"steps": 1, "wall_us": wall, "cpu_us": cpu, "scaled": True, "ops": ops}


def summed_diff(profiles: dict[str, dict], top: int = TOP_OPS,
                rounds: dict[str, list[tuple[dict, dict]]] | None = None) -> list[dict]:
    """:func:`self_time_diff` over every profiled case at once: per op, its
    self time summed over the cases' steps (one step of each), so an op
    that moved in every case leads; :obj:`rounds` (each case's paired
    rounds) sums round by round, for the paired change and the agreement."""
    base = _summed([arms["base"] for arms in profiles.values()])
    head = _summed([arms["head"] for arms in profiles.values()])
    paired = None
    if rounds:
        count = min(len(pairs) for pairs in rounds.values())
        paired = [(_summed([rounds[case][r][0] for case in rounds]),
                   _summed([rounds[case][r][1] for case in rounds])) for r in range(count)]
    return self_time_diff(base, head, top, paired)


# ---------------------------------------------------------------- common or particular
def _log_se(v: dict) -> float:
    """The standard error of a verdict's log ratio, read back from its 95%
    interval (the t interval of :func:`~gnnperf.gate.decision.pair_test`,
    ``pairs - 1`` degrees of freedom); a floor keeps a zero-width interval
    finite."""
    from scipy import stats

    half = (math.log(v["ci_high"]) - math.log(v["ci_low"])) / 2
    dof = max(int(v.get("pairs") or 2) - 1, 1)
    return max(half / float(stats.t.ppf(0.975, dof)), 1e-6)


def _pooled(points: list[tuple[str, float, float]]) -> tuple[float, float, float]:
    """Inverse-variance mean of log ratios, its standard error, and Cochran's
    Q (the weighted squares about the mean)."""
    weights = [1 / se ** 2 for _, _, se in points]
    mean = sum(w * y for w, (_, y, _) in zip(weights, points)) / sum(weights)
    q = sum(w * (y - mean) ** 2 for w, (_, y, _) in zip(weights, points))
    return mean, 1 / math.sqrt(sum(weights)), q


def _chi2_p(q: float, dof: int) -> float:
    from scipy import stats

    return float(stats.chi2.sf(q, dof)) if dof > 0 else 1.0


def _split(points: list[tuple[str, float, float]], alpha: float,
           tolerance: float) -> list[list[tuple[str, float, float]]]:
    """Sorted log ratios cut into groups each consistent with one factor:
    a group whose ratios lie within :obj:`tolerance` of each other, or
    whose Q test keeps one factor (p >= :obj:`alpha`), stays whole; any
    other is cut where the two sides' weighted means differ most (the cut
    that removes most of Q), and each side is judged again."""
    spread = points[-1][1] - points[0][1]
    if len(points) < 2 or spread <= math.log1p(tolerance) or \
            _chi2_p(_pooled(points)[2], len(points) - 1) >= alpha:
        return [points]
    mean = _pooled(points)[0]
    best, cut = -1.0, 1
    for i in range(1, len(points)):
        between = 0.0
        for side in (points[:i], points[i:]):
            side_mean, side_se, _ = _pooled(side)
            between += (side_mean - mean) ** 2 / side_se ** 2
        if between > best:
            best, cut = between, i
    return _split(points[:cut], alpha, tolerance) + _split(points[cut:], alpha, tolerance)


def group_ratios(verdicts: list[dict], ops_per_step: dict[str, int] | None = None,
                 alpha: float = 0.01, tolerance: float = TOLERANCE) -> dict:
    r"""Whether the time change is common to every case or particular to
    some: the cases' ratios (head/base, with their 95% intervals) tested
    for one common factor (Cochran's Q on the log ratios, weighted by their
    precision), and cut into groups that each are consistent with one.

    A common factor is one cause that scales every step alike (slower
    kernels everywhere, threads, the build's flags). One cost added to
    every op (dispatch, the allocator) instead grows each step by the same
    time per op, so the ratios differ with the cases' op density: with
    :obj:`ops_per_step` (ATen ops of each case's step) that second
    single-cause model is fitted too, ``Δt = δ x ops``.

    Args:
        verdicts (list): Time verdicts (dicts with ``case``, ``ratio``,
            ``ci_low``, ``ci_high``, ``pairs``, ``base_median_s``).
        ops_per_step (dict, optional): ATen ops per step of each case.
        alpha (float): Significance level of both fits.
        tolerance (float): Ratios this close (relative) are one shift.

    Returns ``shift`` (``common``, ``particular``, ``one case`` or
    ``none``), ``groups`` (each ``cases`` and its pooled ``ratio`` with a
    95% interval), ``p_common`` (the Q test's p-value: small, no common
    factor fits), ``alpha``, ``tolerance`` and, with :obj:`ops_per_step`,
    ``per_op`` (``ns_per_op`` with its interval, ``p`` and whether it
    ``fits``).
    """
    points = sorted(((v["case"], math.log(v["ratio"]), _log_se(v)) for v in verdicts
                     if v["ratio"] > 0 and v["ci_low"] > 0), key=lambda p: (p[1], p[0]))
    if not points:
        return {"shift": "none", "groups": [], "p_common": None, "per_op": None,
                "alpha": alpha, "tolerance": tolerance}
    groups = _split(points, alpha, tolerance)
    out = []
    for group in groups:
        mean, se, _ = _pooled(group)
        out.append({"cases": [name for name, _, _ in group], "ratio": math.exp(mean),
                    "ci_low": math.exp(mean - 1.96 * se), "ci_high": math.exp(mean + 1.96 * se)})
    p_common = _chi2_p(_pooled(points)[2], len(points) - 1)
    shift = "one case" if len(points) == 1 else "common" if len(groups) == 1 else "particular"
    return {"shift": shift, "groups": out, "p_common": p_common,
            "per_op": _per_op_fit(verdicts, ops_per_step, alpha) if ops_per_step else None,
            "alpha": alpha, "tolerance": tolerance}


def _per_op_fit(verdicts: list[dict], ops_per_step: dict[str, int], alpha: float) -> dict | None:
    """Weighted least squares of each case's added time per step on its ATen
    ops per step through the origin, ``Δt = δ x ops``; ``fits`` when the
    residuals are consistent with the intervals (chi-square, p >= alpha)."""
    points = []
    for v in verdicts:
        ops = ops_per_step.get(v["case"])
        if not ops or v["ratio"] <= 0 or v["ci_low"] <= 0:
            continue
        delta = v["base_median_s"] * (v["ratio"] - 1)
        se = v["base_median_s"] * v["ratio"] * _log_se(v)
        points.append((ops, delta, se))
    if len(points) < 2:
        return None
    sxx = sum(n * n / se ** 2 for n, _, se in points)
    slope = sum(n * d / se ** 2 for n, d, se in points) / sxx
    chi2 = sum((d - slope * n) ** 2 / se ** 2 for n, d, se in points)
    p = _chi2_p(chi2, len(points) - 1)
    half = 1.96 / math.sqrt(sxx)
    return {"ns_per_op": slope * 1e9, "ci_low": (slope - half) * 1e9,
            "ci_high": (slope + half) * 1e9, "p": p, "fits": p >= alpha, "cases": len(points)}


# ---------------------------------------------------------------- the arms' workers
class ProfileWorker:
    """A ``worker.py --mode profile`` process of one arm: its cases
    prepared as the time worker prepares them, profiled on request."""

    def __init__(self, arm: Arm, cases: list[Case]) -> None:
        self.arm = arm
        cmd = [arm.python, str(WORKER), "--mode", "profile", "--tree", str(arm.tree),
               "--instrument", str(INSTRUMENT),
               "--cases", json.dumps([json.loads(case.to_json()) for case in cases])]
        self.proc = warm.start(cmd, arm.env())

    def read(self) -> dict:
        while True:  # an import may print a line of its own first
            line = self.proc.stdout.readline()
            if not line:
                self.proc.wait()
                lines = [x for x in self.proc.stderr.read().splitlines() if x.strip()]
                raise GnnperfError(f"a profile worker of {self.arm.describe()} died: "
                                   f"{lines[-1] if lines else 'no output'}")
            try:
                reply = json.loads(line)
            except ValueError:
                continue
            if isinstance(reply, dict):
                return reply

    def ready(self) -> tuple[list[float | None], list[dict | None]]:
        while True:
            reply = self.read()
            if reply.get("ready"):
                return reply["step_s"], reply["status"]

    def ask(self, request: dict) -> dict:
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        return self.read()

    def close(self) -> None:
        try:
            self.proc.stdin.write(json.dumps({"quit": True}) + "\n")
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


def _start(arms: dict[str, Arm], cases: list[Case]) -> dict[str, ProfileWorker]:
    workers: dict[str, ProfileWorker] = {}
    try:
        for name, arm in arms.items():
            workers[name] = ProfileWorker(arm, cases)
        return workers
    except BaseException:
        for worker in workers.values():
            worker.close()
        raise


def _pin(workers: dict[str, ProfileWorker]) -> None:
    """Both arms' workers on one CPU, as a timing pair's: a CPU slower than
    the other for a while then slows both arms alike."""
    if not hasattr(os, "sched_getaffinity"):
        return
    cpus = sorted(os.sched_getaffinity(0))
    for worker in workers.values():
        try:
            os.sched_setaffinity(worker.proc.pid, {cpus[0]})
        except OSError:  # not permitted, or the CPU set changed: unpinned
            pass


def _overheads(workers: dict[str, ProfileWorker], rounds: int) -> dict[str, dict]:
    """Each arm's :func:`~gnnperf.measure.workcount.empty_op_ns`, the arms
    alternating, per figure the median over :obj:`rounds`; for two arms
    also ``change``, the median of the rounds' own differences (second arm
    minus first)."""
    found: dict[str, list[dict]] = {name: [] for name in workers}
    names = list(workers)
    for rnd in range(rounds):
        for name in (names if rnd % 2 == 0 else names[::-1]):
            found[name].append(workers[name].ask({"overhead": True}))
    out = {}
    for name, replies in found.items():
        out[name] = {key: statistics.median(r[key] for r in replies) for key in OVERHEADS}
        out[name].update(threads=replies[0]["threads"], torch=replies[0]["torch"],
                         rounds=rounds)
    if len(names) == 2:  # the change round by round: a slow spell falls on both arms
        a, b = names
        out["change"] = {key: statistics.median(y[key] - x[key]
                                                for x, y in zip(found[a], found[b]))
                         for key in OVERHEADS}
    return out


def profile_arms(arms: dict[str, Arm], cases: list[Case], rounds: int | None = None,
                 profile_ms: float | None = None, pin_cpus: bool = True,
                 log: Callable[[str], None] = lambda msg: None
                 ) -> tuple[dict[str, dict], dict[str, dict], dict[str, str], dict[str, list]]:
    r"""Profiles of every case in each arm, and each arm's per-op overhead.

    One ``profile`` worker per arm builds and warms the cases as the time
    workers do (the same step), then the arms take turns: per round
    (:obj:`rounds`, default :data:`ROUNDS`), each case is profiled for a
    block of steps of about :obj:`profile_ms` (default :data:`PROFILE_MS`)
    in one arm, then the other (the order reversed every round). The arms' own
    interpreters run them, so each arm is profiled under its own torch.

    Returns ``profiles[case][arm]`` (:func:`median_profile` of the rounds),
    ``overhead[arm]``, the cases that could not be profiled (with why) and
    each case's rounds as ``(base, head)`` profile pairs.
    """
    rounds = ROUNDS if rounds is None else rounds
    profile_ms = PROFILE_MS if profile_ms is None else profile_ms
    workers = _start(arms, cases)
    try:
        ready = {name: worker.ready() for name, worker in workers.items()}
        if pin_cpus:
            _pin(workers)
        failed: dict[str, str] = {}
        steps = {}
        for i, case in enumerate(cases):
            states = [ready[name][1][i] for name in workers]
            if any(state is not None for state in states):
                failed[case.name] = next(s["reason"] for s in states if s is not None)
                continue
            step_s = max(ready[name][0][i] for name in workers)
            steps[i] = max(3, round(profile_ms / 1e3 / step_s))
        names = list(workers)
        found: dict[str, dict[str, list]] = {cases[i].name: {n: [] for n in names} for i in steps}
        start = time.perf_counter()
        for rnd in range(rounds):
            for i, n in steps.items():
                if cases[i].name in failed:
                    continue
                for name in (names if rnd % 2 == 0 else names[::-1]):
                    reply = workers[name].ask({"case": i, "steps": n})
                    if "error" in reply:
                        failed[cases[i].name] = f"{name}: {reply['error']}"
                        break
                    found[cases[i].name][name].append(reply)
            log(f"  profile round {rnd + 1}/{rounds} ({time.perf_counter() - start:.0f} s)")
        overhead = _overheads(workers, rounds)
    finally:
        for worker in workers.values():
            worker.close()
    kept = {case: arms_found for case, arms_found in found.items() if case not in failed}
    profiles = {case: {name: median_profile(replies) for name, replies in arms_found.items()}
                for case, arms_found in kept.items()}
    rounds_of = {case: list(zip(arms_found["base"], arms_found["head"]))
                 for case, arms_found in kept.items()}
    return profiles, overhead, failed, rounds_of


def explain(arms: dict[str, Arm], cases: list[Case], verdicts: list[dict],
            ops_per_step: dict[str, int], alpha: float = 0.01, pin_cpus: bool = True,
            log: Callable[[str], None] = lambda msg: None, rounds: int | None = None) -> dict:
    r"""The gate report's ``explain`` section.

    Args:
        arms (dict): The ``base`` and ``head`` arms.
        cases (list): The cases to profile (:func:`to_explain`).
        verdicts (list): Every time verdict of the run (as dicts; empty
            without the time gate): the common-or-particular test reads
            them all, not only the cases profiled.
        ops_per_step (dict): ATen ops per step of each case (the base's
            work metrics), for the per-op-cost fit and the overhead's share.
        alpha (float): Significance level of the grouping's tests.
        pin_cpus (bool): Both arms' profile workers on one CPU.
        log (callable): Progress lines.
        rounds (int): Profiles per case and arm (default :data:`ROUNDS`).

    Returns ``cases``, ``rounds``, ``consistent_from``
    (:func:`consistent_from`), ``profiles[case][arm]`` (and ``[case]["step"]``,
    :func:`step_change`), ``ops[case]`` (the top ops
    by change of self time, :func:`self_time_diff`), ``all_cases`` (the same
    summed over the cases), ``shift`` (:func:`group_ratios`), ``overhead``
    per arm and its ``change`` (paired by round), ``per_case`` (each
    timed case's ratio, its added µs per step, its ATen ops and what the
    empty op's change times those ops makes),
    ``failed`` (cases not profiled, why) and ``seconds``.
    """
    start = time.perf_counter()
    rounds = ROUNDS if rounds is None else rounds
    log(f"explaining {len(cases)} benchmarks: profiles of each arm's step, "
        f"{rounds} rounds ...")
    profiles, overhead, failed, paired = profile_arms(arms, cases, rounds, pin_cpus=pin_cpus,
                                                      log=log)
    shift = group_ratios(verdicts, ops_per_step, alpha)
    moved = overhead["change"]["add_ns"]
    per_case = []
    for v in verdicts:
        ops = ops_per_step.get(v["case"])
        per_case.append({"case": v["case"], "ratio": v["ratio"], "ci_low": v["ci_low"],
                         "ci_high": v["ci_high"],
                         "delta_us": v["base_median_s"] * (v["ratio"] - 1) * 1e6,
                         "aten_ops": ops,
                         "overhead_us": moved * ops / 1e3 if ops is not None else None})
    for case, arms_found in profiles.items():
        arms_found["step"] = step_change(paired[case])
    return {"cases": [case.name for case in cases if case.name in profiles],
            "rounds": rounds, "consistent_from": consistent_from(rounds, alpha),
            "profiles": profiles,
            "ops": {case: self_time_diff(arms_found["base"], arms_found["head"],
                                         paired=paired[case])
                    for case, arms_found in profiles.items()},
            "all_cases": summed_diff(profiles, rounds=paired) if len(profiles) > 1 else [],
            "shift": shift, "overhead": overhead, "per_case": per_case, "failed": failed,
            "seconds": time.perf_counter() - start}


__all__ = ["OVERHEADS", "PROFILE_MS", "ROUNDS", "TOLERANCE", "TOP_OPS", "ProfileWorker",
           "consistent_from", "explain", "group_ratios", "median_profile", "profile_arms", "self_time_diff",
           "step_change", "summed_diff", "to_explain"]
