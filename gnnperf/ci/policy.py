"""The rules a repository's workflows keep once a self-hosted GPU runner
serves them, checked on the parsed files (``gnnperf check-workflows``, and
every workflow ``gnnperf adopt`` writes).

A self-hosted runner runs whatever a job sends it, and for a pull request
GitHub runs the workflow file of the pull request's own merge commit: a
condition in the file (a label, an author check) is only as strong as the
file a stranger can edit. So the rules are about which files can reach the
box at all, and what a job there can leave behind for the next one:

- no workflow with a self-hosted job is triggered by an event whose
  workflow file or code a pull request controls (:data:`UNTRUSTED_EVENTS`);
  ``pull_request_target`` is used nowhere;
- a self-hosted job runs only where the repository variable
  ``GNNPERF_GPU_RUNNER`` says a GPU runner exists, holds no write
  permission, has a concurrency group of its own that queues instead of
  cancelling, a timeout, no Actions cache (an entry a maintainer-started
  pull-request gate saves is readable by the nightly), and moves its home,
  pip, Inductor and tool caches under ``$RUNNER_TEMP`` before anything is
  installed;
- a hosted job that fails unless the self-hosted job succeeded follows each
  one, so a skipped or cancelled gate never reads as a pass;
- every action is pinned by a full commit SHA, and Dependabot keeps the
  pins (``.github/dependabot.yml``);
- torch comes from one explicit index (``--index-url``, or a wheelhouse
  filled from it: ``--find-links``); no extra index;
- a checkout keeps no credentials, except in a hosted job that pushes
  (``contents: write``) in a workflow no pull request triggers;
- no ``${{ }}`` expression inside a ``run:`` script (values reach scripts
  through ``env:``, never spliced into the shell);
- Pages deploy only from the default branch.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from gnnperf.errors import GnnperfError

#: Events whose workflow file, or whose checked-out code, a pull request's
#: author controls, or that a stranger can trigger with a comment.
UNTRUSTED_EVENTS = frozenset({"pull_request", "pull_request_target", "pull_request_review",
                              "pull_request_review_comment", "issue_comment", "workflow_run",
                              "discussion_comment"})
#: The only events a workflow with a self-hosted job may have: each runs this
#: repository's own workflow file, started by someone with write access or
#: by the repository itself. Anything else (an issue, a fork, a star, a
#: comment, a pull request) is refused, not just the known-bad list above.
TRUSTED_EVENTS = frozenset({"workflow_dispatch", "schedule", "push", "merge_group"})
#: GitHub-hosted runner labels; any other runs-on (a custom label, a runner
#: group, an expression) may reach a self-hosted machine.
_HOSTED = re.compile(r"^(ubuntu|windows|macos)-[\w.-]+$")
#: The repository variable that says a self-hosted GPU runner exists.
GPU_VARIABLE = "GNNPERF_GPU_RUNNER"
#: What a self-hosted job moves under $RUNNER_TEMP before it installs anything.
ISOLATED_CACHES = ("HOME", "PIP_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "AGENT_TOOLSDIRECTORY")
_FULL_SHA = re.compile(r"^[^@\s]+@[0-9a-f]{40}$")
_TORCH_PIP = re.compile(r"pip\s+(install|download)\b[^\n]*(?<![\w-])torch(?![\w-])")


@dataclass(frozen=True)
class Finding:
    """One broken rule: the workflow file, the job (or "" for the file), what is wrong."""
    workflow: str
    job: str
    message: str

    def __str__(self) -> str:
        where = f"{self.workflow}: job {self.job}" if self.job else self.workflow
        return f"{where}: {self.message}"


def parse_workflow(text: str, name: str) -> dict:
    """A workflow's text, parsed (YAML 1.1 reads the key ``on`` as True)."""
    import yaml
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise GnnperfError(f"{name}: not valid YAML ({exc})") from None
    if not isinstance(data, dict):
        raise GnnperfError(f"{name}: not a workflow (no mapping at the top)")
    if True in data:
        data["on"] = data.pop(True)
    return data


def load_workflow(path: Path) -> dict:
    """A workflow file, parsed."""
    return parse_workflow(Path(path).read_text(encoding="utf-8"), str(path))


def triggers(workflow: dict) -> set[str]:
    on = workflow.get("on") or {}
    if isinstance(on, str):
        return {on}
    return set(on)


def labels(job: dict) -> list[str]:
    runs_on = job.get("runs-on", [])
    if isinstance(runs_on, dict):
        runs_on = runs_on.get("labels", [])
    return [runs_on] if isinstance(runs_on, str) else [str(x) for x in runs_on]


def self_hosted(job: dict) -> bool:
    """Whether the job may run on a machine GitHub does not host: any
    ``runs-on`` other than GitHub-hosted labels (a runner group, a custom
    label, an expression whose value the file does not fix)."""
    if "runs-on" not in job:
        return False  # a call of a reusable workflow: checked through it
    runs_on = job["runs-on"]
    if isinstance(runs_on, dict) and runs_on.get("group"):
        return True
    found = labels(job)
    return not found or any(not _HOSTED.match(label) for label in found)


