"""The README's main job, timed as a user meets it after the install: its
``gnnperf run`` in a fresh process with an empty gnnperf cache (so the
machine's roofs are measured too), and where its wall time goes.

    python tools/main_job.py --json main-job.json

Nothing else should run meanwhile: it is a timing study.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMAND = ["gnnperf", "run"]  # what the README runs, as its module in this interpreter


def breakdown(run: dict, wall_s: float) -> dict:
    """Seconds by phase, from the run's JSON: the timed epochs, the first
    epochs (the compiles in them), the compiler's one-offs, the evaluation
    after every epoch, and the rest (start-up, the roofs, builds, the
    instrumented warm-up epochs, the tables)."""
    results = run["results"]
    steady = sum(r["epoch_time"]["median"] * (r["epochs"] - r["warmup_epochs"]) for r in results)
    first = sum(r["first_epoch_s"] for r in results)
    compiles = sum(r["compile_s"] or 0.0 for r in results)
    warmup = sum(r["setup_seconds"].get("compiler_warmup", 0.0) for r in results)
    evaluation = sum((r["convergence"] or {}).get("eval_s", 0.0) for r in results)
    phases = {"steady epochs": steady, "first epochs": first, "of which compiling": compiles,
              "compiler one-offs": warmup, "evaluation": evaluation}
    phases["the rest"] = wall_s - steady - first - warmup - evaluation
    return phases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, required=True, help="write the timing here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "run.json"
        env = dict(os.environ, XDG_CACHE_HOME=str(Path(folder) / "cache"))
        env.pop("GNNPERF_CACHE", None)  # a cache of the user's own would not be empty
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", *COMMAND, "--no-progress", "--json", str(out)],
                       env=env, check=True, stdout=subprocess.DEVNULL)
        wall_s = time.perf_counter() - start
        run = json.loads(out.read_text())
    doc = {"command": " ".join(COMMAND), "wall_s": wall_s, "variants": len(run["results"]),
           "epochs": run["config"]["epochs"], "cold_cache": True,
           "phases_s": breakdown(run, wall_s)}
    args.json.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{doc['command']}: {wall_s:.1f} s with an empty cache ({doc['variants']} variants, "
          f"{doc['epochs']} epochs); " + ", ".join(f"{k} {v:.1f} s"
                                                  for k, v in doc["phases_s"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
