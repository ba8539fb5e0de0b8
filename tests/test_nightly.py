"""The nightly's history kept in git (gnnperf.ci.nightly and
.github/workflows/nightly.yml): the workflow's own measure and store jobs,
step by step, against a scratch repository, with asv stood in by a script
that writes asv's result files (the measuring itself is asv's and is tested
elsewhere; what is tested here is what happens to the history).
"""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from gnnperf.ci import nightly
from workflow_steps import Runner, StepFailed, expand, load, machine_find_links, uses

ROOT = Path(__file__).resolve().parent.parent
NIGHTLY = ROOT / ".github" / "workflows" / "nightly.yml"
MACHINE = "gnnperf-gpu"
BRANCH = "gnnperf-results"

#: asv stood in: ``machine`` does nothing, ``run HASHFILE:f`` writes one
#: result file per commit in asv's format, newest first, and exits 1 after
#: $FAKE_ASV_FAIL_AFTER commits (a run that fails half-way).
FAKE_ASV = r'''
import json, os, sys
args = sys.argv[1:]
if args[:1] == ["--config"]:
    args = args[2:]
if args[0] != "run":
    sys.exit(0)
machine = args[args.index("--machine") + 1]
hashfile = next(a for a in args if a.startswith("HASHFILE:"))[len("HASHFILE:"):]
results = os.environ["ASV_RESULTS"]
os.makedirs(os.path.join(results, machine), exist_ok=True)
with open(os.path.join(results, machine, "machine.json"), "w") as f:
    json.dump({"machine": machine, "version": 1}, f)
with open(os.path.join(results, "benchmarks.json"), "w") as f:
    json.dump({"training.TrainStep.time_train_step": {"version": "1"}, "version": 2}, f)
fail_after = int(os.environ.get("FAKE_ASV_FAIL_AFTER", "1000"))
for i, commit in enumerate(open(hashfile).read().split()):
    if i >= fail_after:
        print("benchmark crashed", file=sys.stderr)
        sys.exit(1)
    data = {"commit_hash": commit, "env_name": "env", "date": 1, "params": {"machine": machine},
            "python": "3.11", "requirements": {}, "env_vars": {},
            "result_columns": ["result", "params", "version"],
            "results": {"training.TrainStep.time_train_step": [[0.01], [["'cora'"]], "1"]},
            "durations": {}, "version": 2}
    with open(os.path.join(results, machine, commit[:8] + "-env.json"), "w") as f:
        json.dump(data, f)
'''


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