def _steps(job: dict) -> list[dict]:
    return [s for s in job.get("steps") or [] if isinstance(s, dict)]


def _uses(step: dict) -> str:
    return str(step.get("uses", "")).split("@")[0]


def _writes(permissions) -> list[str]:
    if permissions == "write-all":
        return ["write-all"]
    if isinstance(permissions, dict):
        return [k for k, v in permissions.items() if v == "write"]
    return []


def _needs(job: dict) -> list[str]:
    needs = job.get("needs") or []
    return [needs] if isinstance(needs, str) else list(needs)


def check_workflow(workflow: dict, name: str) -> list[Finding]:
    """Every rule of the module docstring broken by one parsed workflow."""
    found: list[Finding] = []

    def add(job: str, message: str) -> None:
        found.append(Finding(name, job, message))

    events = triggers(workflow)
    jobs = workflow.get("jobs") or {}
    hosted_by_self = {job_id for job_id, job in jobs.items() if self_hosted(job)}
    if "pull_request_target" in events:
        add("", "pull_request_target runs a fork's pull request with this repository's token; "
                "use pull_request on GitHub-hosted runners")
    if hosted_by_self and events - TRUSTED_EVENTS:
        add("", f"self-hosted jobs in a workflow triggered by "
                f"{', '.join(sorted(events - TRUSTED_EVENTS))}: only "
                f"{', '.join(sorted(TRUSTED_EVENTS))} run this repository's own file; a pull "
                f"request controls its copy")
    if hosted_by_self and "concurrency" in workflow:
        add("", "a workflow-level concurrency group cancels or queues every job together; give "
                "each job its own")
    for field_, value in (("env", workflow.get("env")),):
        if value and any("EXTRA_INDEX" in str(k).upper() for k in value):
            add("", f"{field_}: an extra package index; install torch from one explicit index")

    for job_id, job in jobs.items():
        steps = _steps(job)
        if job_id in hosted_by_self:
            _check_self_hosted(job_id, job, steps, add)
            followers = [other_id for other_id, other in jobs.items()
                         if job_id in _needs(other) and not self_hosted(other)
                         and "always()" in str(other.get("if", ""))
                         and f"needs.{job_id}.result" in str(other)]
            if not followers:
                add(job_id, "no hosted job with if: always() reads needs."
                            f"{job_id}.result: a skipped or cancelled run would read as passing")
        writes = _writes(job.get("permissions", workflow.get("permissions")))
        for step in steps:
            uses = str(step.get("uses", ""))
            if uses and not uses.startswith(("./", "docker://")) and not _FULL_SHA.match(uses):
                add(job_id, f"{uses}: pin the action by its full commit SHA (Dependabot keeps it)")
            if _uses(step) == "actions/checkout":
                persists = (step.get("with") or {}).get("persist-credentials", True)
                may_push = ("contents" in writes and not self_hosted(job)
                            and not events & UNTRUSTED_EVENTS)
                if persists is not False and not may_push:
                    add(job_id, "actions/checkout without persist-credentials: false leaves the "
                                "token in .git/config for every later step")
            script = str(step.get("run", ""))
            if "${{" in script:
                add(job_id, f"step {step.get('name', script[:30])!r}: a ${{{{ }}}} expression "
                            f"inside a script; pass it through env:")
            for env in (step.get("env") or {}, job.get("env") or {}):
                if any("EXTRA_INDEX" in str(k).upper() for k in env):
                    add(job_id, "an extra package index; install torch from one explicit index")
            if "extra-index-url" in script:
                add(job_id, "pip --extra-index-url mixes indexes; install torch from one "
                            "explicit index (--index-url)")
            for line in script.replace("\\\n", " ").splitlines():
                if _TORCH_PIP.search(line) and not any(
                        ok in line for ok in ("--index-url", "--no-index", "--find-links")):
                    add(job_id, f"{line.strip()[:60]!r}: torch without --index-url")
            if _uses(step) == "actions/deploy-pages":
                condition = str(job.get("if", ""))
                if "default_branch" not in condition:
                    add(job_id, "deploys Pages without an if: on the default branch "
                                "(github.event.repository.default_branch)")
    return found


