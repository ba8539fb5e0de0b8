"""``gnnperf adopt``: what another repository (a library such as
torch_geometric, or a team's model package) commits to run gnnperf on its
own commits, written by one command from a pip-installed gnnperf.

It writes the asv suite's configuration for that repository's commits
(:func:`gnnperf.asv_init.write_adopting_suite`: ``.gnnperf/``, the suite
itself being the installed gnnperf's), the three workflows
(:mod:`gnnperf.ci.workflows`), Dependabot's watch on the actions' pins and
actionlint's runner label, then checks every workflow of the repository
against :mod:`gnnperf.ci.policy`: what it wrote must keep every rule, and
what the repository already had is reported.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gnnperf.errors import GnnperfError

#: The workflow files written, from the templates of the same names.
WORKFLOW_FILES = {"cpu.yml": "gnnperf-cpu.yml", "gpu-gate.yml": "gnnperf-gpu-gate.yml",
                  "nightly.yml": "gnnperf-nightly.yml"}
DEPENDABOT = """\
# Keeps the actions' commit-SHA pins of the workflows current (gnnperf adopt).
version: 2
updates:
  - package-ecosystem: github-actions
    directory: /
    schedule:
      interval: weekly
"""
ACTIONLINT = """\
# actionlint's configuration: the GPU runner's custom label (gnnperf adopt).
self-hosted-runner:
  labels:
    - gpu
"""


def _git(repo: Path, *args: str) -> str | None:
    from gnnperf.ci.nightly import _git_run
    done = _git_run(repo, *args)
    return done.stdout.strip() if done.returncode == 0 else None


def default_branch(repo: Path) -> str:
    """The branch the nightly follows: origin's HEAD, else the one checked out."""
    remote_head = _git(repo, "symbolic-ref", "--short", "refs/remotes/origin/HEAD")
    if remote_head and "/" in remote_head:
        return remote_head.split("/", 1)[1]
    return _git(repo, "branch", "--show-current") or "main"


def project_name(repo: Path) -> str | None:
    """The distribution name in the repository's ``pyproject.toml``."""
    import tomllib
    path = repo / "pyproject.toml"
    if not path.is_file():
        return None
    try:
        return tomllib.loads(path.read_text(encoding="utf-8")).get("project", {}).get("name")
    except tomllib.TOMLDecodeError as exc:
        raise GnnperfError(f"{path}: not valid TOML ({exc}); fix it or give --project") from None


def adopt(repo: Path, models: list[str], project: str | None = None,
          branch: str | None = None, python: str | None = None,
          gnnperf_requirement: str | None = None, force: bool = False) -> list[Path]:
    """Writes everything adopting needs into :obj:`repo`; returns the paths.
    Every check (the repository, the models, the rendered workflows against
    the policy) comes before the first file is written."""
    import gnnperf
    from gnnperf.asv_init import ADOPTED_DIR, suite_config, write_adopting_suite
    from gnnperf.ci import policy
    from gnnperf.ci.workflows import Settings, render

    repo = Path(repo).resolve()
    if _git(repo, "rev-parse", "--show-toplevel") != str(repo):
        raise GnnperfError(f"--repo {repo}: not the top of a git repository; give its top folder")
    project = project or project_name(repo)
    if not project:
        raise GnnperfError(f"--repo {repo}: no pyproject.toml with [project] name; give "
                           f"--project (the distribution name pip installs)")
    branch = branch or default_branch(repo)
    python = python or f"{sys.version_info.major}.{sys.version_info.minor}"
    requirement = gnnperf_requirement or f"gnnperf=={gnnperf.__version__}"
    workflows = repo / ".github" / "workflows"
    existing = [workflows / name for name in WORKFLOW_FILES.values() if (workflows / name).exists()]
    if existing and not force:
        raise GnnperfError(f"{existing[0]} exists; give --force to write it again")
    suite = suite_config()
    folder = ADOPTED_DIR
    settings = Settings(asv_config=f"{folder}/asv.conf.json",
                        asv_results=f"{folder}/{suite['results_dir']}",
                        asv_html=f"{folder}/{suite['html_dir']}", gnnperf_requirement=requirement,
                        python=python, torch=suite["matrix"]["req"]["torch"][0],
                        default_branch=branch, models=",".join(models) or "gcn",
                        # A src layout: the gate puts each commit's src/ first on the path
                        # (its top holds no package; the editable install is the head's).
                        gate_options="--library-subdir src" if (repo / "src").is_dir() else "")
    rendered = {name: render(template, settings) for template, name in WORKFLOW_FILES.items()}
    for name, text in rendered.items():
        for finding in policy.check_workflow(policy.parse_workflow(text, name), name):
            raise AssertionError(f"gnnperf's template breaks a rule: {finding}")
    written = write_adopting_suite(repo, project=project, branches=[branch], models=models,
                                   python=python, gnnperf_requirement=requirement,
                                   force=force)
    workflows.mkdir(parents=True, exist_ok=True)
    for name, text in rendered.items():
        (workflows / name).write_text(text)
        written.append(workflows / name)
    for name, text in (("dependabot.yml", DEPENDABOT), ("actionlint.yaml", ACTIONLINT)):
        path = repo / ".github" / name
        if not path.exists():
            path.write_text(text)
            written.append(path)
    others = [finding for finding in policy.check_repository(repo)
              if finding.workflow not in rendered]
    for finding in others:
        print(f"note: {finding}", file=sys.stderr)
    if others:
        print(f"note: {len(others)} finding(s) in this repository's other workflows "
              f"(gnnperf check-workflows lists them): a self-hosted GPU runner is safe only "
              f"when every workflow keeps the rules", file=sys.stderr)
    return written


