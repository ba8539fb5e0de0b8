"""The operating curve of change-point detection on this suite's histories:
false alarms per 100 commits and recall per kind of change, for each
detector, on histories composed from real measurements, and on real
histories that asv measured commit by commit.

Three steps::

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

    # 3. The curve on real histories: scratch histories of real commits, each
    #    installed and measured by asv in its own environment
    #    (tools/scratch_history.py), read as `gnnperf history` reads them.
    python tools/history_study.py real --histories /tmp/aa1 /tmp/ramp1 ... \\
        --json REAL.json
    python tools/history_study.py real --data REAL.json \\
        --study STUDY...       # the table again, from the data, beside the resampled curve

    # gnnperf history's curve of several studies, a row each, every kind found
    # and failing, ramps as one change at each merge window.
    python tools/history_study.py table LABEL=STUDY...

A change is found when a detector reports a change point in its direction
within ``--tolerance`` commits of the injected step (for a ramp: between its
first commit less the tolerance and its last plus the tolerance); every other
reported change point is a false alarm, counted per 100 commits of history.
Each is counted two ways: any detection, and one that *fails* ``gnnperf
history`` (a rise past ``--threshold`` whose 95% interval leaves out no
change: its ``REGRESSION``). A ramp is *found as one change* when exactly
one reported change (after :func:`gnnperf.history.describe`'s merging of
same-direction change points fewer than ``--merge-within`` commits apart)
covers it. The merge window is a setting of its own, not the ramp's length:
the curve is computed at each window given (default 5, 10 and 20 commits),
with ramps of 10 and of 20 commits.
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
import re
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

#: The kinds of change injected: name -> (per-commit factors, commits). Two
#: ramp lengths, so that no merge window is read against one ramp alone.
KINDS = {"A/A": (0.0, 0), "+3% step": (0.03, 1), "+5% step": (0.05, 1),
         "+10% step": (0.10, 1), "10 x +1% ramp": (0.01, 10),
         "20 x +0.5% ramp": (0.005, 20)}

#: The merge windows the curve is shown at by default: gnnperf history's
#: (gnnperf.history.MERGE_WITHIN, 10) and one either side of it.
MERGE_WINDOWS = "5,10,20"

#: The asv method whose threshold is asv.conf.json's for the pool's figure,
#: as asv applies it (:func:`asv_threshold`).
CONF_THRESHOLD = "conf"

#: The detectors compared, each as the study names it: (DETECTORS key, options).
METHODS = {
    "otava p<0.01": ("otava", {"max_pvalue": 0.01}),
    "otava p<0.001": ("otava", {"max_pvalue": 0.001}),
    "ruptures l1 2 log n (gnnperf history's)": ("ruptures", {"penalty": 2.0, "cost": "l1"}),
    "ruptures l1 3 log n": ("ruptures", {"penalty": 3.0, "cost": "l1"}),
    "ruptures l2 3 log n": ("ruptures", {"penalty": 3.0, "cost": "l2"}),
    # asv publish with asv.conf.json's threshold for the pool's figure, as asv
    # applies it (resolved per figure: asv_threshold), and with asv's default
    # where no pattern matches (0.05).
    "asv publish, asv.conf.json's threshold": ("asv", {"threshold": CONF_THRESHOLD}),
    "asv publish, threshold 0.05": ("asv", {"threshold": 0.05}),
}


def asv_threshold(entry_name: str, conf_path: Path = ROOT / "asv.conf.json") -> float:
    """The regression threshold ``asv publish`` applies to :obj:`entry_name`
    (asv's name of one parameter combination, e.g.
    ``training.TrainStepOverReference.track_step_over_reference('cora',
    'baseline')``), by asv's own code: every ``regressions_thresholds``
    pattern is ``re.match``-ed (anchored at the start) against the name, and
    the largest threshold among the patterns that match wins, whatever
    their order; 0.05 where none matches."""
    from types import SimpleNamespace

    # asv's own method, not a copy of its rule: where asv changes how it
    # picks, this (and its test) follows or fails.
    from asv.plugins.regressions import _GraphDataFilter

    from gnnperf.asv_conf import read_asv_conf
    conf = read_asv_conf(conf_path)
    fake = SimpleNamespace(conf=SimpleNamespace(
        regressions_thresholds=conf.get("regressions_thresholds", {})))
    return _GraphDataFilter._get_threshold(fake, SimpleNamespace(params={}), None, entry_name)


def figure_entry(figure: str, case: str = "baseline@cora") -> str:
    """asv's entry name of :obj:`figure` (a key of :data:`FIGURES`) at
    :obj:`case`, as ``asv publish`` names it when it picks a threshold."""
    variant, dataset = case.split("@")
    params = [repr(dataset), repr(variant)] + ([repr("gcn")] if figure == "raw" else [])
    return f"{FIGURES[figure]}({', '.join(params)})"


def resolve_methods(methods: dict, figure: str) -> dict:
    """:obj:`methods` with asv.conf.json's threshold put in for the figure
    (the row's name says the number)."""
    out = {}
    for name, (key, options) in methods.items():
        if options.get("threshold") == CONF_THRESHOLD:
            value = asv_threshold(figure_entry(figure))
            options = {**options, "threshold": value}
            name = f"{name} ({value:g})"
        out[name] = (key, options)
    return out


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


def fails(change, threshold: float) -> bool:
    """Whether :obj:`change` fails ``gnnperf history``: a rise past
    :obj:`threshold` whose 95% interval leaves out no change (its
    ``REGRESSION``; a rise past it whose interval reaches 1.0 is
    ``inconclusive`` and does not fail)."""
    return change.ratio > 1 + threshold and change.ci_low > 1


#: What :func:`tally` counts in one history, in order.
SCORES = ("found", "found_as_one", "found_past_threshold", "found_fails",
          "false_regressions", "false_past_threshold", "false_fails", "false_changes")


def tally(changes: list, start: int, end: int, tolerance: int, threshold: float
          ) -> dict[str, int]:
    """One history's changes, as :data:`SCORES` names them: found, found as
    one change, found past the threshold, found failing (:func:`fails`),
    false regressions, false ones past the threshold, false failing ones,
    false changes of either direction (booleans as 0 or 1)."""
    hits = [c for c in changes if start >= 0 and c.end >= start - tolerance
            and c.start <= end + tolerance]
    found = [c for c in hits if c.direction > 0]
    others = [c for c in changes if c not in hits]
    return dict(zip(SCORES, (
        int(bool(found)), int(len(hits) == 1 and len(found) == 1),
        int(any(c.ratio > 1 + threshold for c in found)),
        int(any(fails(c, threshold) for c in found)),
        sum(c.direction > 0 for c in others),
        sum(c.ratio > 1 + threshold for c in others),
        sum(fails(c, threshold) for c in others), len(others))))


def score(changes: list, start: int, end: int, tolerance: int, threshold: float
          ) -> tuple[bool, bool, bool, int, int, int]:
    """(found, found as one change, found past the threshold, false
    regressions, false ones past the threshold, false changes of either
    direction) of one history's changes: :func:`tally` without the failing
    counts."""
    t = tally(changes, start, end, tolerance, threshold)
    return (bool(t["found"]), bool(t["found_as_one"]), bool(t["found_past_threshold"]),
            t["false_regressions"], t["false_past_threshold"], t["false_changes"])


def read_pools(paths: list[Path]) -> dict:
    """The pools of :obj:`paths` as one: a case in several has their values
    in the order given (stretches of one machine's time, the measured-order
    history reading them one after another)."""
    cases: dict[str, list] = {}
    kinds = set()
    figure = "raw"
    for path in paths:
        pool = json.loads(path.read_text())
        # A history is one figure on one machine: ratios mixed with seconds, or
        # two machines' values, would read as change points.
        figure = pool.get("figure", "raw")
        kinds.add((figure, json.dumps(pool.get("machine"), sort_keys=True)))
        if len(kinds) > 1:
            raise SystemExit(f"history_study: {path} is another figure or machine than "
                             f"{paths[0]}: study pools of one figure on one machine together")
        for case, values in pool["cases"].items():
            cases.setdefault(case, []).extend(values)
    return {"cases": cases, "figure": figure}


def study(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(ROOT))
    from gnnperf.history import describe, DETECTORS
    pool = read_pools(args.pool)
    methods = resolve_methods({name: METHODS[name] for name in (
        args.methods.split(";") if args.methods else METHODS)}, pool["figure"])
    windows = [int(x) for x in str(args.merge_within).split(",")]
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
                # The detector's points do not depend on the merge window: once.
                points = [detector(y, w, **options) for y, w, _, _ in histories]
                commits = args.trials * args.length
                for window in windows:
                    got = dict.fromkeys(SCORES, 0)
                    for (y, _, start, end), found_points in zip(histories, points):
                        changes = describe(y, found_points, merge_within=window)
                        one = tally(changes, start, end, args.tolerance, args.threshold)
                        got = {k: got[k] + one[k] for k in SCORES}
                    rows.append({"case": label, "kind": kind, "method": name,
                                 "noise_scale": scale, "merge_within": window,
                                 "trials": args.trials, **{k: got[k] for k in SCORES[:4]},
                                 **{f"{k}_per_100": 100 * got[k] / commits
                                    for k in SCORES[4:]}})
        # The pool in the order it was measured: one real A/A history, its
        # drift and its slow spells as they came.
        ordered = [v["result"] for v in values]
        weights = [_weight(v) for v in values]
        for name, (key, options) in methods.items():
            found_points = DETECTORS[key][0](ordered, weights, **options)
            for window in windows:
                changes = describe(ordered, found_points, merge_within=window)
                rows.append({
                    "case": label, "kind": "A/A, pool in measured order", "method": name,
                    "noise_scale": scale, "merge_within": window, "trials": 1,
                    "commits": len(ordered),
                    "false_regressions_per_100": 100 * sum(c.direction > 0 for c in changes)
                    / len(ordered),
                    "false_fails_per_100": 100 * sum(fails(c, args.threshold) for c in changes)
                    / len(ordered),
                    "false_changes_per_100": 100 * len(changes) / len(ordered)})
        print(f"{label}: done in {time.time() - started:.0f} s", file=sys.stderr, flush=True)
    print(format_study(rows))
    if args.json:
        args.json.write_text(json.dumps({
            "command": " ".join(["python", *sys.argv]),
            "pool": " ".join(str(path) for path in args.pool),
            "length": args.length, "trials": args.trials, "tolerance": args.tolerance,
            "threshold": args.threshold, "merge_within": windows, "figure": pool["figure"],
            "seed": args.seed, "noise_scales": scales,
            "methods": {n: {"detector": k, **o} for n, (k, o) in methods.items()},
            "rows": rows}, indent=1) + "\n")
    return 0


def format_study(rows: list[dict], method: str | None = None) -> str:
    """One Markdown table per case: a row per method and merge window (only
    :obj:`method`'s where given), false alarms per 100 commits (A/A: any
    rise; those that fail) and recall per kind, each as "found / fails"
    (any detection; one that fails ``gnnperf history``)."""
    out = []
    for case in dict.fromkeys(r["case"] for r in rows):
        mine = [r for r in rows if r["case"] == case and method in (None, r["method"])]
        kinds = [k for k in KINDS if k != "A/A" and any(r["kind"] == k for r in mine)]
        out += [f"\n{case}\n",
                "| method | merge window | false regressions / 100 commits: any; failing "
                "(in measured order: any; failing) | "
                + " | ".join(f"{k}: found / fails" for k in kinds) + " |",
                "|---" * (3 + len(kinds)) + "|"]
        for name in dict.fromkeys(r["method"] for r in mine):
            for window in dict.fromkeys(r.get("merge_within", 10) for r in mine):
                by = {r["kind"]: r for r in mine
                      if r["method"] == name and r.get("merge_within", 10) == window}
                aa, real = by["A/A"], by.get("A/A, pool in measured order")
                cells = [f"{aa['false_regressions_per_100']:.2f}; "
                         f"{aa.get('false_fails_per_100', float('nan')):.2f}"
                         + (f" ({real['false_regressions_per_100']:.2f}; "
                            f"{real.get('false_fails_per_100', float('nan')):.2f})"
                            if real else "")]
                for k in kinds:
                    r = by[k]
                    text = (f"{100 * r['found'] / r['trials']:.0f}% / "
                            f"{100 * r.get('found_fails', float('nan')) / r['trials']:.0f}%")
                    if "ramp" in k:
                        text += f" ({100 * r['found_as_one'] / r['trials']:.0f}% as one)"
                    cells.append(text)
                out.append(f"| {name} | {window} | " + " | ".join(cells) + " |")
    return "\n".join(out)


# ------------------------------------------------ the curve on real histories

#: The detector whose real-history rows are read against the resampled
#: curve: gnnperf history's default.
CHOSEN = "ruptures l1 2 log n (gnnperf history's)"


def _injected(commits: list[dict]) -> tuple[int, int]:
    """The first and the last commit (1-based) whose busy wait differs from
    the one before it: the ramp; -1, -1 for an A/A history."""
    moved = [c["index"] for prev, c in zip(commits, commits[1:])
             if (c["busy_wait_us"], c["busy_wait_pct"])
             != (prev["busy_wait_us"], prev["busy_wait_pct"])]
    return (moved[0], moved[-1]) if moved else (-1, -1)


def read_history(folder: Path, windows: list[int], tolerance: int, threshold: float
                 ) -> list[dict]:
    """Each case of one scratch history (tools/scratch_history.py's
    ``--dir``): its values, and at each merge window what ``gnnperf
    history`` reports on it (its own :func:`~gnnperf.history.analyse`,
    one series at a time, as ``--bench`` with the series' name reads it) and
    what ``asv publish`` would (asv.conf.json's threshold as asv applies it,
    and asv's default 0.05), scored as :func:`score` scores a composed one."""
    from gnnperf.history import analyse, describe, detect_asv, read_asv_results, select
    run = json.loads((folder / "run.json").read_text())
    index = {c["commit"]: c["index"] for c in run["commits"]}
    first, last = _injected(run["commits"])
    repo = folder / "repo"
    results = read_asv_results(repo / ".asv" / "results", None, repo)
    out = []
    for series in select(results, re.escape(FIGURES["relative"])):
        params = {k: v.strip("'") for k, v in series.params.items()}
        case = f"{params['variant']}@{params['dataset']}"
        positions = [index[c] for c in series.commits]
        # A change's start and end as series positions, for tally(): the
        # injected commits mapped onto the points that exist (a failed
        # commit is a gap in the series).
        start = next((i for i, p in enumerate(positions) if p >= first), -1) if first > 0 else -1
        end = max((i for i, p in enumerate(positions) if p <= last), default=-1)
        logs = [math.log(v) for v in series.values]
        row = {"history": folder.name, "kind": "ramp" if first > 0 else "A/A", "case": case,
               "series": series.name, "commits": len(run["commits"]),
               "points": len(series.values), "failed": len(series.failed),
               "ramp": [first, last] if first > 0 else None,
               "busy_wait_pct": [c["busy_wait_pct"] for c in run["commits"]],
               "busy_wait_us": [c["busy_wait_us"] for c in run["commits"]],
               "values": [round(v, 5) for v in series.values],
               "sd_log": round(statistics.stdev(logs), 5) if len(logs) > 1 else None,
               "variants": run.get("variants"), "scratch_of": run.get("scratch_of"),
               "asv_run_seconds": run.get("asv_run_seconds"),
               "load": [run.get("load_before"), run.get("load_after")],
               "windows": {}}
        conf = asv_threshold(series.name)
        for window in windows:
            alerts, _, _ = analyse(results, "^" + re.escape(series.name) + "$",
                                   threshold=threshold, merge_within=window)
            changes = [a.moved[0].change for a in alerts]
            got = tally(changes, start, end, tolerance, threshold)
            reading = {"gnnperf history": {
                **got, "alerts": [
                    {"commit": index[a.commit], "end_commit": index[a.end_commit],
                     "ratio": round(a.moved[0].change.ratio, 4),
                     "ci": [round(a.moved[0].change.ci_low, 4),
                            round(a.moved[0].change.ci_high, 4)],
                     "p": a.moved[0].change.pvalue,
                     "word": ("REGRESSION" if a.conclusive else "inconclusive"
                              if a.regression else "change")} for a in alerts]}}
            for label, value in ((f"asv publish, asv.conf.json's threshold ({conf:g})", conf),
                                 ("asv publish, threshold 0.05", 0.05)):
                changes = describe(series.values, detect_asv(series.values, series.weights,
                                                             threshold=value),
                                   merge_within=window)
                reading[label] = tally(changes, start, end, tolerance, threshold)
            row["windows"][str(window)] = reading
        out.append(row)
    return out


def summarise(rows: list[dict]) -> list[dict]:
    """Per case, merge window and detector: false rises per 100 commits of
    the A/A histories (any; failing) and the ramps found (any; failing; as
    one change)."""
    out = []
    for case in dict.fromkeys(r["case"] for r in rows):
        mine = [r for r in rows if r["case"] == case]
        aa = [r for r in mine if r["kind"] == "A/A"]
        ramps = [r for r in mine if r["kind"] == "ramp"]
        for window in mine[0]["windows"]:
            for method in mine[0]["windows"][window]:
                def total(group, key):
                    return sum(r["windows"][window][method][key] for r in group)
                points = sum(r["points"] for r in aa)
                out.append({
                    "case": case, "merge_within": int(window), "method": method,
                    "aa_histories": len(aa), "aa_points": points,
                    "aa_sd_log": [r["sd_log"] for r in aa],
                    "false_regressions": total(aa, "false_regressions"),
                    "false_fails": total(aa, "false_fails"),
                    "false_regressions_per_100": 100 * total(aa, "false_regressions") / points
                    if points else None,
                    "false_fails_per_100": 100 * total(aa, "false_fails") / points
                    if points else None,
                    # What so few commits can say: the rate's one-sided 95% upper
                    # bound (Clopper-Pearson; about 3 per 100 for none in 100).
                    "false_regressions_upper95_per_100": _upper95(
                        total(aa, "false_regressions"), points),
                    "ramps": len(ramps), "found": total(ramps, "found"),
                    "found_fails": total(ramps, "found_fails"),
                    "found_as_one": total(ramps, "found_as_one"),
                    # A ramp history's other rises: false alarms too.
                    "ramp_false_regressions": total(ramps, "false_regressions")})
    return out


def _upper95(events: int, commits: int) -> float | None:
    """The one-sided 95% upper bound of a rate per 100 commits, having seen
    :obj:`events` in :obj:`commits` (Clopper-Pearson)."""
    if not commits:
        return None
    if events >= commits:
        return 100.0
    from scipy import stats
    return 100 * float(stats.beta.ppf(0.95, events + 1, commits - events))


def _resampled(studies: list[dict], case: str) -> list[dict]:
    """The chosen detector's rows of every study of :obj:`case` (as
    measured, noise scale 1), one {(kind, merge window): row} per study."""
    out = []
    for data in studies:
        rows = [r for r in data["rows"] if r["method"] == CHOSEN
                and r["case"].split(" ")[0] == case and r.get("noise_scale", 1) == 1]
        if rows:
            found = {(r["kind"], r.get("merge_within", 10)): r for r in rows}
            # The study's label carries the pool's spread: "case (sd 1.4%)".
            found["sd"] = float(rows[0]["case"].rsplit("(sd ", 1)[-1].rstrip("%)"))
            out.append(found)
    return out


def _span(values: list[float], digits: int = 0, unit: str = "%") -> str:
    """A figure over several pools: one value, or their range."""
    low, high = f"{min(values):.{digits}f}", f"{max(values):.{digits}f}"
    return f"{low}{unit}" if low == high else f"{low}-{high}{unit}"


def format_real(summary: list[dict], studies: list[dict]) -> str:
    """The Markdown table of the real histories beside the resampled curve
    (every study of the case given: one value, or the range over them):
    gnnperf history's detector, a row per case; false rises of the A/A
    histories at gnnperf history's merge window, ramps found at it and as
    one change at every window; asv publish's readings of the same
    histories."""
    by = {(r["case"], r["merge_within"], r["method"]): r for r in summary}
    cases = list(dict.fromkeys(r["case"] for r in summary))
    windows = sorted(dict.fromkeys(r["merge_within"] for r in summary))
    main = 10 if 10 in windows else windows[0]
    methods = [m for m in dict.fromkeys(r["method"] for r in summary) if m != "gnnperf history"]
    ws = ", ".join(map(str, windows))
    out = [f"| case | A/A histories x commits | sd of one value (real) | resampled "
           f"| false rises / 100 commits: any; failing (real; 95% upper bound) "
           f"| resampled | 10 x 1% ramps: found; failing; as one at {ws} (real) | resampled "
           + "".join(f"| {m}: A/A false rises; ramps found " for m in methods) + "|",
           "|---" * (8 + len(methods)) + "|"]
    for case in cases:
        r = by[(case, main, "gnnperf history")]
        res = _resampled(studies, case)
        aa = (f"{r['false_regressions_per_100']:.1f}; {r['false_fails_per_100']:.1f} "
              f"(<= {r['false_regressions_upper95_per_100']:.1f})" if r["aa_histories"] else "-")
        hist = (f"{r['aa_histories']} x {r['aa_points'] // r['aa_histories']}"
                if r["aa_histories"] else "-")
        if r["ramps"]:
            ramps = (f"{r['found']}/{r['ramps']}; {r['found_fails']}/{r['ramps']}; "
                     + ", ".join(f"{by[(case, w, 'gnnperf history')]['found_as_one']}"
                                 f"/{r['ramps']}" for w in windows))
        else:
            ramps = "-"
        aa_res = ramp_res = sd_res = "-"
        sd = (_span([100 * x for x in r["aa_sd_log"]], 1) if r.get("aa_sd_log") else "-")
        if res:
            sd_res = _span([x["sd"] for x in res], 1)
            aa_res = (_span([x[("A/A", main)]["false_regressions_per_100"] for x in res], 2, "")
                      + "; " + _span([x[("A/A", main)]["false_fails_per_100"] for x in res],
                                     2, ""))

            def share(key, window=main):
                return _span([100 * x[("10 x +1% ramp", window)][key]
                              / x[("10 x +1% ramp", window)]["trials"] for x in res])
            ramp_res = (f"{share('found')}; {share('found_fails')}; "
                        + ", ".join(share("found_as_one", w) for w in windows))
        cells = [case, hist, sd, sd_res, aa, aa_res, ramps, ramp_res]
        for m in methods:
            a = by[(case, main, m)]
            cells.append(f"{a['false_regressions']} of {a['aa_points']} commits; "
                         f"{a['found']}/{a['ramps']}" if a["ramps"] else
                         f"{a['false_regressions']} of {a['aa_points']} commits; -")
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def format_windows(studies: dict[str, dict]) -> str:
    """The Markdown table of gnnperf history's detector on each study
    (label -> study --json): a row per pool, every kind counted two ways
    (found / fails), the ramps found as one change at each merge window, and
    asv publish at asv.conf.json's threshold for the figure and at 0.05."""
    def share(r: dict, key: str) -> str:
        return f"{100 * r[key] / r['trials']:.0f}%"
    out, head = [], None
    for label, data in studies.items():
        rows = [r for r in data["rows"] if r.get("noise_scale", 1) == 1]
        windows = data.get("merge_within", [10])
        main = 10 if 10 in windows else windows[0]

        def at(method, kind, window=main):
            return next(r for r in rows if r["method"] == method and r["kind"] == kind
                        and r.get("merge_within", 10) == window)
        conf = next(m for m in dict.fromkeys(r["method"] for r in rows)
                    if m.startswith("asv publish, asv.conf.json's"))
        if head is None:
            head = (f"| pool | sd of one value | false rises / 100 commits: any; failing "
                    f"| +3% step: found / fails | +5% step | +10% step "
                    f"| 10 x 1% ramp: found / fails; as one at {', '.join(map(str, windows))} "
                    f"| 20 x 0.5% ramp: found / fails; as one at the same "
                    f"| {conf}: +10%, 10 x 1% ramp "
                    f"| asv publish at 0.05: +5%, 10 x 1% ramp |")
            out += [head, "|---" * 10 + "|"]
        aa = at(CHOSEN, "A/A")
        cells = [label, rows[0]["case"].rsplit("(sd ", 1)[-1].rstrip(")"),
                 f"{aa['false_regressions_per_100']:.2f}; {aa['false_fails_per_100']:.2f}"]
        for kind in ("+3% step", "+5% step", "+10% step"):
            r = at(CHOSEN, kind)
            cells.append(f"{share(r, 'found')} / {share(r, 'found_fails')}")
        for kind in ("10 x +1% ramp", "20 x +0.5% ramp"):
            r = at(CHOSEN, kind)
            cells.append(f"{share(r, 'found')} / {share(r, 'found_fails')}; "
                         + ", ".join(share(at(CHOSEN, kind, w), "found_as_one")
                                     for w in windows))
        cells.append(f"{share(at(conf, '+10% step'), 'found')}, "
                     f"{share(at(conf, '10 x +1% ramp'), 'found')}")
        low = "asv publish, threshold 0.05"
        cells.append(f"{share(at(low, '+5% step'), 'found')}, "
                     f"{share(at(low, '10 x +1% ramp'), 'found')}")
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def table(args: argparse.Namespace) -> int:
    """The table of :func:`format_windows` from study --json files."""
    studies = {}
    for item in args.study:
        label, _, path = item.rpartition("=")
        studies[label or Path(path).stem] = json.loads(Path(path).read_text())
    print(format_windows(studies))
    return 0


def format_costs(rows: list[dict]) -> str:
    """A row per history: what asv measured, its run's wall time, per
    commit, and the machine's load average around it."""
    out = ["| history | cases measured | commits | asv run (s) | per commit (s) "
           "| load average before; after (1, 5, 15 min) |", "|---|---|---|---|---|---|"]
    for name in dict.fromkeys(r["history"] for r in rows):
        r = next(x for x in rows if x["history"] == name)
        seconds = r.get("asv_run_seconds")
        load = "; ".join(" ".join(f"{x:g}" for x in part) if part else "-"
                         for part in (r.get("load") or [None, None]))
        per_commit = f"{seconds / r['commits']:.0f}" if seconds else "-"
        out.append(f"| {name} ({r['kind']}) | {r.get('variants') or '-'} | {r['commits']} "
                   f"| {seconds or '-'} | {per_commit} | {load} |")
    return "\n".join(out)


def real(args: argparse.Namespace) -> int:
    """The curve on real histories: every --histories folder read, or the
    table again from --data."""
    sys.path.insert(0, str(ROOT))
    studies = [json.loads(p.read_text()) for p in args.study]
    if args.data:
        data = json.loads(args.data.read_text())
        print(format_real(data["summary"], studies) + "\n\n" + format_costs(data["histories"]))
        return 0
    if not args.histories:
        raise SystemExit("history_study real: --histories or --data")
    windows = [int(x) for x in str(args.merge_within).split(",")]
    rows = [row for folder in args.histories
            for row in read_history(folder, windows, args.tolerance, args.threshold)]
    summary = summarise(rows)
    print(format_real(summary, studies) + "\n\n" + format_costs(rows))
    if args.json:
        args.json.write_text(json.dumps({
            "command": " ".join(["python", *sys.argv]),
            "what": "scratch histories of real commits (tools/scratch_history.py), each "
                    "commit installed and measured by asv in its own environment; "
                    "the history figure per case, read by gnnperf history's analyse",
            "figure": FIGURES["relative"], "tolerance": args.tolerance,
            "threshold": args.threshold, "merge_within": windows,
            "asv_threshold": {r["series"]: asv_threshold(r["series"]) for r in rows},
            "summary": summary, "histories": rows}, indent=1) + "\n")
    return 0


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
    st.add_argument("--merge-within", default=MERGE_WINDOWS,
                    help="comma-separated merge windows (gnnperf history's --merge-within): "
                         "the curve at each")
    st.add_argument("--json", type=Path)
    re_ = sub.add_parser("real", help="the curve on real histories (tools/scratch_history.py)")
    re_.add_argument("--histories", type=Path, nargs="+",
                     help="scratch_history.py --dir folders (A/A and ramp histories)")
    re_.add_argument("--data", type=Path,
                     help="instead of --histories: the table from a --json this wrote")
    re_.add_argument("--study", type=Path, nargs="*", default=[],
                     help="study --json files whose chosen detector's rows go beside "
                          "(resampled), by case")
    re_.add_argument("--merge-within", default=MERGE_WINDOWS)
    re_.add_argument("--tolerance", type=int, default=2)
    re_.add_argument("--threshold", type=float, default=0.03)
    re_.add_argument("--json", type=Path)
    tab = sub.add_parser("table", help="gnnperf history's curve from study --json files, "
                                         "a row each")
    tab.add_argument("study", nargs="+", help="LABEL=PATH (or PATH: its name is the label)")
    args = parser.parse_args(argv)
    return {"collect": collect, "study": study, "real": real, "table": table}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