class Scratch:
    """A scratch repository (a bare origin and a clone that commits to it),
    the artifact store between jobs, and the nightly's jobs run on them."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.origin = tmp / "origin.git"
        _git(tmp, "init", "-q", "--bare", "-b", "main", str(self.origin))
        self.dev = tmp / "dev"
        _git(tmp, "clone", "-q", str(self.origin), str(self.dev))
        _git(self.dev, "config", "user.email", "t@t")
        _git(self.dev, "config", "user.name", "t")
        self.artifacts = tmp / "artifacts"
        self.fake_bin = tmp / "fake-bin"
        self.fake_bin.mkdir()
        (self.fake_bin / "fake_asv.py").write_text(FAKE_ASV)
        asv = self.fake_bin / "asv"
        asv.write_text(f'#!/bin/sh\nexec {sys.executable} {self.fake_bin / "fake_asv.py"} "$@"\n')
        asv.chmod(0o755)
        self.runs = 0
        self.commits = 0

    def commit(self, n: int) -> list[str]:
        for _ in range(n):
            self.commits += 1
            (self.dev / "f").write_text(str(self.commits))
            _git(self.dev, "add", "f")
            _git(self.dev, "commit", "-q", "-m", f"c{self.commits}")
        _git(self.dev, "push", "-q", "origin", "main")
        return _git(self.dev, "rev-list", "main").split()

    def branch_exists(self) -> bool:
        return bool(_git(self.origin, "branch", "--list", BRANCH))

    def history(self) -> set[str]:
        """The commits the results branch holds results of."""
        if not self.branch_exists():
            return set()
        names = _git(self.origin, "ls-tree", "-r", "--name-only", BRANCH).split()
        commits = set()
        for name in names:
            if name.startswith(f"results/{MACHINE}/") and not name.endswith("machine.json"):
                commits.add(json.loads(_git(self.origin, "show", f"{BRANCH}:{name}"))["commit_hash"])
        return commits

    # -- the actions' stand-ins --
    def _checkout(self, workspace: Path):
        def run(step: dict, env: dict) -> None:
            given = step.get("with") or {}
            target = workspace / given.get("path", "")
            if target.exists() and given.get("path"):
                shutil.rmtree(target)
            ref = expand(given.get("ref", "main"), env) if given.get("ref") else "main"
            if not given.get("path"):  # the workspace itself: the default branch
                subprocess.run(["git", "clone", "-q", "-b", ref, str(self.origin), str(target)],
                               check=True)
            else:
                subprocess.run(["git", "clone", "-q", "-b", ref, str(self.origin), str(target)],
                               check=True)
        return run

    def _upload(self, step: dict, env: dict) -> None:
        source = Path(env["GITHUB_WORKSPACE"]) / expand(step["with"]["path"], env)
        if source.exists():
            shutil.copytree(source, self.artifacts / expand(step["with"]["name"], env))

    def _download(self, step: dict, env: dict) -> None:
        stored = self.artifacts / expand(step["with"]["name"], env)
        if not stored.exists():
            raise StepFailed("download-artifact", 1, "", "no such artifact")  # continue-on-error
        shutil.copytree(stored, expand(step["with"]["path"], env))

    def _install(self, step: dict, env: dict) -> None:
        """The install steps' stand-in: a venv folder whose python is this
        one (gnnperf, asv on its path through the setup-python stand-in),
        first on PATH as the step puts it; the install itself is the CPU
        workflow test's."""
        for venv in ("asv-venv", "venv"):
            if venv in step["run"]:
                bin_dir = Path(env["RUNNER_TEMP"]) / venv / "bin"
                bin_dir.mkdir(parents=True, exist_ok=True)
                (bin_dir / "python").symlink_to(sys.executable)
                with open(env["GITHUB_PATH"], "a") as out:
                    out.write(f"{bin_dir}\n")

    def nightly(self, fail_after: int | None = None) -> dict[str, str]:
        """One nightly in fresh workspaces (no cache, no earlier folder):
        measure, then store, as the workflow orders them. Returns each
        job's result."""
        self.runs += 1
        workflow = load(NIGHTLY)
        run_id = str(1000 + self.runs)
        history = self.branch_exists()  # the plan job's output
        site = f"{sysconfig.get_paths()['purelib']}:{ROOT}"
        extra = {"ASV_MACHINE": MACHINE, "RESULTS_BRANCH": BRANCH, "MAX_COMMITS": "3",
                 "GNNPERF_REQUIREMENT": "gnnperf", "TORCH_INDEX_URL": (self.tmp / "no-index").as_uri(),
                 "PIP_FIND_LINKS": machine_find_links()}
        if fail_after is not None:
            extra["FAKE_ASV_FAIL_AFTER"] = str(fail_after)
        results = {}
        for job_id in ("measure", "store"):
            workspace = self.tmp / f"run{self.runs}-{job_id}"
            env = dict(extra, MEASURED=results.get("measure", ""), RUN_ID=run_id)
            runner = Runner(workspace, self.tmp / f"run{self.runs}-{job_id}-runner", env=env,
                            actions={"actions/checkout": self._checkout(workspace),
                                     "actions/upload-artifact": self._upload,
                                     "actions/download-artifact": self._download,
                                     **{step["name"]: self._install
                                        for step in workflow["jobs"][job_id]["steps"]
                                        if step.get("name", "").startswith("Install")}},
                            path_first=[self.fake_bin], site=site)
            for step in workflow["jobs"][job_id]["steps"]:  # artifact names carry the run id
                for key in ("name",):
                    if key in (step.get("with") or {}):
                        step["with"][key] = step["with"][key].replace("${{ github.run_id }}", run_id)
            try:
                runner.run_job(workflow, job_id,
                               when=lambda step: "history" not in str(step["if"]) or history)
                results[job_id] = "success"
            except StepFailed as failure:
                results[job_id] = "failure"
                results[f"{job_id}-failure"] = str(failure)
        return results


@pytest.fixture
def scratch(tmp_path):
    return Scratch(tmp_path)


