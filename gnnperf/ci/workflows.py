"""The workflows a repository runs gnnperf with, rendered from the
templates in ``gnnperf/ci/templates``: a CPU pull-request gate on
GitHub-hosted runners (``cpu.yml``), a GPU gate a maintainer starts after
review or the merge queue runs (``gpu-gate.yml``), and the nightly that
keeps the history on a results branch and publishes it (``nightly.yml``).

gnnperf's own GPU workflows are these templates rendered for gnnperf
(:func:`gnnperf_settings`), so what an adopting repository gets is what
gnnperf runs; a test keeps the two identical.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from importlib import resources

#: Every action the templates use, pinned by commit SHA (the tag in the
#: comment is what Dependabot reads and raises).
ACTIONS = {
    "checkout": ("actions/checkout", "11d5960a326750d5838078e36cf38b85af677262", "v4.4.0"),
    "setup-python": ("actions/setup-python", "a26af69be951a213d495a4c3e4e4022e16d87065",
                     "v5.6.0"),
    "upload-artifact": ("actions/upload-artifact", "ea165f8d65b6e75b540449e92b4886f43607fa02",
                        "v4.6.2"),
    "download-artifact": ("actions/download-artifact",
                          "d3f86a106a0bac45b974a628896c90dbdf5c8093", "v4.3.0"),
    "setup-node": ("actions/setup-node", "49933ea5288caeca8642d1e84afbd3f7d6820020", "v4.4.0"),
    "configure-pages": ("actions/configure-pages", "983d7736d9b0ae728b81ab479565c72886d7745b",
                        "v5.0.0"),
    "upload-pages-artifact": ("actions/upload-pages-artifact",
                              "56afc609e74202658d3ffba0e8f6dda462b719fa", "v3.0.1"),
    "deploy-pages": ("actions/deploy-pages", "d6db90164ac5ed86f2b6aed7e0febac5b3c0c03e",
                     "v4.0.5"),
}
#: The benchmarks a pull request's GPU gate compares: every variant's step
#: time and CUDA peak, and the exact work metrics.
GATE_BENCH = r"^(training\.(TrainStep\.|CudaStepMemory)|work_metrics\.)"
#: The CPU gate's asv figures: the step times of the quick profile.
CPU_BENCH = r"^training\.TrainStep\.time_"
TEMPLATES = ("cpu.yml", "gpu-gate.yml", "nightly.yml")


@dataclass(frozen=True)
class Settings:
    """What differs between repositories in the rendered workflows.

    Args:
        asv_config: asv.conf.json's path from the repository's top.
        asv_results: asv's results folder, as asv.conf.json puts it.
        asv_html: asv's HTML folder.
        gnnperf_requirement: what pip installs as gnnperf (a version pin, a
            git URL; ``.`` in gnnperf's own repository).
        python: the Python the jobs set up (asv.conf.json's ``pythons``).
        torch: the torch release, as asv.conf.json's matrix pins it.
        default_branch: the branch the nightly follows and Pages come from.
        models: the repository's models by import path, comma-separated.
        gate_options: options the CPU gate always passes (``--library-subdir
            src`` for a src layout).
    """
    asv_config: str
    asv_results: str
    asv_html: str
    gnnperf_requirement: str
    python: str
    torch: str
    default_branch: str = "main"
    models: str = "gcn"
    gate_options: str = ""


def gnnperf_settings() -> Settings:
    """gnnperf's own repository: its asv.conf.json at the top (the Python
    and torch its GPU workflows set up are that file's), gnnperf built from
    the checkout."""
    from gnnperf.asv_init import suite_config
    conf = suite_config()
    python, = conf["pythons"]
    torch, = conf["matrix"]["req"]["torch"]
    return Settings(asv_config="asv.conf.json", asv_results=conf["results_dir"],
                    asv_html=conf["html_dir"], gnnperf_requirement=".", python=python,
                    torch=torch)


#: ``uses: owner/action@<sha> # <tag>``: what Dependabot raises in place.
_PIN = re.compile(r"(uses: [^@\s]+)@[0-9a-f]{40} # \S+")


def unpinned(text: str) -> str:
    """A workflow's text with every action's pin taken out: gnnperf's own
    workflows equal the templates rendered, whatever Dependabot has raised
    since (:data:`ACTIONS` gives adopters pins that their own Dependabot
    raises in turn)."""
    return _PIN.sub(r"\1", text)


def render(template: str, settings: Settings) -> str:
    """The template ``gnnperf/ci/templates/<template>`` with :obj:`settings`
    and the action pins filled in."""
    text = resources.files("gnnperf.ci").joinpath("templates", template).read_text()
    values = {key.upper(): str(value) for key, value in asdict(settings).items()}
    values.update(GATE_BENCH=GATE_BENCH, CPU_BENCH=CPU_BENCH)
    for key, (action, sha, tag) in ACTIONS.items():
        values[key] = f"{action}@{sha} # {tag}"

    def fill(match: re.Match) -> str:
        key = match.group(1)
        if key not in values:
            raise KeyError(f"{template}: no value for @@{key}@@")
        return values[key]

    return re.sub(r"@@([A-Za-z_-]+)@@", fill, text)


__all__ = ["ACTIONS", "CPU_BENCH", "GATE_BENCH", "Settings", "TEMPLATES", "gnnperf_settings",
           "unpinned",
           "render"]