def add_parser(sub) -> None:
    """``gnnperf adopt``'s options (registered by :mod:`gnnperf.cli`)."""
    from gnnperf.cli_help import command_parser
    parser = command_parser(
        sub, "adopt", adopt_command, help="set up gnnperf in another repository: the asv suite for its "
                           "commits and its CPU, GPU and nightly workflows",
        description="Writes into --repo (a library's or a model package's git repository): "
                    ".gnnperf/asv.conf.json for its commits with the installed gnnperf's "
                    "suite, .github/workflows/gnnperf-{cpu,gpu-gate,nightly}.yml, and "
                    "Dependabot's and actionlint's settings where absent; then checks every "
                    "workflow against the GPU-runner rules (docs/workflows.md).")
    parser.add_argument("--repo", type=Path, default=Path("."),
                        help="the repository's top folder (default: here)")
    parser.add_argument("--models", default="gcn",
                        help="the models the suite and the gate train: gcn, sage, gat, gin or "
                             "the repository's own as module:function (default: %(default)s)")
    parser.add_argument("--project", help="its distribution name (default: pyproject.toml's)")
    parser.add_argument("--branch", help="the branch the nightly follows (default: origin's "
                                         "HEAD, else the one checked out)")
    parser.add_argument("--python", help="the Python the workflows and asv use, e.g. 3.11 "
                                         "(default: this one's)")
    parser.add_argument("--gnnperf-requirement",
                        help="what pip installs as gnnperf in CI and in asv's environments "
                             "(default: gnnperf==<this version>; a git URL works too)")
    parser.add_argument("--force", action="store_true", help="write over gnnperf's own files")


def adopt_command(args: argparse.Namespace) -> int:
    # The repository's own models are checked by the suite's writer, with
    # the repository on the path (a model package is not installed here).
    models = [name.strip() for name in args.models.split(",") if name.strip()]
    written = adopt(args.repo, models, args.project, args.branch,
                    args.python, args.gnnperf_requirement, args.force)
    top = Path(args.repo).resolve()
    for path in written:
        print(f"wrote {path.relative_to(top)}")
    print("next: commit these files; set the repository variable GNNPERF_GPU_RUNNER=true once "
          "an ephemeral GPU runner labelled 'gpu' is registered; see gnnperf's "
          "docs/workflows.md")
    return 0


__all__ = ["ACTIONLINT", "DEPENDABOT", "WORKFLOW_FILES", "add_parser", "adopt",
           "adopt_command", "default_branch", "project_name"]
