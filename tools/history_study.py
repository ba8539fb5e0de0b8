"""The operating curve of change-point detection on this suite's histories
(issue 49): false alarms per 100 commits and recall per kind of change, for
each detector, on histories composed from real measurements.

Two steps::

    # 1. The pool: per-commit values of asv time_ benchmarks, each measured as
    #    asv measures one commit (asv_runner's own benchmark, setup and timing,
    #    in a process forked from a warm one, as asv's forkserver launch
    #    method; the profile's rounds, their samples pooled, asv's median).
    #    Niced; a few seconds of CPU per value.
    nice -n 19 python tools/history_study.py collect --values 60 \\
        --out docs/data/history-pool-<date>.json

    # 2. The curve: histories drawn from the pool (A/A, +3%/+5%/+10% steps and
    #    10 x +1% ramps at known commits), every detector on the same ones.
    python tools/history_study.py study --pool docs/data/history-pool-<date>.json \\
        --json docs/data/history-study-<date>.json

A change is found when a detector reports a change point in its direction
within ``--tolerance`` commits of the injected step (for a ramp: between its
first commit less the tolerance and its last plus the tolerance); every other
reported change point is a false alarm, counted per 100 commits of history.
A ramp is *found as one change* when exactly one reported change (after
:func:`gnnperf.gate.history.find_changes`'s merging, for the chosen method)
covers it.
"""
from __future__ import annotations

import argparse
import atexit
import datetime
import json
import math
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The figures a pool can hold: asv's raw step time, and the step over the
#: suite's fixed reference step timed in the same process
#: (benchmarks/relative.py; one value a round, no samples).
FIGURES = {"raw": "training.TrainStep.time_train_step",
           "relative": "training.TrainStepOverReference.track_step_over_reference"}


# ---------------------------------------------------------------- the pool

def _param_index(benchmark, values: dict[str, str]) -> int:
    """The flat index asv gives one parameter combination (itertools.product
    order of ``params``), by the parameters' names."""
    import itertools
    names = benchmark.param_names
    for index, combo in enumerate(itertools.product(*benchmark.params)):
        if all(values.get(name, combo[i]) == combo[i] for i, name in enumerate(names)):
            return index
    raise SystemExit(f"history_study: no combination {values} in {benchmark.name}")


def _one_round(bench_dir: str, bench_id: str, cache_file: str, timer: str) -> dict | float:
    """One asv round of one benchmark in a forked child, as asv_runner's
    ``run`` does it (setup, run, teardown): a time benchmark's samples and
    number, a track benchmark's value. With
    :obj:`timer` ``cpu`` the benchmark's asv ``timer`` attribute is
    :func:`time.process_time` (asv's own option for a benchmark; its default
    is the wall clock)."""
    import pickle
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: asv_runner.run._run, less the result file
        code = 0
        try:
            os.close(read)
            from asv_runner.discovery import get_benchmark_from_name
            benchmark = get_benchmark_from_name(bench_dir, bench_id)
            if timer == "cpu":
                benchmark.timer = time.process_time
            with open(cache_file, "rb") as fd:
                benchmark.set_cache(pickle.load(fd))
            skip = benchmark.do_setup()
            try:
                result = None if skip else benchmark.do_run()
            finally:
                benchmark.do_teardown()
            os.write(write, json.dumps(result).encode())
        except BaseException as exc:  # noqa: BLE001 -- reported by the parent
            os.write(write, json.dumps({"error": repr(exc)}).encode())
            code = 1
        finally:
            os._exit(code)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 1 << 16):
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    result = json.loads(b"".join(chunks) or b"null")
    if result is None or isinstance(result, dict) and ("error" in result
                                                        or "samples" not in result):
        raise SystemExit(f"history_study: {bench_id} failed: {result}")
    return result


