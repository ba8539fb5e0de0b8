#!/usr/bin/env python3
"""A/B regression gate: a base git ref against the working tree, in one job.

Two gates, both on the training step of each benchmark (variant x dataset):

* **work gate** (exact, zero noise): the work metrics of
  :mod:`gnnperf.workcount` (ATen op count, FLOPs, bytes allocated, peak bytes,
  graph breaks, recompiles) of base and head must be identical; any change
  fails the gate unless ``--accept-work-change`` is given.
* **time gate** (statistical): ``--processes`` pairs of worker processes,
  one on the base tree and one on the head tree, started together; each pair
  times ``--rounds`` interleaved samples (A B, B A, A B, ... so drift hits
  both), each sample a block of steps lasting about ``--sample-ms``. Per
  round the log ratio log(B/A) of two adjacent samples; per pair their
  interquartile mean; the estimate is the mean over pairs, tested with a
  one-sided t-test across pairs (the pair is the unit of replication, so a
  process-level offset counts as noise, not as signal). A benchmark
  regresses when ``ratio > 1 + threshold`` **and** ``p < alpha``.
  Needs scipy (the ``test`` extra).

Usage (exit status 1 on a regression, 2 on a usage or set-up error)::

    python tools/ab_gate.py --base origin/main            # every standard variant, cora + synthetic-10k
    python tools/ab_gate.py --base HEAD --variants baseline --datasets cora
    python tools/ab_gate.py --base-dir /tmp/old --head-dir . --no-time   # exact gate only

The measuring code (this file and ``gnnperf/workcount.py``) always comes from
the head checkout, the code measured from each tree (``PYTHONPATH``), so the
instrument is the same on both sides.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATASETS = ("cora", "synthetic-10k")


# --------------------------------------------------------------------------- worker
def _load_instrument(instrument: Path):
    """gnnperf/workcount.py of the head checkout, as a standalone module."""
    spec = importlib.util.spec_from_file_location("_gnnperf_gate_workcount", instrument)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _worker_setup(args: argparse.Namespace):
    tree = Path(args.tree).resolve()
    sys.path.insert(0, str(tree))
    import torch

    torch.set_num_threads(1)
    import gnnperf
    from gnnperf.data import load_dataset

    if not Path(gnnperf.__file__).resolve().is_relative_to(tree):
        raise SystemExit(f"gnnperf imported from {gnnperf.__file__}, not from {tree}")
    from gnnperf.errors import GnnperfError

    workcount = _load_instrument(Path(args.instrument))
    datasets = {}
    cases = []
    for name in args.cases.split(","):
        variant, dataset = name.split("@")
        if dataset not in datasets:
            datasets[dataset] = load_dataset(dataset)
        try:
            cases.append(workcount.prepare_step(variant, datasets[dataset]))
        except GnnperfError:  # a variant this tree does not have (yet)
            cases.append(None)
    return workcount, cases


def _worker_work(args: argparse.Namespace) -> None:
    workcount, cases = _worker_setup(args)
    out = []
    for case in cases:
        if case is None:
            out.append(None)
            continue
        metrics = workcount.measure_work(case)
        out.append(dict(metrics.to_dict(), exact=metrics.exact()))
    sys.stdout.write(json.dumps(out) + "\n")


def _worker_time(args: argparse.Namespace) -> None:
    import gc

    _, cases = _worker_setup(args)
    step_s = []
    for case in cases:  # a few more warm steps, and a rough per-step time
        if case is None:
            step_s.append(None)
            continue
        samples = []
        for _ in range(3):
            start = time.perf_counter()
            case.step()
            samples.append(time.perf_counter() - start)
        step_s.append(statistics.median(samples))
    # A full collection costs ~0.5 s with torch loaded; freeze the set-up's
    # objects so the collector stays cheap and never runs inside a sample.
    gc.collect()
    gc.freeze()
    print(json.dumps({"ready": True, "step_s": step_s}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("quit"):
            break
        case, steps = cases[request["case"]], request["steps"]
        start, start_cpu = time.perf_counter(), time.process_time()
        for _ in range(steps):
            case.step()
        cpu = time.process_time() - start_cpu
        wall = time.perf_counter() - start
        print(json.dumps({"wall": wall / steps, "cpu": cpu / steps}), flush=True)


# --------------------------------------------------------------------------- trees
def export_ref(ref: str, dest: Path, repo: Path = ROOT) -> Path:
    """Writes the files of git :obj:`ref` into :obj:`dest` (``git archive``;
    the repository's worktree list is left alone)."""
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile() as archive:
        proc = subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", ref],
                              stdout=archive, stderr=subprocess.PIPE)
        if proc.returncode != 0:
            raise GateError(f"git archive {ref} failed: {proc.stderr.decode().strip()}")
        archive.seek(0)
        with tarfile.open(fileobj=archive) as tar:
            tar.extractall(dest, filter="data")
    return dest


