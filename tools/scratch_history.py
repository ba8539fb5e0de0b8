"""A scratch history of real commits with a known drift, measured by asv,
then read by ``gnnperf history`` (issue 49's acceptance).

    python tools/scratch_history.py --dir /tmp/ramp --commits 20 --ramp-start 6 \\
        --ramp-len 10 --step-us 165
    python tools/scratch_history.py --dir /tmp/aa --commits 20 --step-us 0

Clones this checkout into ``--dir``, then commits ``--commits`` real
commits on a branch: each edits ``gnnperf/variants/base.py``; commits
``--ramp-start`` .. ``--ramp-start + --ramp-len - 1`` (1-based) each add
``--step-us`` microseconds of busy wait to every training step (165 us is
1% of a baseline Cora step on the project's 2-vCPU machine: 10 of them are
a 10 x 1% ramp); with ``--step-us 0`` every commit edits a comment only
(an A/A history). asv then measures every commit of the branch in its own
environment (baseline GCN on Cora, the quick profile: the raw step time
``training.TrainStep.time_train_step`` and the step over the suite's
reference step, ``training.TrainStepOverReference.track_step_over_reference``),
and ``gnnperf history`` reads each of the two figures' results apart.
Nothing else should run meanwhile: it is a timing study. First run:
docs/results.md, "A 10 x 1% ramp in a scratch history".
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = "gnnperf/variants/base.py"
#: The two figures of one step each commit: asv's raw step time, and the
#: step's time over the suite's fixed reference step, timed in the same
#: process (benchmarks/relative.py), each read by `gnnperf history` apart.
FIGURES = {"raw": r"training\.TrainStep\.time_train_step",
           "relative": r"training\.TrainStepOverReference\.track_step_over_reference"}
BENCH = "|".join(FIGURES.values())
#: The busy wait each commit sets: a module constant read by the step.
WAIT = '''

#: Scratch history (tools/scratch_history.py): microseconds of busy wait per step.
_SCRATCH_WAIT_US = {us}  # commit {index}


def _scratch_wait() -> None:
    # CPU time, as the gate's injected slowdowns: more work, which a busy
    # machine stretches as it stretches the step (a wall-clock wait would
    # shrink against the step under load).
    import time
    end = time.process_time() + _SCRATCH_WAIT_US * 1e-6
    while time.process_time() < end:
        pass
'''
STEP = '''        """One optimiser step on :obj:`batch`; returns the (detached) loss."""
'''


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def make_history(repo: Path, commits: int, ramp_start: int, ramp_len: int, step_us: float
                 ) -> list[tuple[str, float]]:
    """The branch's commits, oldest first, with each one's busy wait (us)."""
    _git(repo, "checkout", "-q", "-b", "scratch")
    path = repo / TARGET
    text = path.read_text()
    if STEP not in text:
        raise SystemExit(f"{TARGET}: TrainingRun.step's docstring moved; update STEP")
    text = text.replace(STEP, STEP + "        _scratch_wait()\n", 1)
    made = []
    wait = 0.0
    for index in range(1, commits + 1):
        if step_us and ramp_start <= index < ramp_start + ramp_len:
            wait += step_us
        body = re.sub(r"\n\n#: Scratch history.*", "", text, flags=re.S)
        path.write_text(body + WAIT.format(us=round(wait, 3), index=index))
        _git(repo, "commit", "-q", "-am", f"scratch commit {index}: busy wait {wait:g} us a step")
        made.append((_git(repo, "rev-parse", "HEAD"), wait))
    return made


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, required=True, help="an empty or absent folder")
    parser.add_argument("--commits", type=int, default=20)
    parser.add_argument("--ramp-start", type=int, default=6)
    parser.add_argument("--ramp-len", type=int, default=10)
    parser.add_argument("--step-us", type=float, default=165.0,
                        help="busy wait each ramp commit adds (0: an A/A history)")
    parser.add_argument("--python", default=sys.executable,
                        help="the Python asv runs with (it needs asv installed)")
    args = parser.parse_args()
    if args.dir.exists() and any(args.dir.iterdir()):
        parser.error(f"--dir {args.dir} is not empty")
    repo = args.dir / "repo"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(repo)], check=True)
    base = _git(repo, "rev-parse", "HEAD")
    made = make_history(repo, args.commits, args.ramp_start, args.ramp_len, args.step_us)
    (args.dir / "commits.txt").write_text("".join(f"{sha} {us:g}\n" for sha, us in made))
    env = {**os.environ, "GNNPERF_ASV_PROFILE": "quick", "GNNPERF_ASV_VARIANTS": "baseline",
           "GNNPERF_ASV_MODELS": "gcn"}
    subprocess.run([args.python, "-m", "asv", "machine", "--yes"], cwd=repo, check=True, env=env)
    subprocess.run([args.python, "-m", "asv", "run", "--show-stderr", "--bench", BENCH,
                    f"{base}..scratch"], cwd=repo, check=True, env=env)
    exits = {}
    for figure, pattern in FIGURES.items():
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
