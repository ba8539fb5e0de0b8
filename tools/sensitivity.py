#!/usr/bin/env python3
"""Sensitivity of the A/B time gate: detection and false-alarm rates.

Copies the working tree to a temporary directory (tree A), makes patched
copies in which one variant's training step burns extra CPU time equal to
``s`` x that step's own CPU time (trees B5, B10, B20 for s = 5%, 10%, 20%:
self-calibrating, so the injected slowdown stays ``s`` whatever the load),
and times them with the gate's interleaved timing (:func:`ab_gate.run_arms`).
A trial starts ``--processes`` sets of worker processes, one per arm (A, a
second A for the A/A comparison, B5, B10, B20), and times ``--rounds``
rounds in each, the arms in a random order every round; each of the four
comparisons (A'/A, B5/A, B10/A, B20/A) is then judged exactly as
``ab_gate`` judges base/head. Sharing worker start-up across arms keeps a
trial affordable; five arms spread each round over more time than the gate's
two, so the study is if anything pessimistic. The product code has no
switch for this: the slowdown exists only in the patched copies (the patch
is printed with ``--show-patch``).

From the stored ratios and p-values it reports, per decision threshold (the
minimum effect of ``ab_gate --threshold``) and clock, the false-alarm rate
(A/A trials judged a regression) and the detection rate per slowdown::

    python tools/sensitivity.py --variant baseline --dataset synthetic-10k --trials 10

``--json`` keeps every trial's per-round log ratios; ``--from-json``
re-evaluates them with the current decision rule.
"""
from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_gate  # noqa: E402

ROOT = ab_gate.ROOT
PATCHED_FILE = "gnnperf/variants/__init__.py"

PATCH_TEMPLATE = '''

# ---- injected by tools/sensitivity.py (temporary copy only) ----
def _sensitivity_slow_build(build, target={target!r}, slowdown={slowdown!r}):
    import time as _time

    def slow_build(self, data, config, device):
        run = build(self, data, config, device)
        if self.name == target:
            step = run.step

            def slow_step(batch):
                start = _time.process_time()
                loss = step(batch)
                # Calibrated extra CPU work: the given fraction of this step's own CPU time.
                deadline = _time.process_time() + slowdown * (_time.process_time() - start)
                while _time.process_time() < deadline:
                    pass
                return loss

            run.step = slow_step
        return run

    return slow_build


Variant.build = _sensitivity_slow_build(Variant.build)
'''


def copy_tree(src: Path, dest: Path) -> Path:
    """Copies the files git knows or would track (tracked and untracked,
    ignored ones excluded) from :obj:`src` to :obj:`dest`."""
    files = subprocess.run(["git", "-C", str(src), "ls-files", "-co", "--exclude-standard", "-z"],
                           capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, files):
        path = src / name
        if path.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, dest / name)
    return dest


def inject_slowdown(tree: Path, variant: str, slowdown: float) -> str:
    """Appends the slowdown patch to the tree's variant registry; returns it."""
    patch = PATCH_TEMPLATE.format(target=variant, slowdown=slowdown)
    with open(tree / PATCHED_FILE, "a") as registry:
        registry.write(patch)
    return patch


def calibrate(tree: Path, case: str, samples: int = 30) -> float:
    """Median CPU seconds of one step of :obj:`case` in :obj:`tree`."""
    worker = ab_gate._Worker(tree, [case])
    try:
        worker.ready()
        return statistics.median(worker.time(0, 1)["cpu"] for _ in range(samples))
    finally:
        worker.close()


def evaluate(trials: list[dict], thresholds: list[float], alpha: float,
             clocks=("cpu", "wall")) -> list[dict]:
    """Rates per clock and threshold: ``false_alarm`` (A/A trials judged a
    regression) and ``detect[s]`` (trials with slowdown s judged one)."""
    rows = []
    conditions = sorted({t["slowdown"] for t in trials})
    for clock in clocks:
        for threshold in thresholds:
            row = {"clock": clock, "threshold": threshold, "alpha": alpha}
            for s in conditions:
                runs = [t[clock] for t in trials if t["slowdown"] == s]
                hits = sum(ab_gate.judge(r["ratio"], r["p_slower"], r["p_faster"],
                                         threshold, alpha) == "REGRESSION" for r in runs)
                row[s] = (hits, len(runs))
            rows.append(row)
    return rows


