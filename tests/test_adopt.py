"""``gnnperf adopt`` as another repository uses it: from a virtual
environment that holds gnnperf's wheel and no clone of gnnperf, in a
stand-in model package's repository (tests/standin.py), then the generated
CPU workflow's steps, in order, in a fresh clone of that repository: asv
numbers for two of its commits and a gate table.
"""
from __future__ import annotations

import json
import math
import shutil
import subprocess
from pathlib import Path

import pytest

from gnnperf.ci import policy
from standin import MODEL, make_model_repo
from wheel_env import gnnperf_wheel, wheel_venv  # noqa: F401 -- fixtures
from workflow_steps import Runner, load, machine_find_links

ROOT = Path(__file__).resolve().parent.parent
WRITTEN = [".gnnperf/asv.conf.json", ".gnnperf/benchmarks/__init__.py",
           *(f".github/{'workflows'}/gnnperf-{name}.yml" for name in ("cpu", "gpu-gate", "nightly")),
           ".github/dependabot.yml", ".github/actionlint.yaml"]

# asv runs in the clone's own environment folder, so no lock with the
# smoke's: the scheduler may run it beside the rest (it is the file's long pole).
pytestmark = [pytest.mark.asv, pytest.mark.e2e]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture
def adopted(tmp_path, wheel_venv):
    """The stand-in after ``gnnperf adopt``, run with the wheel's gnnperf
    from a folder of its own, its files committed as a maintainer would."""
    repo = make_model_repo(tmp_path / "mypkg-repo")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = wheel_venv.run("gnnperf", "adopt", "--repo", str(repo), "--models", MODEL,
                          "--python", "3.11", cwd=elsewhere)
    assert done.returncode == 0, done.stdout + done.stderr
    for name in WRITTEN:
        assert (repo / name).is_file(), name
        assert f"wrote {name}" in done.stdout
    # The gnnperf that wrote it is the wheel's, not this checkout's.
    where = wheel_venv.python_json("import gnnperf, json; print(json.dumps(gnnperf.__file__))",
                                   cwd=elsewhere)
    assert str(ROOT) not in where
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "gnnperf: asv suite and workflows")
    return repo


def test_adopt_writes_workflows_that_keep_every_rule(adopted, wheel_venv, tmp_path):
    checked = wheel_venv.run("gnnperf", "check-workflows", cwd=adopted)
    assert checked.returncode == 0 and "every workflow keeps the rules" in checked.stdout, \
        checked.stdout + checked.stderr
    assert policy.check_repository(adopted) == []
    from test_workflows import actionlint_findings
    linter, findings = actionlint_findings(tmp_path, root=adopted)
    assert findings == [], f"{linter}:\n" + "\n".join(findings)
    conf = json.loads((adopted / ".gnnperf" / "asv.conf.json").read_text())
    assert conf["repo"] == ".." and conf["project"] == "mypkg" and conf["branches"] == ["main"]
    # Written again only when asked.
    again = wheel_venv.run("gnnperf", "adopt", "--models", MODEL, cwd=adopted)
    assert again.returncode == 2 and len(again.stderr.strip().splitlines()) == 1


def test_the_generated_cpu_workflow_runs_in_a_fresh_clone(adopted, wheel_venv, tmp_path):
    clone = tmp_path / "clone"
    _git(tmp_path, "clone", "-q", str(adopted), str(clone))
    base, head = _git(clone, "rev-parse", "v0.1"), _git(clone, "rev-parse", "v0.2")
    workflow = load(clone / ".github" / "workflows" / "gnnperf-cpu.yml")
    purelib = wheel_venv.python_json(
        "import json, sysconfig; print(json.dumps(sysconfig.get_paths()['purelib']))", cwd=clone)
    shared = wheel_venv.shared
    site = ":".join(filter(None, [purelib, str(shared.parent / "site") if shared else ""]))

    def stock_the_wheelhouse(env: dict) -> None:
        # gnnperf from "the user's index": its wheel where the job's pip looks.
        wheelhouse = Path(env["RUNNER_TEMP"]) / "wheelhouse"
        wheelhouse.mkdir()
        shutil.copy(wheel_venv.wheel, wheelhouse)

    runner = Runner(clone, tmp_path / "runner", python=str(wheel_venv.python), site=site,
                    env={"BASE": base, "HEAD": head, "PIP_FIND_LINKS": machine_find_links(),
                         "TORCH_INDEX_URL": (tmp_path / "no-index").as_uri(),
                         "ASV_PYTHONPATH": str(shared) if shared else site,
                         # One case, the work gate: the time gate's cold workers are
                         # what the gate's own tests time.
                         "GNNPERF_GATE_OPTIONS": "--variants baseline --no-time",
                         "GNNPERF_ASV_VARIANTS": "baseline"},
                    actions={"actions/checkout": lambda step, env: None,
                             "actions/upload-artifact": lambda step, env: None},
                    timeout=900)
    env = runner.run_job(workflow, "gate", before=stock_the_wheelhouse)
    print("\n".join(f"{s:.1f} s  {name}" for name, s in runner.timings))
    summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text()
    # asv's numbers for both commits, from the results it wrote.
    results = clone / ".gnnperf" / ".asv" / "results" / "gnnperf-ci-cpu"
    measured = {}
    for path in results.glob("*.json"):
        data = json.loads(path.read_text())
        if "commit_hash" in data:
            row = dict(zip(data["result_columns"],
                           data["results"]["training.TrainStep.time_train_step"]))
            # The repository's own model is the case's (settings.json written by adopt).
            assert row["params"] == [["'cora'"], ["'baseline'"], [f"'{MODEL}'"]], row["params"]
            measured[data["commit_hash"]] = row["result"]
    assert set(measured) == {base, head}, measured
    assert all(len(v) == 1 and math.isfinite(v[0]) and v[0] > 0 for v in measured.values())
    # The gate's table, the model repository's case, the gnnperf it fixed.
    gate = json.loads((Path(env["RUNNER_TEMP"]) / "gate.json").read_text())
    assert any(MODEL in case for case in json.dumps(gate).split('"')), gate.keys()
    assert f"baseline@cora@{MODEL}" in summary