def _check_self_hosted(job_id: str, job: dict, steps: list[dict], add) -> None:
    if f"vars.{GPU_VARIABLE}" not in str(job.get("if", "")):
        add(job_id, f"a self-hosted job without if: vars.{GPU_VARIABLE} == 'true' (runs "
                    f"where no GPU runner exists and waits forever)")
    if _writes(job.get("permissions")) or "permissions" not in job:
        add(job_id, "a self-hosted job needs its own permissions, read-only (contents: read)")
    concurrency = job.get("concurrency")
    if not isinstance(concurrency, dict) or not concurrency.get("group"):
        add(job_id, "a self-hosted job needs a concurrency group of its own")
    elif concurrency.get("cancel-in-progress") not in (None, False):
        add(job_id, "cancel-in-progress on a self-hosted job: a cancelled run is no verdict")
    if "timeout-minutes" not in job:
        add(job_id, "a self-hosted job needs timeout-minutes")
    isolated = None
    for index, step in enumerate(steps):
        uses = _uses(step)
        if uses.startswith("actions/cache"):
            add(job_id, "actions/cache on the GPU box: an entry one job saves, another restores")
        if (step.get("with") or {}).get("cache"):
            add(job_id, f"{uses} with cache: the Actions cache is shared between jobs")
        script = str(step.get("run", ""))
        if isolated is None and all(re.search(rf"\b{var}=\"?\$RUNNER_TEMP", script)
                                    for var in ISOLATED_CACHES):
            isolated = index
        installs = uses.startswith("actions/setup-") or "pip " in script
        if installs and isolated is None:
            add(job_id, f"step {step.get('name', uses)!r} installs before the caches "
                        f"({', '.join(ISOLATED_CACHES)}) are moved under $RUNNER_TEMP")
            break
    if isolated is None:
        add(job_id, f"no step moves {', '.join(ISOLATED_CACHES)} under $RUNNER_TEMP")


def check_repository(root: Path) -> list[Finding]:
    """Every workflow under ``.github/workflows`` of :obj:`root`, and
    Dependabot's configuration for the actions' pins."""
    root = Path(root)
    folder = root / ".github" / "workflows"
    files = sorted([*folder.glob("*.yml"), *folder.glob("*.yaml")]) if folder.is_dir() else []
    if not files:
        raise GnnperfError(f"{folder}: no workflow files")
    found: list[Finding] = []
    parsed = {path.name: load_workflow(path) for path in files}
    for name, workflow in parsed.items():
        found += check_workflow(workflow, name)
        found += _reusable_calls(workflow, name, parsed)
    if not _dependabot_watches_actions(root):
        found.append(Finding("dependabot.yml", "", "no package-ecosystem: github-actions "
                                                   "update: nothing keeps the SHA pins current"))
    return found


def _reusable_calls(workflow: dict, name: str, parsed: dict[str, dict]) -> list[Finding]:
    """A job that calls a reusable workflow of this repository runs its jobs
    under the caller's events: one with a self-hosted job may only be called
    from a workflow of :data:`TRUSTED_EVENTS`; a call of another repository's
    workflow is pinned like an action."""
    found = []
    events = triggers(workflow)
    for job_id, job in (workflow.get("jobs") or {}).items():
        called = str(job.get("uses", ""))
        if not called:
            continue
        if called.startswith("./.github/workflows/"):
            target = parsed.get(called.rsplit("/", 1)[-1])
            reaches = target is None or any(self_hosted(j) for j in (target.get("jobs") or {}).values())
            if reaches and events - TRUSTED_EVENTS:
                found.append(Finding(name, job_id, f"calls {called}, which has self-hosted jobs "
                                                   f"(or cannot be read), from "
                                                   f"{', '.join(sorted(events - TRUSTED_EVENTS))}"))
        elif not _FULL_SHA.match(called):
            found.append(Finding(name, job_id, f"{called}: pin the reusable workflow by its full "
                                               f"commit SHA"))
    return found


def _dependabot_watches_actions(root: Path) -> bool:
    import yaml
    for name in ("dependabot.yml", "dependabot.yaml"):
        path = root / ".github" / name
        if path.is_file():
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
            return any(u.get("package-ecosystem") == "github-actions"
                       for u in data.get("updates") or [])
    return False


def add_parser(sub) -> None:
    """``gnnperf check-workflows``'s options (registered by :mod:`gnnperf.cli`)."""
    from gnnperf.cli_help import command_parser
    parser = command_parser(
        sub, "check-workflows", check_workflows_command, help="check a repository's workflows against the GPU-runner "
                                     "rules (docs/workflows.md)",
        description="Parses every file in .github/workflows and lists each broken rule: "
                    "self-hosted jobs reachable from pull requests, unpinned actions, shared "
                    "caches, a gate whose skip reads as a pass, mixed package indexes. Exit "
                    "1 when any rule is broken.")
    parser.add_argument("--repo", type=Path, default=Path("."),
                        help="the repository's top (default: here)")


def check_workflows_command(args) -> int:
    found = check_repository(args.repo)
    for finding in found:
        print(finding)
    print(f"{len(found)} finding(s)" if found else "every workflow keeps the rules")
    return 1 if found else 0


__all__ = ["Finding", "GPU_VARIABLE", "ISOLATED_CACHES", "TRUSTED_EVENTS", "UNTRUSTED_EVENTS",
           "add_parser", "check_repository", "check_workflow", "check_workflows_command",
           "load_workflow", "parse_workflow"]