def test_an_empty_cache_costs_time_never_history(scratch):
    first = scratch.commit(4)
    assert scratch.nightly() == {"measure": "success", "store": "success"}
    assert scratch.history() == {first[0]}  # a first run measures the tip only
    second = scratch.commit(2)
    # Nothing survives between runs but the repository: fresh workspaces,
    # fresh runner folders, no cache.
    outcome = scratch.nightly()
    assert outcome == {"measure": "success", "store": "success"}, outcome
    assert scratch.history() == {first[0], second[0], second[1]}
    # Nothing new: nothing measured, nothing lost.
    assert scratch.nightly()["store"] == "success"
    assert scratch.history() == {first[0], second[0], second[1]}


def test_a_run_that_fails_half_way_keeps_what_it_measured(scratch):
    first = scratch.commit(2)
    scratch.nightly()
    later = scratch.commit(3)
    outcome = scratch.nightly(fail_after=1)
    # The measurement failed, the store job still merged what it measured
    # (and reports the failure), and nothing earlier went missing.
    assert outcome["measure"] == "failure" and "benchmark crashed" in outcome["measure-failure"]
    assert outcome["store"] == "failure"
    assert scratch.history() == {first[0], later[0]}
    # The next run starts from that history (the tip is measured: nothing new).
    assert scratch.nightly() == {"measure": "success", "store": "success"}
    assert scratch.history() == {first[0], later[0]}


def test_the_workflow_keeps_the_history_in_git_not_in_a_cache():
    workflow = load(NIGHTLY)
    for job_id, job in workflow["jobs"].items():
        assert not any(uses(s).startswith("actions/cache") for s in job["steps"]), job_id
    measure, store = workflow["jobs"]["measure"], workflow["jobs"]["store"]
    assert measure["permissions"] == {"contents": "read"}
    assert store["permissions"] == {"contents": "write"} and store["runs-on"] == "ubuntu-latest"
    assert "always()" in store["if"] and store["needs"] == ["plan", "measure"]
    assert measure["concurrency"]["cancel-in-progress"] is False  # queued, not cancelled
    publish = workflow["jobs"]["publish"]
    assert "default_branch" in publish["if"] and "default_branch" in workflow["jobs"]["plan"]["if"]


# --- the merge, value by value --------------------------------------------------

COLUMNS = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a"]


def _result(commit: str, rows: dict) -> dict:
    return {"commit_hash": commit, "env_name": "env", "params": {"machine": "m"},
            "result_columns": COLUMNS, "results": rows, "durations": {}, "version": 2}


def test_merge_adds_and_replaces_values_and_never_removes_one():
    commit = "a" * 40
    old = _result(commit, {"a.time_x": [[1.0, 2.0], [["1", "2"]], "1", 5, 1.0, [0.9, 1.9]],
                           "a.time_gone": [[3.0], [["1"]], "1"]})
    # The new run: time_x's second parameter failed, a new benchmark measured.
    new = _result(commit, {"a.time_x": [[1.5, None], [["1", "2"]], "1", 6, 2.0, [1.4, None]],
                           "a.time_new": [[4.0], [["1"]], "1"]})
    merged = nightly.merge_result_file(old, new)
    rows = {name: dict(zip(COLUMNS, row)) for name, row in merged["results"].items()}
    assert rows["a.time_x"]["result"] == [1.5, 2.0]
    assert rows["a.time_x"]["stats_ci_99_a"] == [1.4, 1.9]
    assert rows["a.time_gone"]["result"] == [3.0] and rows["a.time_new"]["result"] == [4.0]
    # A benchmark that failed whole keeps what was there; a new version replaces it.
    failed = _result(commit, {"a.time_gone": [None, [["1"]], "1"]})
    assert nightly.merge_result_file(merged, failed)["results"]["a.time_gone"][0] == [3.0]
    bumped = _result(commit, {"a.time_x": [[9.0, None], [["1", "2"]], "2"]})
    assert nightly.merge_result_file(merged, bumped)["results"]["a.time_x"][0] == [9.0, None]


