#!/usr/bin/env python3
"""Where a training step's time goes, op by op (``torch.profiler``).

    python tools/profile_step.py sparse+trimmed+sparse_features@cora --steps 50

builds the case as every benchmark does (:func:`gnnperf.measure.case.prepare`, one
thread, warmed up), times ``--steps`` steps unprofiled (median), then profiles
as many again and prints each op's self time per step, its calls per step and
its share of the profiled step, most expensive first. The profiler adds a few
microseconds to every op, so the shares, not the absolute figures, are what
to read; the unprofiled median is the step's real time.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case", help="variant@dataset, e.g. baseline@cora")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--rows", type=int, default=25)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from torch.profiler import ProfilerActivity, profile

    from gnnperf.measure.case import Case, prepare

    prepared = prepare(Case.parse(args.case, warmup_epochs=5))
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        prepared.synced_step()
        times.append(time.perf_counter() - start)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(args.steps):
            prepared.synced_step()
    events = [e for e in prof.key_averages() if e.self_cpu_time_total > 0]
    total = sum(e.self_cpu_time_total for e in events)
    print(f"{args.case}: step {statistics.median(times) * 1e3:.3f} ms median unprofiled, "
          f"{total / args.steps / 1e3:.3f} ms profiled")
    print(f"{'op':58s} {'us/step':>9s} {'calls':>6s} {'share':>6s}")
    for event in sorted(events, key=lambda e: -e.self_cpu_time_total)[:args.rows]:
        print(f"{event.key[:58]:58s} {event.self_cpu_time_total / args.steps:9.1f} "
              f"{event.count / args.steps:6.1f} {event.self_cpu_time_total / total:6.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
