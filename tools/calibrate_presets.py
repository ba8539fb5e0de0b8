"""Calibrates a synthetic preset's signal: the reference model's (GCN,
full-batch baseline) test accuracy over a grid of homophily and feature
signal, at the preset's own shape (degree, features, classes, training
nodes per class), so that a preset lands where real citation and
co-purchase graphs are (test accuracy about 0.70-0.85) and techniques can
differ in what they reach.

    python tools/calibrate_presets.py --preset synthetic-1m --nodes 20000 \
        --homophily 0.2,0.3,0.4 --signal 1,2,3 --epochs 100

``--nodes`` scales the graph down for the sweep (accuracy depends on the
degree, the class mix and the signal, not on the node count); the chosen
point is then checked at full size with ``gnnperf run``. One line per grid
point: homophily, signal, best validation and final test accuracy.
"""
from __future__ import annotations

import argparse
import dataclasses
import time

from gnnperf.data import SYNTHETIC_PRESETS, Dataset, synthetic_graph
from gnnperf.measure.runner import measure_variant, set_threads
from gnnperf.variants import TrainConfig, get_variant


def _floats(text: str) -> list[float]:
    return [float(part) for part in text.split(",")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="synthetic-1m", choices=sorted(SYNTHETIC_PRESETS))
    parser.add_argument("--nodes", type=int, help="nodes of the sweep's graph (default: the preset's)")
    parser.add_argument("--homophily", type=_floats, default=[0.2, 0.3, 0.4])
    parser.add_argument("--signal", type=_floats, default=[1.0, 2.0, 3.0])
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--variant", default="baseline")
    args = parser.parse_args()
    set_threads(1)
    spec = SYNTHETIC_PRESETS[args.preset]
    if args.nodes:
        scale = args.nodes / spec.num_nodes
        spec = dataclasses.replace(
            spec, num_nodes=args.nodes,
            train_per_class=max(1, round(spec.train_per_class * scale)),
            num_val=max(50, round(spec.num_val * scale)),
            num_test=max(100, round(spec.num_test * scale)))
    print(f"{args.preset} shape: {spec}")
    for homophily in args.homophily:
        for signal in args.signal:
            point = dataclasses.replace(spec, homophily=homophily, signal=signal)
            start = time.perf_counter()
            result = measure_variant(get_variant(args.variant),
                                     Dataset(synthetic_graph(point), name="sweep"),
                                     TrainConfig(epochs=args.epochs), "cpu", 3)
            val = result.convergence["val_acc"]
            best_val = max(val)
            print(f"homophily {homophily:.2f} signal {signal:.2f}: best val {best_val:.3f} "
                  f"(epoch {val.index(best_val) + 1}), test {result.test_acc:.3f} "
                  f"({time.perf_counter() - start:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