class GateError(Exception):
    """A usage or set-up error (exit status 2)."""


def _worker_cmd(mode: str, tree: Path, cases: list[str]) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--worker", mode,
            "--tree", str(tree), "--instrument", str(ROOT / "gnnperf" / "workcount.py"),
            "--cases", ",".join(cases)]


def _worker_env() -> dict:
    # One intra-op thread (also for OpenMP/MKL pools); hash seed fixed.
    return dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONHASHSEED="0")


# --------------------------------------------------------------------------- work gate
def run_work(trees: dict[str, Path], cases: list[str]) -> dict[str, list[dict]]:
    """Work metrics of every case in each tree (both trees in parallel)."""
    procs = {side: subprocess.Popen(_worker_cmd("work", tree, cases), env=_worker_env(),
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for side, tree in trees.items()}
    results = {}
    for side, proc in procs.items():
        stdout, stderr = proc.communicate()
        if proc.returncode != 0:
            raise GateError(f"work metrics of the {side} tree failed:\n{stderr[-3000:]}")
        results[side] = json.loads(stdout.strip().splitlines()[-1])
    return results


def compare_work(cases: list[str], base: list[dict | None],
                 head: list[dict | None]) -> list[dict]:
    """One row per case and exact metric: base, head, and whether they match.
    A benchmark only the head has is reported as new and does not fail."""
    rows = []
    for case, a, b in zip(cases, base, head):
        if a is None or b is None:
            rows.append({"case": case, "metric": "(benchmark)", "base": "absent" if a is None
                         else "present", "head": "absent" if b is None else "present",
                         "same": a is None and b is None, "new": a is None and b is not None})
            continue
        for name in a["exact"]:
            rows.append({"case": case, "metric": name,
                         "base": a["exact"].get(name), "head": b["exact"].get(name),
                         "same": a["exact"].get(name) == b["exact"].get(name)})
        ops_a, ops_b = a.get("op_counts", {}), b.get("op_counts", {})
        if ops_a != ops_b:
            diff = {op: (ops_a.get(op, 0), ops_b.get(op, 0)) for op in sorted(set(ops_a) | set(ops_b))
                    if ops_a.get(op, 0) != ops_b.get(op, 0)}
            rows.append({"case": case, "metric": "op_counts", "base": None, "head": None,
                         "same": False, "op_diff": diff})
    return rows


def format_work(rows: list[dict]) -> str:
    lines = [f"{'benchmark':30} {'metric':16} {'base':>14} {'head':>14}  verdict"]
    for row in rows:
        if "op_diff" in row:
            changes = ", ".join(f"{op} {a}->{b}" for op, (a, b) in row["op_diff"].items())
            lines.append(f"{row['case']:30} {'ops changed':16} {changes}")
            continue
        if row["base"] is None and row["head"] is None:
            continue
        verdict = "same" if row["same"] else "new" if row.get("new") else "CHANGED"
        lines.append(f"{row['case']:30} {row['metric']:16} {_fmt(row['base']):>14} "
                     f"{_fmt(row['head']):>14}  {verdict}")
    return "\n".join(lines)


def _fmt(value) -> str:
    return "-" if value is None else f"{value:,}" if isinstance(value, int) else str(value)


# --------------------------------------------------------------------------- time gate
@dataclass
class TimeSamples:
    """Seconds per step: ``a[p][r]`` (base) and ``b[p][r]`` (head) for pair p,
    round r, on the gate's clock; ``a_other``/``b_other`` on the other clock."""
    case: str
    steps: int
    clock: str = "cpu"
    a: list[list[float]] = field(default_factory=list)
    b: list[list[float]] = field(default_factory=list)
    a_other: list[list[float]] = field(default_factory=list)
    b_other: list[list[float]] = field(default_factory=list)

    def on(self, clock: str) -> "TimeSamples":
        """These samples judged on :obj:`clock` (``cpu`` or ``wall``)."""
        if clock == self.clock:
            return self
        return TimeSamples(self.case, self.steps, clock, self.a_other, self.b_other,
                           self.a, self.b)


class _Worker:
    def __init__(self, tree: Path, cases: list[str]) -> None:
        self.proc = subprocess.Popen(_worker_cmd("time", tree, cases), env=_worker_env(),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, bufsize=1)

    def read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            err = self.proc.stderr.read()
            raise GateError(f"time worker died:\n{err[-3000:]}")
        return json.loads(line)

    def ready(self) -> list[float]:
        while True:
            reply = self.read()
            if reply.get("ready"):
                return reply["step_s"]

    def time(self, case: int, steps: int) -> dict[str, float]:
        """Wall-clock and CPU seconds per step of a block of :obj:`steps` steps."""
        self.proc.stdin.write(json.dumps({"case": case, "steps": steps}) + "\n")
        return self.read()

    def close(self) -> None:
        try:
            self.proc.stdin.write(json.dumps({"quit": True}) + "\n")
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


def run_arms(trees: dict[str, Path], cases: list[str], processes: int, rounds: int,
             sample_ms: float, progress=None) -> tuple[list[int], dict]:
    """Interleaved timing of every case in every tree (an *arm*).

    ``processes`` times, one worker process per arm is started (together);
    then ``rounds`` rounds (plus one dropped warm-up round) time each case in
    every arm, one block of steps each: for two arms alternately A B and B A
    (each sample follows one of the other arm as often as one of its own),
    for more arms in a random order each round (seeded), since a fixed
    rotation makes each arm always follow the same one (measured here: a
    sample after a busy-loop arm ran ~1.5% slower). Returns the block
    size per case (the first arm's step time sets it, the same for all arms)
    and ``times[case][arm][clock][process][round]`` in seconds per step, for
    the ``cpu`` and ``wall`` clocks."""
    arms = list(trees)
    steps: list[int] = []
    times = {case: {arm: {"cpu": [], "wall": []} for arm in arms} for case in cases}
    for proc_set in range(processes):
        workers = {arm: _Worker(tree, cases) for arm, tree in trees.items()}
        try:
            step_s = {arm: w.ready() for arm, w in workers.items()}
            if not steps:  # a case missing from an arm is not timed (0 steps)
                steps = [0 if any(step_s[arm][i] is None for arm in arms)
                         else max(1, round(sample_ms / 1e3 / step_s[arms[0]][i]))
                         for i in range(len(cases))]
            for case in cases:
                for arm in arms:
                    for clock in ("cpu", "wall"):
                        times[case][arm][clock].append([])
            shuffler = random.Random(proc_set)
            for rnd in range(rounds + 1):  # round 0 warms up and is dropped
                if len(arms) == 2:  # A B, B A, A B, ...: each follows the other equally
                    order = arms if (rnd + proc_set) % 2 == 0 else arms[::-1]
                else:  # a fresh order each round: no arm always follows the same one
                    order = shuffler.sample(arms, len(arms))
                for i, case in enumerate(cases):
                    if not steps[i]:
                        continue
                    for arm in order:
                        sample = workers[arm].time(i, steps[i])
                        if rnd > 0:
                            for clock in ("cpu", "wall"):
                                times[case][arm][clock][-1].append(sample[clock])
            if progress is not None:
                progress(proc_set + 1, processes)
        finally:
            for w in workers.values():
                w.close()
    return steps, times


def run_time(trees: dict[str, Path], cases: list[str], processes: int, rounds: int,
             sample_ms: float, clock: str = "cpu", progress=None) -> list[TimeSamples]:
    """:func:`run_arms` on the ``base`` and ``head`` trees, as samples per case."""
    steps, times = run_arms(trees, cases, processes, rounds, sample_ms, progress)
    other = "wall" if clock == "cpu" else "cpu"
    return [TimeSamples(case, n, clock, times[case]["base"][clock], times[case]["head"][clock],
                        times[case]["base"][other], times[case]["head"][other])
            for case, n in zip(cases, steps) if n]


@dataclass
class Verdict:
    case: str
    base_median_s: float
    head_median_s: float
    base_spread: float
    head_spread: float
    ratio: float
    ci_low: float
    ci_high: float
    p_slower: float
    p_faster: float
    verdict: str


def _median(values: list[float]) -> float:
    return statistics.median(values)


def _spread(values: list[float]) -> float:
    """Interquartile range relative to the median."""
    if len(values) < 2:
        return 0.0
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    med = statistics.median(values)
    return (q3 - q1) / med if med > 0 else 0.0


def pair_log_ratios(a: list[list[float]], b: list[list[float]]) -> list[list[float]]:
    """log(B/A) of each round of each pair."""
    return [[math.log(y / x) for x, y in zip(ra, rb)] for ra, rb in zip(a, b)]


def _iqm(values, axis=-1):
    """Interquartile mean (the mean of the middle half) along :obj:`axis`:
    nearly as efficient as the mean on normal noise, as robust as the median
    to the long right tail that preemption gives step times."""
    import numpy as np

    values = np.sort(np.asarray(values, dtype=float), axis=axis)
    n = values.shape[axis]
    lo, hi = n // 4, n - n // 4
    return np.take(values, range(lo, hi), axis=axis).mean(axis=axis)


def pair_test(log_ratios: list[list[float]]) -> tuple[float, float, float, float, float]:
    """One-sample t-test across pairs of each pair's interquartile-mean log
    ratio: the process pair is the unit of replication, so an offset that a
    worker process carries through all its rounds (memory layout; measured
    here up to ~10% on Cora-sized steps) counts as noise, not as signal.
    Returns (estimate, p_slower, p_faster, ci_low, ci_high) in log space."""
    from scipy import stats

    estimates = [float(_iqm(rounds)) for rounds in log_ratios]
    mean = statistics.fmean(estimates)
    dof = len(estimates) - 1
    se = statistics.stdev(estimates) / math.sqrt(len(estimates))
    if se == 0.0:
        return mean, float(mean <= 0), float(mean >= 0), mean, mean
    t = mean / se
    half = stats.t.ppf(0.975, dof) * se
    return (mean, float(stats.t.sf(t, dof)), float(stats.t.cdf(t, dof)),
            mean - half, mean + half)


def decide(samples: TimeSamples, threshold: float, alpha: float) -> Verdict:
    """Verdict of one benchmark: ``REGRESSION`` when the ratio exceeds
    ``1 + threshold`` and the one-sided p-value of :func:`pair_test` is below
    :obj:`alpha`; ``improvement`` symmetrically; else ``same``."""
    logs = pair_log_ratios(samples.a, samples.b)
    center, p_slower, p_faster, lo, hi = pair_test(logs)
    ratio = math.exp(center)
    verdict = judge(ratio, p_slower, p_faster, threshold, alpha)
    flat_a = [t for rounds in samples.a for t in rounds]
    flat_b = [t for rounds in samples.b for t in rounds]
    return Verdict(samples.case, _median(flat_a), _median(flat_b), _spread(flat_a),
                   _spread(flat_b), ratio, math.exp(lo), math.exp(hi), p_slower, p_faster,
                   verdict)


def judge(ratio: float, p_slower: float, p_faster: float, threshold: float,
          alpha: float) -> str:
    """The decision rule: a minimum effect and a significance level."""
    if ratio > 1 + threshold and p_slower < alpha:
        return "REGRESSION"
    if ratio < 1 / (1 + threshold) and p_faster < alpha:
        return "improvement"
    return "same"


def format_time(verdicts: list[Verdict], threshold: float, alpha: float) -> str:
    lines = [f"{'benchmark':30} {'base ms':>9} {'spread':>7} {'head ms':>9} {'spread':>7} "
             f"{'ratio':>7} {'95% CI':>15} {'p':>7}  verdict"]
    for v in verdicts:
        p = v.p_faster if v.ratio < 1 else v.p_slower
        lines.append(f"{v.case:30} {v.base_median_s * 1e3:9.3f} {v.base_spread:7.1%} "
                     f"{v.head_median_s * 1e3:9.3f} {v.head_spread:7.1%} {v.ratio:7.3f} "
                     f"[{v.ci_low:.3f},{v.ci_high:.3f}] {p:7.4f}  {v.verdict}")
    lines.append(f"(regression: ratio > {1 + threshold:.3f} and one-sided t-test across process "
                 f"pairs p < {alpha}; "
                 f"spread = IQR/median of the per-step samples)")
    return "\n".join(lines)


# --------------------------------------------------------------------------- main
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="A/B regression gate: base ref vs working tree (exact work metrics "
                    "and an interleaved, statistically tested time comparison).")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--base", default="HEAD", help="git ref of the base (default HEAD)")
    where.add_argument("--base-dir", help="a checkout to use as the base instead of a ref")
    parser.add_argument("--head-dir", default=str(ROOT),
                        help="the tree under test (default: this working tree)")
    parser.add_argument("--variants", default="standard",
                        help="comma-separated variants (default: the head tree's "
                             "STANDARD_VARIANTS)")
    parser.add_argument("--datasets", default=",".join(DEFAULT_DATASETS))
    parser.add_argument("--processes", type=int, default=6, help="worker pairs (default 6)")
    parser.add_argument("--rounds", type=int, default=30, help="rounds per pair (default 30)")
    parser.add_argument("--sample-ms", type=float, default=12.0,
                        help="target CPU time of one timed block of steps (default 12)")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                        help="judge CPU time of the worker process (default; immune to "
                             "time the core spent on other jobs) or wall-clock time")
    parser.add_argument("--threshold", type=float, default=0.03,
                        help="minimum effect: relative slowdown that may fail (default 0.03)")
    parser.add_argument("--alpha", type=float, default=0.01,
                        help="one-sided significance level (default 0.01)")
    parser.add_argument("--no-time", action="store_true", help="exact work gate only")
    parser.add_argument("--no-work", action="store_true", help="time gate only")
    parser.add_argument("--accept-work-change", action="store_true",
                        help="report work-metric changes without failing on them")
    parser.add_argument("--json", help="write samples, verdicts and work metrics here")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    parser.add_argument("--worker", choices=("time", "work"), help=argparse.SUPPRESS)
    parser.add_argument("--tree", help=argparse.SUPPRESS)
    parser.add_argument("--instrument", help=argparse.SUPPRESS)
    parser.add_argument("--cases", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def standard_variants(tree: Path) -> str:
    """The tree's ``STANDARD_VARIANTS``, comma-separated."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); "
            "from gnnperf.variants import STANDARD_VARIANTS as v; print(','.join(v))")
    proc = subprocess.run([sys.executable, "-c", code, str(tree)], capture_output=True,
                          text=True, env=_worker_env())
    if proc.returncode != 0:
        raise GateError(f"cannot read the variant registry of {tree}:\n{proc.stderr[-2000:]}")
    return proc.stdout.strip().splitlines()[-1]


def gate(args: argparse.Namespace) -> int:
    if args.variants == "standard":
        args.variants = standard_variants(Path(args.head_dir).resolve())
    cases = [f"{v.strip()}@{d.strip()}" for d in args.datasets.split(",")
             for v in args.variants.split(",") if v.strip() and d.strip()]
    if args.processes < 3 or args.rounds < 3:
        raise GateError("need --processes >= 3 (the t-test's replicates) and --rounds >= 3")
    log = (lambda msg: None) if args.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    report: dict = {"cases": cases, "settings": {k: getattr(args, k) for k in (
        "processes", "rounds", "sample_ms", "clock", "threshold", "alpha")}}
    failed = False
    with tempfile.TemporaryDirectory(prefix="gnnperf-gate-") as tmp:
        if args.base_dir:
            base = Path(args.base_dir).resolve()
        else:
            base = export_ref(args.base, Path(tmp) / "base")
        trees = {"base": base, "head": Path(args.head_dir).resolve()}
        if not args.no_work:
            log(f"work metrics of {len(cases)} benchmarks in both trees ...")
            work = run_work(trees, cases)
            rows = compare_work(cases, work["base"], work["head"])
            report["work"] = {"base": work["base"], "head": work["head"], "rows": rows}
            print("== exact work metrics (one training step)")
            print(format_work(rows))
            changed = any(not row["same"] and not row.get("new") for row in rows)
            if changed and not args.accept_work_change:
                failed = True
                print("work gate: FAILED (a work metric changed; --accept-work-change "
                      "if intended)")
            else:
                print("work gate: " + ("changed, accepted" if changed else "passed"))
        if not args.no_time:
            log(f"timing {len(cases)} benchmarks: {args.processes} process pairs x "
                f"{args.rounds} interleaved rounds ...")
            start = time.perf_counter()
            samples = run_time(trees, cases, args.processes, args.rounds, args.sample_ms,
                               args.clock, progress=lambda i, n: log(f"  pair {i}/{n} done "
                                                         f"({time.perf_counter() - start:.0f} s)"))
            verdicts = [decide(s, args.threshold, args.alpha) for s in samples]
            report["time"] = {"samples": [asdict(s) for s in samples],
                              "verdicts": [asdict(v) for v in verdicts]}
            print(f"== step time, {args.clock} clock (base = A, head = B)")
            print(format_time(verdicts, args.threshold, args.alpha))
            untimed = sorted(set(cases) - {v.case for v in verdicts})
            if untimed:
                print(f"not timed (absent from a tree): {', '.join(untimed)}")
            regressions = [v.case for v in verdicts if v.verdict == "REGRESSION"]
            if regressions:
                failed = True
                print(f"time gate: FAILED ({', '.join(regressions)})")
            else:
                print("time gate: passed")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker == "time":
        _worker_time(args)
        return 0
    if args.worker == "work":
        _worker_work(args)
        return 0
    try:
        return gate(args)
    except GateError as exc:
        print(f"ab_gate: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
