"""Runs a workflow job's ``run:`` steps, in order, as a GitHub runner would,
with stand-ins for the actions it uses (checkout, setup-python, artifacts,
caches): how tests run the CPU workflows in a fresh clone and the nightly's
jobs against a scratch repository.

The stand-ins are the one place where a run here differs from GitHub's:
``actions/setup-python`` becomes this interpreter with a site-packages that
already holds every requirement (pip then installs nothing, and
``PIP_NO_INDEX`` makes certain nothing is downloaded), and the other
actions become what they do to the workspace (a clone, a copied folder).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Callable

import yaml


def load(path: Path) -> dict:
    data = yaml.safe_load(Path(path).read_text())
    if True in data:  # YAML 1.1 reads the key `on` as a boolean
        data["on"] = data.pop(True)
    return data


def uses(step: dict) -> str:
    return step.get("uses", "").split("@")[0]


def setup_python_stand_in(bin_dir: Path, python: str | None = None,
                          site: str | None = None) -> dict:
    """actions/setup-python's stand-in: :obj:`python` (default: this
    interpreter) as ``python``, its venvs seeing :obj:`site` (default: this
    environment's site-packages), so their pip installs find every
    requirement satisfied and download nothing. Returns the variables to set."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in ("python", "python3"):
        link = bin_dir / name
        if not link.exists():
            link.symlink_to(python or sys.executable)
    site = site or sysconfig.get_paths()["purelib"]
    for tool, module in (("pytest", "pytest"), ("asv", "asv"), ("gnnperf", "gnnperf")):
        script = bin_dir / tool
        script.write_text(f'#!/bin/sh\nexec python -m {module} "$@"\n')
        script.chmod(0o755)
    return {"PYTHONPATH": site, "ASV_PYTHONPATH": site,  # asv passes only its own on
            "PIP_NO_INDEX": "1", "PIP_NO_BUILD_ISOLATION": "0"}


def apply_github_files(env: dict, files: dict) -> None:
    """What the runner does after a step: GITHUB_ENV and GITHUB_PATH."""
    lines = iter(files["GITHUB_ENV"].read_text().splitlines())
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


def clean_env(home: Path) -> dict:
    """This process's environment without what a runner would not have."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "GITHUB_", "RUNNER_", "ASV_", "PIP_", "GNNPERF_"))
           and k not in ("PYTHONPATH", "VIRTUAL_ENV", "TORCHINDUCTOR_CACHE_DIR")}
    env["HOME"] = str(home)  # asv machine writes ~/.asv-machine.json
    return env


def machine_find_links() -> str:
    """Where this machine's pip finds wheels without an index (its
    ``find-links``, from the environment or the user's pip configuration,
    which a runner's fresh HOME would hide): where the stand-in for the
    torch index finds torch."""
    done = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True,
                          text=True)
    links = [line.split("=", 1)[1].strip().strip("'") for line in done.stdout.splitlines()
             if line.split("=", 1)[0].endswith(".find-links")]
    return " ".join(dict.fromkeys(filter(None, [os.environ.get("PIP_FIND_LINKS", ""), *links])))


_EXPR = re.compile(r"\$\{\{\s*(env|runner)\.([A-Za-z_]+)\s*\}\}")


def expand(text: str, env: dict) -> str:
    """``${{ env.X }}`` and ``${{ runner.temp }}`` as the runner fills them in."""
    def value(match: re.Match) -> str:
        scope, name = match.groups()
        return env["RUNNER_TEMP"] if scope == "runner" and name == "temp" else env[name]
    return _EXPR.sub(value, str(text))


class Runner:
    """One job's steps in :obj:`workspace`.

    Args:
        workspace: the checkout's folder (GITHUB_WORKSPACE).
        tmp: a folder for the runner's files, RUNNER_TEMP and HOME.
        env: variables besides the workflow's and the job's (they win).
        actions: a stand-in per action (``uses`` without the ref), or per
            ``run:`` step by its name, called with the step and the
            environment; setup-python has a default.
        path_first: folders kept first on PATH whatever a step adds.
    """

    def __init__(self, workspace: Path, tmp: Path, env: dict | None = None,
                 actions: dict[str, Callable[[dict, dict], None]] | None = None,
                 path_first: list[Path] = (), python: str | None = None, site: str | None = None,
                 timeout: int = 300):
        self.workspace, self.tmp = Path(workspace), Path(tmp)
        self.extra = dict(env or {})
        self.actions = dict(actions or {})
        self.path_first = [str(p) for p in path_first]
        self.python, self.site = python, site
        self.timeout = timeout
        self.timings: list[tuple[str, float]] = []

    def run_job(self, workflow: dict, job_id: str, when: Callable[[dict], bool] | None = None,
                before: Callable[[dict], None] | None = None) -> dict:
        """Runs :obj:`job_id`'s steps; a step with an ``if:`` runs when
        :obj:`when` says so (default: every step); :obj:`before` gets the
        job's environment first (RUNNER_TEMP made). Returns the environment
        the last step saw."""
        job = workflow["jobs"][job_id]
        home = self.tmp / "home"
        home.mkdir(parents=True, exist_ok=True)
        runner_temp = self.tmp / f"runner-temp-{job_id}"
        if runner_temp.exists():
            shutil.rmtree(runner_temp)
        runner_temp.mkdir(parents=True)
        files = {k: runner_temp.parent / f"{job_id}-{k.lower()}" for k in (
            "GITHUB_ENV", "GITHUB_PATH", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY")}
        for f in files.values():
            f.write_text("")
        env = clean_env(home)
        env.update({k: str(v) for k, v in files.items()})
        env.update({"CI": "true", "GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(self.workspace),
                    "RUNNER_TEMP": str(runner_temp), "RUNNER_OS": "Linux"})
        for scope in (workflow.get("env") or {}, job.get("env") or {}):
            for key, value in scope.items():
                if "${{" not in str(value):
                    env[key] = str(value)
        env.update(self.extra)
        if before is not None:
            before(env)
        failed: StepFailed | None = None
        for step in job["steps"]:
            name = step.get("name") or step.get("uses") or step["run"].splitlines()[0]
            condition = str(step.get("if", ""))
            if failed is not None and "always()" not in condition:
                continue  # after a failed step only if: always() steps run
            if condition and "always()" not in condition and not (when or (lambda s: True))(step):
                continue
            action = uses(step)
            if action == "actions/setup-python" and action not in self.actions:
                bin_dir = self.tmp / "python-bin"
                env.update(setup_python_stand_in(bin_dir, self.python, self.site))
                env.update(self.extra)  # the test's values win
                env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
                continue
            if name in self.actions:  # a run: step stood in by name
                self.actions[name](step, env)
                apply_github_files(env, files)
                continue
            if action:
                assert action in self.actions, f"no stand-in for {action}"
                try:
                    self.actions[action](step, env)
                except StepFailed:
                    if not step.get("continue-on-error"):
                        raise
                continue
            script = step["run"]
            assert "${{" not in script, f"{name}: a GitHub expression inside a script"
            step_env = dict(env)
            for key, value in (step.get("env") or {}).items():
                if key in self.extra:  # the test's value for an expression
                    step_env[key] = self.extra[key]
                elif "${{" not in str(value) or _EXPR.search(str(value)):
                    step_env[key] = expand(value, env)
            step_env["PATH"] = os.pathsep.join([*self.path_first, step_env["PATH"]])
            start = time.perf_counter()
            done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
                                  cwd=self.workspace, env=step_env, capture_output=True, text=True,
                                  timeout=self.timeout)
            self.timings.append((name, time.perf_counter() - start))
            apply_github_files(env, files)
            if done.returncode != 0 and failed is None:
                failed = StepFailed(name, done.returncode, done.stdout, done.stderr)
        if failed is not None:
            raise failed
        return env


class StepFailed(AssertionError):
    """A run: step exited non-zero."""

    def __init__(self, name: str, code: int, stdout: str, stderr: str):
        super().__init__(f"step {name!r} exited {code}\n{stdout[-3000:]}\n{stderr[-3000:]}")
        self.name, self.code, self.stdout, self.stderr = name, code, stdout, stderr
