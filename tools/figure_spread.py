"""The spread between processes of a step's two asv figures: the
raw step time (``TrainStep.time_train_step``'s measurement: the median of
60 synchronised steps) and the step over the suite's reference step
(``TrainStepOverReference.track_step_over_reference``), each value from a
fresh interpreter, one after the other, as every commit of a history gets
its own process.

    python tools/figure_spread.py --processes 12 --case baseline@cora
    python tools/figure_spread.py --processes 12 --rebuilds 1   # one build a value (version 1's figure)

Nothing else should run meanwhile: it is a timing study.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHILD = r'''
import json, statistics, sys, time
sys.path.insert(0, {root!r})
from benchmarks import caches, training
cache = caches.training_datasets_cache(None)
raw = training.TrainStep()
raw.setup(cache, {dataset!r}, {variant!r}, "gcn")
wall, cpu = [], []
for _ in range(60):
    start, start_cpu = time.perf_counter(), time.process_time()
    raw.prep.synced_step()
    wall.append(time.perf_counter() - start)
    cpu.append(time.process_time() - start_cpu)
# asv measures each benchmark in a process of its own: the raw step's build goes first.
raw.prep = None
caches._RUNS.clear()
relative = training.TrainStepOverReference()
{set_builds}
relative.setup(cache, {dataset!r}, {variant!r})
ratio = relative.track_step_over_reference(cache, {dataset!r}, {variant!r})
print(json.dumps({{"raw_wall_s": statistics.median(wall), "raw_cpu_s": statistics.median(cpu),
                  "step_over_reference": ratio, "builds": relative.builds}}))
'''


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=12)
    parser.add_argument("--case", default="baseline@cora", help="variant@dataset")
    parser.add_argument("--rebuilds", type=int, default=None,
                        help="builds of the case (and the reference) the ratio is averaged "
                             "over (default: the benchmark's own, "
                             "TrainStepOverReference.builds)")
    parser.add_argument("--json", type=Path, help="write every value here")
    args = parser.parse_args()
    variant, dataset = args.case.split("@")
    set_builds = "" if args.rebuilds is None else f"relative.builds = {args.rebuilds}"
    child = CHILD.format(root=str(ROOT), dataset=dataset, variant=variant,
                         set_builds=set_builds)
    values = []
    for index in range(args.processes):
        with tempfile.TemporaryDirectory() as scratch:  # setup_cache writes its graphs here
            proc = subprocess.run([sys.executable, "-c", child], cwd=scratch, text=True,
                                  capture_output=True,
                                  env={**os.environ, "GNNPERF_CACHE": scratch})
        if proc.returncode:
            print(proc.stderr[-3000:], file=sys.stderr)
            return 1
        values.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        print(index + 1, values[-1], flush=True)
    summary = {}
    for key in [k for k in values[0] if k != "builds"]:
        column = [v[key] for v in values]
        summary[key] = {"mean": statistics.fmean(column), "min": min(column),
                        "max": max(column),
                        "sd_pct": 100 * statistics.stdev(column) / statistics.fmean(column)}
        print(f"{key}: mean {summary[key]['mean']:.4g}, range {min(column):.4g}-"
              f"{max(column):.4g}, sd {summary[key]['sd_pct']:.1f}%")
    if args.json:
        args.json.write_text(json.dumps({"command": " ".join(["python", *sys.argv]),
                                         "case": args.case, "builds": values[0]["builds"],
                                         "values": values,
                                         "summary": summary}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