def smallest_clean(row: dict, min_rate: float = 0.9) -> float | None:
    """Smallest slowdown detected in >= :obj:`min_rate` of its trials, if the
    row raised no false alarm."""
    if row.get(0.0, (0, 0))[0] > 0:
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
    header = "| clock | threshold | alpha | false alarms (A/A) | " + " | ".join(
        f"detected +{s:.0%}" for s in conditions if s > 0) + " | smallest clean |"
    lines.append(header)
    lines.append("|" + "---|" * (header.count("|") - 1))
    for row in rows:
        clean = smallest_clean(row)
        cells = [row["clock"], f"{row['threshold']:.1%}", f"{row['alpha']}",
                 "{}/{}".format(*row.get(0.0, (0, 0)))]
        cells += ["{}/{}".format(*row[s]) for s in conditions if s > 0]
        cells.append(f"+{clean:.0%}" if clean is not None else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", default="baseline")
    parser.add_argument("--dataset", default="synthetic-10k")
    parser.add_argument("--slowdowns", default="0.05,0.10,0.20")
    parser.add_argument("--trials", type=int, default=10, help="trials per condition")
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--sample-ms", type=float, default=12.0)
    parser.add_argument("--thresholds", default="0.01,0.02,0.03,0.04,0.05,0.075,0.1")
    parser.add_argument("--alpha", type=float, default=0.01)
    parser.add_argument("--json", help="write every trial here (after each trial)")
    parser.add_argument("--from-json", help="re-evaluate a previous --json file")
    parser.add_argument("--show-patch", action="store_true", help="print the injected patch")
    args = parser.parse_args(argv)
    thresholds = [float(x) for x in args.thresholds.split(",")]

    if args.from_json:
        saved = json.loads(Path(args.from_json).read_text())
        trials = saved["trials"]
        for t in trials:
            t["slowdown"] = float(t["slowdown"])
            for clock in ("cpu", "wall"):  # judged by the current rule
                center, p_slower, p_faster, lo, hi = ab_gate.pair_test(t[clock]["log_ratios"])
                t[clock].update(ratio=math.exp(center), p_slower=p_slower, p_faster=p_faster,
                                ci=[math.exp(lo), math.exp(hi)])
        print(json.dumps(saved["settings"]))
        print(format_table(trials, evaluate(trials, thresholds, args.alpha)))
        return 0

    case = f"{args.variant}@{args.dataset}"
    slowdowns = [float(x) for x in args.slowdowns.split(",")]
    settings = {k: getattr(args, k) for k in ("variant", "dataset", "trials", "processes",
                                                "rounds", "sample_ms", "alpha")}
    settings["threads"] = 1
    with tempfile.TemporaryDirectory(prefix="gnnperf-sensitivity-") as tmp:
        tree_a = copy_tree(ROOT, Path(tmp) / "A")
        settings["step_cpu_s"] = calibrate(tree_a, case)
        arms = {"A": tree_a, "A2": tree_a}
        for s in slowdowns:
            tree = copy_tree(ROOT, Path(tmp) / f"B{round(s * 100)}")
            patch = inject_slowdown(tree, args.variant, s)
            if args.show_patch:
                print(f"--- patch for +{s:.0%} appended to {PATCHED_FILE}:{patch}")
            arms[f"B{s}"] = tree
        print(f"{case}: step {settings['step_cpu_s'] * 1e3:.2f} ms CPU before injection",
              flush=True)
        trials: list[dict] = []
        start = time.perf_counter()
        for trial in range(args.trials):
            steps, times = ab_gate.run_arms(arms, [case], args.processes, args.rounds,
                                            args.sample_ms)
            per_arm = times[case]
            for s, arm in [(0.0, "A2")] + [(s, f"B{s}") for s in slowdowns]:
                record = {"trial": trial, "slowdown": s, "steps": steps[0]}
                for clock in ("cpu", "wall"):
                    samples = ab_gate.TimeSamples(case, steps[0], clock, per_arm["A"][clock],
                                                  per_arm[arm][clock])
                    v = ab_gate.decide(samples, thresholds[0], args.alpha)
                    record[clock] = {"ratio": v.ratio, "p_slower": v.p_slower,
                                     "p_faster": v.p_faster, "ci": [v.ci_low, v.ci_high],
                                     "log_ratios": ab_gate.pair_log_ratios(samples.a, samples.b)}
                trials.append(record)
            print(f"trial {trial + 1}/{args.trials} [{time.perf_counter() - start:.0f} s] "
                  + "  ".join(f"{'A/A' if r['slowdown'] == 0 else '+%d%%' % round(r['slowdown'] * 100)}:"
                              f" {r['cpu']['ratio']:.3f} (p {r['cpu']['p_slower']:.3f})"
                              for r in trials[-1 - len(slowdowns):]), flush=True)
            if args.json:
                Path(args.json).write_text(json.dumps({"settings": settings, "trials": trials}))
        settings["wall_s"] = time.perf_counter() - start
    if args.json:
        Path(args.json).write_text(json.dumps({"settings": settings, "trials": trials}))
    print(json.dumps(settings))
    print(format_table(trials, evaluate(trials, thresholds, args.alpha)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