def collect(args: argparse.Namespace) -> int:
    """Measures ``--values`` per-commit values of each case, in asv's order
    (all cases of a round, the last round first, as asv.runner does), and
    writes the pool after each value."""
    os.nice(19)  # the machine is shared: never ahead of anyone else's work
    out = args.out.resolve()  # before the chdir below
    # The suite's profile decides repeat and rounds, as in `asv run`.
    os.environ.setdefault("GNNPERF_ASV_PROFILE", args.profile)
    bench_dir = str(ROOT / "benchmarks")
    sys.path.insert(0, str(ROOT))
    from asv_runner.discovery import get_benchmark_from_name
    from asv_runner.statistics import compute_stats

    name = FIGURES[args.figure]
    cases = []
    for case in args.cases.split(","):
        variant, dataset = case.split("@")
        benchmark = get_benchmark_from_name(bench_dir, name)
        index = _param_index(benchmark, {"dataset": repr(dataset), "variant": repr(variant),
                                         "model": repr("gcn")})
        cases.append((case, f"{name}-{index}", get_benchmark_from_name(
            bench_dir, f"{name}-{index}")))
    rounds = max(int(getattr(b, "rounds", 1)) for _, _, b in cases)
    work = Path(tempfile.mkdtemp(prefix="history-pool-"))
    atexit.register(shutil.rmtree, work, True)  # the graphs are scratch; the pool is --out
    os.chdir(work)  # setup_cache writes its graph files into the working directory
    started = time.time()
    # One setup_cache per `asv run`, shared by every value here: it makes the
    # graphs, which no timed figure includes.
    import pickle
    cache_file = str(work / "cache.pickle")
    with open(cache_file, "wb") as fd:
        pickle.dump(cases[0][2].do_setup_cache(), fd)
    pool = {"what": f"asv {name}: one value = one commit's result (asv's median of "
                    f"its rounds' samples; a track benchmark's: the median of its rounds')",
            "figure": args.figure,
            "command": " ".join(["nice -n 19", "python", *sys.argv]),
            "machine": {"host": platform.node(), "cpu": platform.processor() or platform.machine(),
                        "cores": os.cpu_count(), "python": platform.python_version()},
            "date": datetime.date.today().isoformat(), "profile": args.profile,
            "timer": ("the benchmark's own: CPU time of each block on a CPU"
                      if args.figure == "relative" else
                      {"cpu": "time.process_time",
                       "wall": "asv's default (timeit.default_timer)"}[args.timer]),
            "rounds": rounds, "repeat": list(getattr(cases[0][2], "repeat", [])),
            "cases": {case: [] for case, _, _ in cases}}
    for value in range(args.values):
        samples: dict[str, list[float]] = {case: [] for case, _, _ in cases}
        number = {}
        for _ in range(rounds):
            for case, bench_id, _ in cases:
                result = _one_round(str(bench_dir), bench_id, cache_file, args.timer)
                if isinstance(result, dict):
                    samples[case] += result["samples"]
                    number[case] = result["number"]
                else:  # a track benchmark: one value a round
                    samples[case].append(result)
        for case, _, _ in cases:
            if case not in number:  # asv stores a track value without an interval
                pool["cases"][case].append({
                    "result": statistics.median(samples[case]), "ci_99_a": None,
                    "ci_99_b": None, "at": round(time.time() - started, 1)})
                continue
            median, stats = compute_stats(samples[case], number[case])
            pool["cases"][case].append({
                "result": median, "ci_99_a": stats["ci_99_a"], "ci_99_b": stats["ci_99_b"],
                "q_25": stats["q_25"], "q_75": stats["q_75"], "repeat": stats["repeat"],
                "at": round(time.time() - started, 1)})
        cpu = os.times()
        # All of it: this process's imports and setup_cache as well as the rounds.
        pool["cpu_seconds"] = round(sum(cpu[:4]), 1)
        pool["wall_seconds"] = round(time.time() - started, 1)
        out.write_text(json.dumps(pool, indent=1) + "\n")
        print(f"value {value + 1}/{args.values}: "
              + ", ".join(f"{c} {pool['cases'][c][-1]['result']:.6g}" for c, _, _ in cases)
              + f" (cpu {pool['cpu_seconds']:.0f} s)", file=sys.stderr, flush=True)
        if args.max_cpu and pool["cpu_seconds"] > args.max_cpu:
            print(f"history_study: stopped at the --max-cpu budget ({args.max_cpu} s)",
                  file=sys.stderr)
            break
    return 0


