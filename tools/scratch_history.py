"""A scratch history of real commits with a known drift, measured by asv,
then read by ``gnnperf history``.

    python tools/scratch_history.py --dir /tmp/ramp --commits 20 --ramp-start 6 \\
        --ramp-len 10 --step-us 165
    python tools/scratch_history.py --dir /tmp/aa --commits 20 --step-us 0
    # Both history cases, the history figure only, a ramp of 1% of each step's own time:
    python tools/scratch_history.py --dir /tmp/ramp --variants baseline,sampled \\
        --figures relative --step-us 0 --step-pct 1

Clones this checkout into ``--dir`` (its HEAD, or ``--from``), then commits ``--commits`` real
commits on a branch: each carries one busy-wait fault of ``gnnperf.gate.faults`` (the
gate's injector, in the clone's variant registry, every variant's step); commits
``--ramp-start`` .. ``--ramp-start + --ramp-len - 1`` (1-based) each add
``--step-us`` microseconds of busy wait to every training step (165 us is
1% of a baseline Cora step on the project's 2-vCPU machine: 10 of them are
a 10 x 1% ramp), and ``--step-pct`` percent of the step's own CPU time (one
size for every case, full-graph or mini-batch);
with both 0 every commit edits a comment only (an A/A history). asv then
measures every commit of the branch in its own environment (GCN on Cora,
the quick profile, the ``--variants``: the raw step time
``training.TrainStep.time_train_step`` and the step over the suite's
reference step, ``training.TrainStepOverReference.track_step_over_reference``,
or the ``--figures`` named), and ``gnnperf history`` reads each figure's
results apart. ``run.json`` in ``--dir`` holds the commits, each one's wait,
the wall time of asv's run and the load average around it. Nothing else
should run meanwhile: it is a timing study (where something does, the load
average says so). First run: docs/results.md, "A 10 x 1% ramp in a scratch
history"; the curve on real histories: docs/history.md.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from gnnperf.gate import faults  # noqa: E402

#: The two figures of one step each commit: asv's raw step time, and the
#: step's time over the suite's fixed reference step, timed in the same
#: process (benchmarks/relative.py), each read by `gnnperf history` apart.
FIGURES = {"raw": r"training\.TrainStep\.time_train_step",
           "relative": r"training\.TrainStepOverReference\.track_step_over_reference"}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def make_history(repo: Path, commits: int, ramp_start: int, ramp_len: int, step_us: float,
                 step_pct: float = 0.0) -> list[tuple[str, float, float]]:
    """The branch's commits, oldest first, with each one's busy wait (us,
    and percent of the step's own CPU time). Every commit carries the same
    wrapper of the step (a ``busy-wait`` fault), only its sizes and a
    comment naming the commit differ: an A/A history's commits differ in a
    comment's worth only."""
    _git(repo, "checkout", "-q", "-b", "scratch")
    if "class Variant" not in (repo / faults.PATCHED_FILE).read_text():
        raise SystemExit(f"{faults.PATCHED_FILE}: no Variant class for gnnperf.gate.faults to "
                         f"wrap; start the branch from a later commit (--from)")
    made = []
    wait, pct = 0.0, 0.0
    for index in range(1, commits + 1):
        if ramp_start <= index < ramp_start + ramp_len:
            wait += step_us
            pct += step_pct
        faults.remove(repo)
        faults.inject(repo, "busy-wait", None, round(pct, 6) / 100, wait_us=round(wait, 3),
                      note=f"scratch history (tools/scratch_history.py): commit {index}")
        _git(repo, "commit", "-q", "-am",
             f"scratch commit {index}: busy wait {wait:g} us + {pct:g}% a step")
        made.append((_git(repo, "rev-parse", "HEAD"), wait, pct))
    return made


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, required=True, help="an empty or absent folder")
    parser.add_argument("--commits", type=int, default=20)
    parser.add_argument("--ramp-start", type=int, default=6)
    parser.add_argument("--ramp-len", type=int, default=10)
    parser.add_argument("--step-us", type=float, default=165.0,
                        help="busy wait each ramp commit adds, in microseconds (0 with "
                             "--step-pct 0: an A/A history)")
    parser.add_argument("--step-pct", type=float, default=0.0,
                        help="busy wait each ramp commit adds, in percent of the step's "
                             "own CPU time (the same size in every case)")
    parser.add_argument("--variants", default="baseline",
                        help="GNNPERF_ASV_VARIANTS: the cases asv measures (the history "
                             "figure's: baseline, sampled, sparse+trimmed+sparse_features)")
    parser.add_argument("--figures", default=",".join(FIGURES),
                        help=f"comma-separated, of {', '.join(FIGURES)}")
    parser.add_argument("--from", dest="start", default="HEAD",
                        help="the commit of this checkout the branch starts from (default "
                             "HEAD: pin one when others commit meanwhile, so that every "
                             "history of a study has the same project under it)")
    parser.add_argument("--env-dir", type=Path,
                        help="asv's environments, kept across scratch histories (a link "
                             "from the clone's .asv/env): a runner keeps its environment "
                             "between nightly runs, and builds only the project anew; "
                             "one history at a time")
    parser.add_argument("--python", default=sys.executable,
                        help="the Python asv runs with (it needs asv installed)")
    args = parser.parse_args()
    figures = {f: FIGURES[f] for f in args.figures.split(",") if f}
    if not figures or set(args.figures.split(",")) - set(FIGURES):
        parser.error(f"--figures {args.figures}: comma-separated, of {', '.join(FIGURES)}")
    if args.dir.exists() and any(args.dir.iterdir()):
        parser.error(f"--dir {args.dir} is not empty")
    repo = args.dir / "repo"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(repo)], check=True)
    _git(repo, "checkout", "-q", "--detach", _git(ROOT, "rev-parse", args.start))
    base = _git(repo, "rev-parse", "HEAD")
    made = make_history(repo, args.commits, args.ramp_start, args.ramp_len, args.step_us,
                        args.step_pct)
    (args.dir / "commits.txt").write_text(
        "".join(f"{sha} {us:g} {pct:g}\n" for sha, us, pct in made))
    env = {**os.environ, "GNNPERF_ASV_PROFILE": "quick", "GNNPERF_ASV_VARIANTS": args.variants,
           "GNNPERF_ASV_MODELS": "gcn"}
    run = {"command": " ".join(["python", *sys.argv]), "scratch_of": base[:7],
           "date": datetime.date.today().isoformat(), "variants": args.variants,
           "figures": list(figures), "commits": [
               {"commit": sha, "index": i + 1, "busy_wait_us": us, "busy_wait_pct": pct}
               for i, (sha, us, pct) in enumerate(made)],
           "load_before": [round(x, 2) for x in os.getloadavg()]}
    if args.env_dir:
        args.env_dir.mkdir(parents=True, exist_ok=True)
        (repo / ".asv").mkdir(exist_ok=True)
        (repo / ".asv" / "env").symlink_to(args.env_dir.resolve(), target_is_directory=True)
    subprocess.run([args.python, "-m", "asv", "machine", "--yes"], cwd=repo, check=True, env=env)
    started = time.time()
    subprocess.run([args.python, "-m", "asv", "run", "--show-stderr", "--bench",
                    "|".join(figures.values()), f"{base}..scratch"], cwd=repo, check=True,
                   env=env)
    # asv's whole run: its environment's first build (once per scratch clone)
    # as well as each commit's build, install and benchmarks.
    run["asv_run_seconds"] = round(time.time() - started, 1)
    run["load_after"] = [round(x, 2) for x in os.getloadavg()]
    (args.dir / "run.json").write_text(json.dumps(run, indent=1) + "\n")
    exits = {}
    for figure, pattern in figures.items():
        exits[figure] = subprocess.run(
            [args.python, "-m", "gnnperf", "history", "--results", str(repo / ".asv" / "results"),
             "--repo", str(repo), "--bench", pattern,
             "--json", str(args.dir / f"history-{figure}.json"),
             "--markdown", str(args.dir / f"history-{figure}.md")],
            cwd=ROOT, env=env).returncode
    # asv's own detector on the same results, for comparison: asv publish's
    # regressions (its step detection with the configuration's thresholds).
    subprocess.run([args.python, "-m", "asv", "publish"], cwd=repo, check=True, env=env,
                   capture_output=True)
    regressions = repo / ".asv" / "html" / "regressions.json"
    found = json.loads(regressions.read_text())["regressions"] if regressions.is_file() else []
    (args.dir / "asv-regressions.json").write_text(json.dumps(found, indent=1))
    print(f"scratch history in {repo}; gnnperf history exit "
          + ", ".join(f"{figure} {code} ({args.dir / f'history-{figure}.md'})"
                      for figure, code in exits.items())
          + f"; asv publish's regressions: {len(found)} ({args.dir / 'asv-regressions.json'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