def test_merge_takes_only_what_asv_writes(tmp_path):
    source, history = tmp_path / "run", tmp_path / "history"
    (source / "m").mkdir(parents=True)
    commit = hashlib.sha1(b"x").hexdigest()
    (source / "m" / "machine.json").write_text('{"machine": "m"}')
    (source / "m" / f"{commit[:8]}-env.json").write_text(json.dumps(_result(commit, {})))
    (source / "m" / "notes.json").write_text('{"no": "commit"}')
    (source / "m" / "script.sh").write_text("echo hi")
    (source / "m" / "link.json").symlink_to(source / "m" / "machine.json")
    (source / "..hidden").write_text("{}")
    report = nightly.merge_results(source, history)
    assert sorted(report.added) == [f"m/{commit[:8]}-env.json", "m/machine.json"]
    assert sorted(report.refused) == ["..hidden", "m/link.json", "m/notes.json", "m/script.sh"]
    assert sorted(p.name for p in (history / "m").iterdir()) == [f"{commit[:8]}-env.json",
                                                                   "machine.json"]
    with pytest.raises(Exception, match="no results folder"):
        nightly.merge_results(tmp_path / "absent", history)


# --- which commits a nightly measures -------------------------------------------

HISTORY = [hashlib.sha1(str(i).encode()).hexdigest() for i in range(20, 0, -1)]  # newest first