# ---------------------------------------------------------------- the curve

#: The kinds of change injected: name -> (per-commit factors, commits).
KINDS = {"A/A": (0.0, 0), "+3% step": (0.03, 1), "+5% step": (0.05, 1),
         "+10% step": (0.10, 1), "10 x +1% ramp": (0.01, 10)}

#: The detectors compared, each as the study names it: (DETECTORS key, options).
METHODS = {
    "otava p<0.01": ("otava", {"max_pvalue": 0.01}),
    "otava p<0.001": ("otava", {"max_pvalue": 0.001}),
    "ruptures l1 2 log n (gnnperf history's)": ("ruptures", {"penalty": 2.0, "cost": "l1"}),
    "ruptures l1 3 log n": ("ruptures", {"penalty": 3.0, "cost": "l1"}),
    "ruptures l2 3 log n": ("ruptures", {"penalty": 3.0, "cost": "l2"}),
    # asv publish with asv.conf.json's threshold for TrainStep times (0.25)
    # and with asv's default where none is configured (0.05).
    "asv publish, threshold 0.25": ("asv", {"threshold": 0.25}),
    "asv publish, threshold 0.05": ("asv", {"threshold": 0.05}),
}


def compose(pool: list[dict], length: int, kind: str, rng: random.Random
            ) -> tuple[list[float], list[float], int, int]:
    """A history of :obj:`length` commits drawn from the pool with
    replacement, the kind's change injected: (values, asv weights, first
    commit of the change, its last; -1, -1 for A/A)."""
    size, commits = KINDS[kind]
    draws = [rng.choice(pool) for _ in range(length)]
    start = rng.randrange(10, length - 10 - commits) if commits else -1
    values, weights = [], []
    for i, d in enumerate(draws):
        factor = (1 + size) ** (min(max(i - start + 1, 0), commits)) if commits else 1.0
        values.append(d["result"] * factor)
        weights.append(_weight(d, factor))
    return values, weights, start, (start + commits - 1 if commits else -1)


def _weight(value: dict, factor: float = 1.0) -> float | None:
    """asv's weight of a value, 2 / its 99% interval's width; None where it
    has none (a track benchmark), as asv leaves it."""
    if value.get("ci_99_a") is None or value.get("ci_99_b") is None:
        return None
    width = abs(value["ci_99_b"] - value["ci_99_a"]) * factor
    return 2 / width if width and math.isfinite(width) else None


def shrink(pool: list[dict], scale: float) -> list[dict]:
    """The pool with each value's log distance from the pool's median
    multiplied by :obj:`scale` (its interval with it): the same shape of
    noise, smaller, for what a quieter machine would give. 1: as measured."""
    if scale == 1:
        return pool
    mid = statistics.median(v["result"] for v in pool)
    out = []
    for v in pool:
        factor = (v["result"] / mid) ** scale / (v["result"] / mid)
        out.append({**v, **{k: v[k] * factor for k in ("result", "ci_99_a", "ci_99_b")
                            if v.get(k) is not None}})
    return out


def score(changes: list, start: int, end: int, tolerance: int, threshold: float
          ) -> tuple[bool, bool, bool, int, int, int]:
    """(found, found as one change, found past the threshold (what fails
    ``gnnperf history``), false regressions, false ones past the threshold,
    false changes of either direction) of one history's changes."""
    hits = [c for c in changes if start >= 0 and c.end >= start - tolerance
            and c.start <= end + tolerance]
    found = [c for c in hits if c.direction > 0]
    others = [c for c in changes if c not in hits]
    return (bool(found), len(hits) == 1 and len(found) == 1,
            any(c.ratio > 1 + threshold for c in found),
            sum(c.direction > 0 for c in others),
            sum(c.ratio > 1 + threshold for c in others), len(others))


