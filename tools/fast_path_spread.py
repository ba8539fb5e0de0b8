"""The fast path against the plain PyG step, process by process, and where
the spread between processes comes from.

Part one runs ``gnnperf run`` once a seed, each in its own process (the
way a user compares them), and takes each process's ratio of the plain
step (the ``tutorial`` variant) to each fast path. Part two builds the
fast path for every seed and the plain step in one process and times
them in interleaved rounds: if the seed set the speed, a seed would be
slower in every round; if the machine did, every run moves together from
round to round, and one round's spread is what separates processes.

    python tools/fast_path_spread.py --json fast-path-spread.json

Nothing else should run meanwhile: it is a timing study.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PLAIN = "tutorial"
FAST = ("sparse+trimmed+sparse_features", "sparse+trimmed+sparse_features+compiled")


def one_process(seed: int, epochs: int, folder: Path) -> dict:
    """One ``gnnperf run`` of the plain step and the fast paths: their
    median epochs (ms) and the plain step's over each fast path's."""
    out = folder / f"seed{seed}.json"
    subprocess.run([sys.executable, "-m", "gnnperf", "run", "--dataset", "cora",
                    "--epochs", str(epochs), "--threads", "1", "--seed", str(seed),
                    "--variants", ",".join((PLAIN, *FAST)), "--no-progress",
                    "--no-time-to-accuracy", "--json", str(out)],
                   check=True, stdout=subprocess.DEVNULL)
    results = {r["variant"]: r["epoch_time"]["median"] * 1e3
               for r in json.loads(out.read_text())["results"]}
    return {"seed": seed, "epoch_ms": results,
            "plain_over_fast": {v: results[PLAIN] / results[v] for v in FAST}}


def interleaved(seeds: list[int], rounds: int, epochs_per_round: int) -> dict:
    """The eager fast path of every seed and the plain step, built in this
    process and timed in turn, round after round: each round's median epoch (ms)."""
    import torch

    from gnnperf import get_variant, load_dataset
    from gnnperf.measure.runner import warm_device
    from gnnperf.variants import TrainConfig
    torch.set_num_threads(1)
    graph = load_dataset("cora").graph
    cpu = torch.device("cpu")
    warm_device(cpu)
    runs = {f"seed {s}": get_variant(FAST[0]).build(graph, TrainConfig(seed=s), cpu)
            for s in seeds}
    runs[PLAIN] = get_variant(PLAIN).build(graph, TrainConfig(seed=seeds[0]), cpu)

    def epoch(run) -> float:
        start = time.perf_counter()
        for batch in run.batches():
            loss = run.step(batch)
        float(loss)  # the epoch's result, as the runner reads it
        return time.perf_counter() - start

    for run in runs.values():  # warm-up, as the runner's
        for _ in range(20):
            epoch(run)
    medians = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            medians[name].append(1e3 * statistics.median(epoch(run) for _ in range(epochs_per_round)))
    fast = [f"seed {s}" for s in seeds]
    ratios = [medians[PLAIN][i] / statistics.median(medians[name][i] for name in fast)
              for i in range(rounds)]
    return {"variant": FAST[0], "epochs_per_round": epochs_per_round, "round_ms": medians,
            "plain_over_fast_by_round": ratios}


def summary(processes: list[dict], rounds: dict) -> dict:
    by_variant = {}
    for variant in FAST:
        ratios = [p["plain_over_fast"][variant] for p in processes]
        ms = [p["epoch_ms"][variant] for p in processes]
        by_variant[variant] = {"median_ratio": statistics.median(ratios),
                               "ratio_min": min(ratios), "ratio_max": max(ratios),
                               "median_ms": statistics.median(ms), "ms_min": min(ms),
                               "ms_max": max(ms)}
    plain = [p["epoch_ms"][PLAIN] for p in processes]
    by_round = {name: {"median_ms": statistics.median(v), "min_ms": min(v), "max_ms": max(v)}
                for name, v in rounds["round_ms"].items()}
    return {"processes": by_variant,
            "plain_ms": {"median": statistics.median(plain), "min": min(plain),
                         "max": max(plain)},
            "rounds": by_round,
            "round_ratio": {"median": statistics.median(rounds["plain_over_fast_by_round"]),
                            "min": min(rounds["plain_over_fast_by_round"]),
                            "max": max(rounds["plain_over_fast_by_round"])}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2", help="one process a seed (default: 0,1,2)")
    parser.add_argument("--epochs", type=int, default=200, help="epochs a process trains")
    parser.add_argument("--rounds", type=int, default=12, help="interleaved rounds")
    parser.add_argument("--round-epochs", type=int, default=40, help="epochs a run trains a round")
    parser.add_argument("--json", type=Path, required=True, help="write the study here")
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    with tempfile.TemporaryDirectory() as folder:
        processes = [one_process(seed, args.epochs, Path(folder)) for seed in seeds]
    rounds = interleaved(seeds, args.rounds, args.round_epochs)
    doc = {"plain": PLAIN, "fast": list(FAST), "processes": processes, "interleaved": rounds,
           "summary": summary(processes, rounds)}
    args.json.write_text(json.dumps(doc, indent=1) + "\n")
    s = doc["summary"]
    for variant, figures in s["processes"].items():
        print(f"{variant}: plain step over it {figures['median_ratio']:.2f}x (median of "
              f"{len(seeds)} processes, {figures['ratio_min']:.2f}-{figures['ratio_max']:.2f}x)")
    print(f"interleaved rounds: {s['round_ratio']['median']:.2f}x "
          f"({s['round_ratio']['min']:.2f}-{s['round_ratio']['max']:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