def test_the_measured_commits_are_the_result_files_an_unreadable_one_measuring_nothing(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "machine.json").write_text('{"machine": "m"}')
    for commit in HISTORY[3:5]:
        (folder / f"{commit[:8]}-env.json").write_text(json.dumps(_result(commit, {})))
    (folder / "cut.json").write_text('{"commit_hash": ')
    (folder / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    assert nightly.measured_commits(tmp_path, "m") == set(HISTORY[3:5])
    assert nightly.measured_commits(tmp_path, "absent") == set()


def test_first_run_measures_the_tip_only():
    assert nightly.select(HISTORY, set(), 3) == HISTORY[:1]
    # Results of commits elsewhere (a PR's, another branch's) are not this history's.
    assert nightly.select(HISTORY, {"ab" * 20}, 3) == HISTORY[:1]


def test_only_commits_after_the_last_measured_one_at_most_n():
    select = nightly.select
    assert select(HISTORY, {HISTORY[2], HISTORY[10]}, 3) == HISTORY[:2]
    assert select(HISTORY, {HISTORY[0]}, 3) == []
    assert select(HISTORY, {HISTORY[3][:8]}, 5) == HISTORY[:3]  # asv's 8-character names
    chosen = select(HISTORY, {HISTORY[15]}, 4)
    assert len(chosen) == 4 and chosen[0] == HISTORY[0] and chosen[-1] == HISTORY[14]
    assert chosen == sorted(set(chosen), key=HISTORY.index)
    assert select(HISTORY, {HISTORY[15]}, 1) == HISTORY[:1]
    with pytest.raises(Exception, match="at least 1"):
        select(HISTORY, set(), 0)


def test_a_file_that_is_no_asv_result_is_refused_not_a_crash(tmp_path):
    source, history = tmp_path / "run", tmp_path / "history"
    (source / "m").mkdir(parents=True)
    commit, other = hashlib.sha1(b"a").hexdigest(), hashlib.sha1(b"b").hexdigest()
    good = _result(commit, {"a.time_x": [[1.0], [["1"]], "1"]})
    (source / "m" / f"{commit[:8]}-env.json").write_text(json.dumps(good))
    bad = {f"{other[:8]}-named.json": _result(commit, {}),  # another commit's name
           f"{other[:8]}-rows.json": {**_result(other, {}), "results": {"x": 5}},
           f"{other[:8]}-cols.json": {**_result(other, {}), "result_columns": "result"},
           f"{other[:8]}-deep.json": "[" * 100_000 + "]" * 100_000}
    for name, data in bad.items():
        (source / "m" / name).write_text(data if isinstance(data, str) else json.dumps(data))
    report = nightly.merge_results(source, history)
    assert report.added == [f"m/{commit[:8]}-env.json"]
    assert sorted(report.refused) == sorted(f"m/{name}" for name in bad)
    # Merged again (a second run of the same), still whole and unchanged.
    assert nightly.merge_results(source, history).unchanged == [f"m/{commit[:8]}-env.json"]


def test_a_stale_copy_never_reverts_a_newer_value_nor_another_machines(tmp_path):
    commit = hashlib.sha1(b"c").hexdigest()
    name = f"{commit[:8]}-env.json"
    newer = _result(commit, {"a.time_x": [[2.0], [["1"]], "1", 200]})
    stale = _result(commit, {"a.time_x": [[1.0], [["1"]], "1", 100]})
    history = tmp_path / "history"
    for data, folder in ((newer, "first"), (stale, "second")):
        (tmp_path / folder / "m").mkdir(parents=True)
        (tmp_path / folder / "m" / name).write_text(json.dumps(data))
        (tmp_path / folder / "other").mkdir()
        (tmp_path / folder / "other" / name).write_text(json.dumps(data))
        nightly.merge_results(tmp_path / folder, history, machine="m")
    assert json.loads((history / "m" / name).read_text())["results"]["a.time_x"][0] == [2.0]
    assert not (history / "other").exists()


def test_store_creates_the_branch_then_adds_to_it_and_survives_a_lost_race(tmp_path):
    origin, clone = tmp_path / "origin.git", tmp_path / "clone"
    _git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    _git(tmp_path, "clone", "-q", str(origin), str(clone))
    _git(clone, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "--allow-empty",
         "-m", "c")
    _git(clone, "push", "-q", "origin", "main")

    def run_of(label: bytes) -> Path:
        commit = hashlib.sha1(label).hexdigest()
        folder = tmp_path / f"run-{label.decode()}"
        (folder / MACHINE).mkdir(parents=True)
        (folder / MACHINE / f"{commit[:8]}-env.json").write_text(
            json.dumps(_result(commit, {"a.time_x": [[1.0], [["1"]], "1"]})))
        return folder

    assert "pushed" in nightly.store(run_of(b"1"), clone, BRANCH, machine=MACHINE)
    # Another clone pushes between this one's fetch and its push: the push is
    # rejected, and the store fetches, merges again and pushes.
    other = tmp_path / "other"
    _git(tmp_path, "clone", "-q", str(origin), str(other))
    real_run = nightly._git_run
    lost = []

    def racing(repo, *args, remote=False):
        if args[:1] == ("push",) and not lost:
            lost.append(1)
            nightly._git_run = real_run
            try:
                nightly.store(run_of(b"2"), other, BRANCH, machine=MACHINE)
            finally:
                nightly._git_run = racing
            rejected = real_run(repo, *args, remote=remote)
            assert rejected.returncode != 0  # the race was lost
            return rejected
        return real_run(repo, *args, remote=remote)

    nightly._git_run = racing
    try:
        assert "pushed" in nightly.store(run_of(b"3"), clone, BRANCH, machine=MACHINE)
    finally:
        nightly._git_run = real_run
    names = _git(origin, "ls-tree", "-r", "--name-only", BRANCH).split()
    assert len([n for n in names if n.startswith(f"results/{MACHINE}/")]) == 3
    # Committing locally twice builds on the local branch.
    for label in (b"4", b"5"):
        nightly.store(run_of(label), clone, "local-results", push=False, machine=MACHINE)
    local = _git(clone, "ls-tree", "-r", "--name-only", "local-results").split()
    assert len([n for n in local if n.startswith(f"results/{MACHINE}/")]) == 2


def test_the_schedule_runs_the_nightly_and_publishes():
    # A scheduled event carries no repository object: the default-branch
    # check must not be the only way in.
    jobs = load(NIGHTLY)["jobs"]
    for job in ("plan", "publish"):
        assert "github.event_name == 'schedule' ||" in jobs[job]["if"], job


def test_the_nightly_runs_without_gnnperfs_dependencies():
    """The workflows run ``python -m gnnperf.ci.nightly`` from a venv holding
    gnnperf without its dependencies: with no site-packages at all (``-S``),
    the module and the asv results reader it uses still import and run."""
    out = subprocess.run([sys.executable, "-S", "-c",
                          "import sys, gnnperf.ci.nightly\n"
                          "heavy = {'torch', 'numpy', 'torch_geometric', 'ruptures', 'scipy'}\n"
                          "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))"],
                         cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr[-2000:]
    run = subprocess.run([sys.executable, "-S", "-m", "gnnperf.ci.nightly", "--help"], cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and "select" in run.stdout, run.stderr[-2000:]