def read_pools(paths: list[Path]) -> dict:
    """The pools of :obj:`paths` as one: a case in several has their values
    in the order given (stretches of one machine's time, the measured-order
    history reading them one after another)."""
    cases: dict[str, list] = {}
    kinds = set()
    for path in paths:
        pool = json.loads(path.read_text())
        # A history is one figure on one machine: ratios mixed with seconds, or
        # two machines' values, would read as change points.
        kinds.add((pool.get("figure", "raw"), json.dumps(pool.get("machine"), sort_keys=True)))
        if len(kinds) > 1:
            raise SystemExit(f"history_study: {path} is another figure or machine than "
                             f"{paths[0]}: study pools of one figure on one machine together")
        for case, values in pool["cases"].items():
            cases.setdefault(case, []).extend(values)
    return {"cases": cases}


def study(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(ROOT))
    from gnnperf.gate.history import describe, DETECTORS
    pool = read_pools(args.pool)
    methods = {name: METHODS[name] for name in (args.methods.split(";") if args.methods
                                                 else METHODS)}
    for name, (key, options) in list(methods.items()):
        try:  # a detector whose library is absent here is left out, saying so
            DETECTORS[key][0](list(range(1, 20)), None, **options)
        except ImportError as exc:
            print(f"history_study: {name} left out: {exc}", file=sys.stderr)
            del methods[name]
    rows = []
    started = time.time()
    scales = [float(x) for x in args.noise_scales.split(",")]
    for (case, raw), scale in [(c, k) for c in pool["cases"].items() for k in scales]:
        if args.cases and case not in args.cases.split(","):
            continue
        values = shrink(raw, scale)
        spread = statistics.stdev(math.log(v["result"]) for v in values)
        label = (case if scale == 1 else f"{case}, noise x {scale:g}") + f" (sd {spread:.1%})"
        for kind in KINDS:
            rng = random.Random(f"{args.seed}-{case}-{kind}")
            histories = [compose(values, args.length, kind, rng) for _ in range(args.trials)]
            for name, (key, options) in methods.items():
                detector = DETECTORS[key][0]
                totals = [0] * 6
                for y, w, start, end in histories:
                    changes = describe(y, detector(y, w, **options))
                    totals = [t + x for t, x in zip(
                        totals, score(changes, start, end, args.tolerance, args.threshold))]
                found, one, fails, false_up, false_fails, false_any = totals
                commits = args.trials * args.length
                rows.append({"case": label, "kind": kind, "method": name, "noise_scale": scale,
                             "trials": args.trials, "found": found, "found_as_one": one,
                             "found_past_threshold": fails,
                             "false_regressions_per_100": 100 * false_up / commits,
                             "false_past_threshold_per_100": 100 * false_fails / commits,
                             "false_changes_per_100": 100 * false_any / commits})
        # The pool in the order it was measured: one real A/A history, its
        # drift and its slow spells as they came.
        ordered = [v["result"] for v in values]
        weights = [_weight(v) for v in values]
        for name, (key, options) in methods.items():
            changes = describe(ordered, DETECTORS[key][0](ordered, weights, **options))
            rows.append({"case": label, "kind": "A/A, pool in measured order", "method": name,
                         "noise_scale": scale,
                         "trials": 1, "commits": len(ordered),
                         "false_regressions_per_100": 100 * sum(c.direction > 0 for c in changes)
                         / len(ordered),
                         "false_changes_per_100": 100 * len(changes) / len(ordered)})
        print(f"{label}: done in {time.time() - started:.0f} s", file=sys.stderr, flush=True)
    print(format_study(rows))
    if args.json:
        args.json.write_text(json.dumps({
            "command": " ".join(["python", *sys.argv]),
            "pool": " ".join(str(path) for path in args.pool),
            "length": args.length, "trials": args.trials, "tolerance": args.tolerance,
            "threshold": args.threshold,
            "seed": args.seed, "noise_scales": scales,
            "methods": {n: {"detector": k, **o} for n, (k, o) in methods.items()},
            "rows": rows}, indent=1) + "\n")
    return 0


def format_study(rows: list[dict]) -> str:
    """One Markdown table per case: a row per method, false alarms per 100
    commits (A/A) and recall per kind."""
    out = []
    for case in dict.fromkeys(r["case"] for r in rows):
        mine = [r for r in rows if r["case"] == case]
        kinds = [k for k in KINDS if k != "A/A"]
        out += [f"\n{case}\n",
                "| method | false regressions / 100 commits (A/A; in measured order) | "
                "false past the threshold / 100 | any false change / 100 | "
                + " | ".join(f"recall {k}" for k in kinds) + " |",
                "|---" * (4 + len(kinds)) + "|"]
        for method in dict.fromkeys(r["method"] for r in mine):
            by = {r["kind"]: r for r in mine if r["method"] == method}
            aa, real = by["A/A"], by.get("A/A, pool in measured order")
            cells = [f"{aa['false_regressions_per_100']:.2f}"
                     + (f"; {real['false_regressions_per_100']:.2f}" if real else ""),
                     f"{aa['false_past_threshold_per_100']:.2f}",
                     f"{aa['false_changes_per_100']:.2f}"]
            for k in kinds:
                r = by[k]
                text = (f"{100 * r['found'] / r['trials']:.0f}% "
                        f"({100 * r['found_past_threshold'] / r['trials']:.0f}% past")
                if k.endswith("ramp"):
                    text += f", {100 * r['found_as_one'] / r['trials']:.0f}% as one"
                cells.append(text + ")")
            out.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    col = sub.add_parser("collect", help="measure the pool of per-commit values")
    col.add_argument("--cases", default="baseline@cora,sampled@cora")
    col.add_argument("--values", type=int, default=60, help="per-commit values per case")
    col.add_argument("--profile", default="quick", help="the asv profile (repeat, rounds)")
    col.add_argument("--figure", choices=tuple(FIGURES), default="raw",
                     help="raw: asv's step time; relative: the step over the suite's "
                          "reference step (benchmarks/relative.py)")
    col.add_argument("--timer", choices=("cpu", "wall"), default="cpu",
                     help="the benchmark's asv timer: the process's CPU time (default: what "
                          "a shared machine can measure) or asv's default wall clock")
    col.add_argument("--max-cpu", type=float, default=570.0,
                     help="stop after this many CPU seconds (this process and its children)")
    col.add_argument("--out", type=Path, required=True)
    st = sub.add_parser("study", help="the operating curve of each detector on the pool")
    st.add_argument("--pool", type=Path, nargs="+", required=True,
                    help="one or more pools (collect's --out); a case in several "
                         "is their values in the order given")
    st.add_argument("--cases", help="comma-separated (default: every case of the pool)")
    st.add_argument("--methods", help="semicolon-separated names (default: all of METHODS)")
    st.add_argument("--length", type=int, default=60, help="commits per history")
    st.add_argument("--trials", type=int, default=200, help="histories per case and kind")
    st.add_argument("--tolerance", type=int, default=2,
                    help="commits a found change may lie from the injected one")
    st.add_argument("--threshold", type=float, default=0.03,
                    help="gnnperf history's --threshold: the 'past' figures")
    st.add_argument("--seed", default="49")
    st.add_argument("--noise-scales", default="1",
                    help="comma-separated: each case's pool with its noise multiplied by "
                         "each (1: as measured; see shrink())")
    st.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    return {"collect": collect, "study": study}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
