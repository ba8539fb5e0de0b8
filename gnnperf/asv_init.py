"""gnnperf's asv suite over another repository's commits (a library under
test, e.g. torch_geometric, or a team's model package), gnnperf fixed at
one version: ``gnnperf asv-init`` (a configuration folder of its own) and
:func:`write_adopting_suite` (a ``.gnnperf/`` folder the repository
commits).

asv checks out and builds the repository's commits (its ``repo``,
``branches``, build and install commands); gnnperf goes into every
environment beside each commit, without dependencies, torch pinned where
gnnperf's own matrix pins it. The benchmarks are the suite that gnnperf's
wheel carries (``gnnperf.asv_suite``), so they are always the installed
gnnperf's: asv's ``benchmark_dir`` is a shim, a folder ``benchmarks`` whose
``__init__.py`` (:data:`SHIM`) makes that package the installed suite
(:func:`mount_suite`). asv discovers and runs every benchmark in its own
environment, so the shim needs nothing of gnnperf where asv is started, and
the benchmark names are gnnperf's own (``training.TrainStep.time_train_step``).
What ``asv run``, ``asv publish`` and ``gnnperf history`` then show is the
repository's history. The repository's own models (``pkg.module:function``)
join the suite through ``settings.json`` beside the shim, or
``GNNPERF_ASV_MODELS``.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import shlex
import subprocess
import sys
from pathlib import Path

from gnnperf import __version__
from gnnperf.asv_conf import read_asv_conf
from gnnperf.errors import GnnperfError

#: The folder an adopting repository commits: asv's configuration, the shim
#: and the suite's settings (asv's own files go to ``.asv/`` inside it).
ADOPTED_DIR = ".gnnperf"
#: The shim's folder name: asv names the benchmarks without it, and the
#: suite's compile probe imports the suite under this name.
SHIM_DIR = "benchmarks"
#: The suite's settings beside the shim (``benchmarks/profiles.py`` reads
#: it, and names it ``SETTINGS_FILE``): defaults of the suite's
#: environment variables.
SETTINGS_FILE = "settings.json"
MODELS_ENV = "GNNPERF_ASV_MODELS"
CONSTRAINTS_FILE = "constraints.txt"

SHIM = '''"""gnnperf's asv suite, as gnnperf installs it in asv's environment: asv's
benchmark_dir, written by gnnperf (gnnperf.asv_init); commit it.

asv imports this folder as the package ``benchmarks``; the package takes the
installed ``gnnperf.asv_suite`` as its own (its modules and its start-up), so
the benchmarks are the installed gnnperf's and named as in gnnperf's own
suite (``training.TrainStep.time_train_step``). settings.json beside this
file holds this repository's defaults of the suite's environment variables
(GNNPERF_ASV_MODELS: its own models); a variable set where asv runs wins.
"""
from gnnperf.asv_init import mount_suite

mount_suite(globals())
'''

GITIGNORE = "# asv's environments, results and HTML (written by gnnperf)\n.asv/\n__pycache__/\n"


def mount_suite(namespace: dict) -> None:
    """Makes the package whose module globals are :obj:`namespace` (an
    adopting repository's shim) gnnperf's installed suite under the
    package's own name: its ``__path__`` becomes the suite's folder, which
    asv's discovery walks (``pkgutil.iter_modules``) and names below the
    package, and the suite's ``__init__`` runs in it, as importing the
    suite runs it, once.

    Args:
        namespace: ``globals()`` of the shim's ``__init__.py``.

    Raises:
        ImportError: This gnnperf carries no suite (an editable install made
            before it did: ``pip install -e`` it again).
    """
    spec = importlib.util.find_spec("gnnperf.asv_suite")
    if spec is None or not spec.submodule_search_locations or not spec.origin:
        raise ImportError("this gnnperf carries no asv suite (gnnperf.asv_suite); install "
                          "gnnperf from its wheel, or reinstall the clone: pip install -e <clone>")
    path = list(spec.submodule_search_locations)
    namespace["__path__"] = path
    own_spec = namespace.get("__spec__")
    if own_spec is not None:
        own_spec.submodule_search_locations = path
    code = compile(Path(spec.origin).read_text(encoding="utf-8"), spec.origin, "exec")
    exec(code, namespace)  # noqa: S102 -- the suite's own __init__, as an import runs it


def _checkout_top() -> Path | None:
    """The clone this gnnperf runs from (``pip install -e``: its
    ``benchmarks/`` and ``pyproject.toml`` beside ``gnnperf/``), else
    ``None`` (a wheel's install)."""
    top = Path(__file__).resolve().parent.parent
    if (top / "benchmarks" / "base.py").is_file() and (top / "pyproject.toml").is_file():
        return top
    return None


def suite_config(top: Path | None = None) -> dict:
    """gnnperf's own ``asv.conf.json``: the matrix (torch pinned), build,
    launch and thresholds that a repository's configuration reuses. From
    :obj:`top` where given, else from this gnnperf's clone, else the copy
    its wheel carries (``asv.conf.json`` in the installed package).

    Args:
        top: A gnnperf clone's top folder.
    """
    if top is None:
        top = _checkout_top()
    path = (top / "asv.conf.json") if top is not None else Path(__file__).with_name(
        "asv.conf.json")
    if not path.is_file():
        raise GnnperfError(f"gnnperf's asv.conf.json is missing at {path}; reinstall gnnperf "
                           f"(pip install --force-reinstall gnnperf)")
    return read_asv_conf(path)


def config(suite: dict, repo: str, project: str, branches: list[str], python: str,
           constraints: str, gnnperf_install: str) -> dict:
    """:obj:`suite` (:func:`suite_config`) pointed at :obj:`repo`'s commits
    and measured by the gnnperf that pip installs from :obj:`gnnperf_install`
    (a requirement, or a wheel's path): the repository is the project, so
    it leaves the matrix; the rest of gnnperf's matrix (torch pinned) stays.

    Args:
        suite: gnnperf's own configuration.
        repo: asv's ``repo``: a path (relative to the configuration's
            folder, where asv runs) or a URL.
        project: The repository's distribution name (what ``pip uninstall``
            takes).
        branches: The branches asv follows.
        python: The environments' Python (``3.11``).
        constraints: The pip constraints file holding torch, as an install
            command names it (``{conf_dir}`` is asv's configuration folder).
        gnnperf_install: What ``pip install --no-deps`` installs gnnperf from.
    """
    from packaging.utils import canonicalize_name
    req = {name: versions for name, versions in suite["matrix"]["req"].items()
           if canonicalize_name(name.removeprefix("pip+")) != canonicalize_name(project)}
    return {**suite, "project": project, "repo": repo, "branches": list(branches),
            "pythons": [python], "matrix": {**suite["matrix"], "req": req},
            # The repository's wheel with its own dependencies, torch held where
            # the matrix put it (a commit that wants another torch fails here,
            # in one line, instead of measuring another torch); then gnnperf,
            # without dependencies (the matrix has them).
            "install_command": [
                f"in-dir={{env_dir}} python -m pip install --constraint {constraints} "
                f"{{wheel_file}}",
                f"in-dir={{env_dir}} python -m pip install --no-deps "
                f"{shlex.quote(gnnperf_install)}"]}


def _python(python: str | None) -> str:
    return python or f"{sys.version_info.major}.{sys.version_info.minor}"


def _torch_constraint(suite: dict) -> str:
    torch_pin, = suite["matrix"]["req"]["torch"]
    return f"torch=={torch_pin}\n"


def _requirement(text: str) -> str:
    """:obj:`text` checked as a pip requirement of gnnperf (a version pin,
    a range, ``gnnperf @ URL``): what every machine that runs the
    configuration resolves through its own index or ``PIP_FIND_LINKS``."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name
    try:
        name = Requirement(text).name
    except InvalidRequirement:
        name = None
    if name is None or canonicalize_name(name) != "gnnperf":
        raise GnnperfError(f"gnnperf requirement {text!r}: give one pip resolves anywhere, e.g. "
                           f"gnnperf=={__version__} (a wheel's path is not portable to CI)")
    return text


def _git_top(repo: Path, option: str) -> Path:
    """The top folder of :obj:`repo`'s git working tree, or one line naming
    the fix (:obj:`option` is how the caller names the path)."""
    found = subprocess.run(["git", "-C", str(repo), "rev-parse", "--show-toplevel"],
                           capture_output=True, text=True) if repo.is_dir() else None
    if found is None or found.returncode != 0:
        raise GnnperfError(f"{option} {repo}: not a git repository with a working tree; give "
                           f"the top folder of the repository's clone")
    return Path(found.stdout.strip()).resolve()


def _checked_models(models: list[str], repo: Path) -> list[str]:
    """:obj:`models` checked and spelled as the registry does
    (:func:`gnnperf.models.parse_models`); the repository's own
    (``pkg.module:function``) are imported from its working tree (its top
    folder and ``src/`` on the path while checking)."""
    if not models:
        return []
    from gnnperf.models import parse_models
    roots = [str(folder) for folder in (repo / "src", repo) if folder.is_dir()]
    added = [root for root in roots if root not in sys.path]
    sys.path[:0] = added
    try:
        return parse_models(",".join(models))
    finally:
        for root in added:
            sys.path.remove(root)


def write_adopting_suite(repo: Path, *, project: str, branches: list[str], models: list[str],
                         python: str | None = None, gnnperf_requirement: str | None = None,
                         force: bool = False) -> list[Path]:
    r"""Writes what asv needs to measure :obj:`repo`'s own commits with
    this gnnperf's suite into ``<repo>/.gnnperf/``, a folder to commit:

    - ``asv.conf.json``: asv's ``repo`` is ``".."`` (asv runs in the
      configuration's folder: ``asv --config .gnnperf/asv.conf.json``),
      ``project`` the repository's distribution; gnnperf's matrix (torch
      pinned), build, launch and thresholds; results, environments and
      HTML under ``.gnnperf/.asv/``. Each commit's wheel is installed with
      ``constraints.txt`` (torch at the matrix's pin), then gnnperf with
      ``pip install --no-deps <gnnperf_requirement>``;
    - ``constraints.txt``;
    - ``benchmarks/__init__.py``, the shim (:data:`SHIM`): asv's
      ``benchmark_dir``, the installed gnnperf's suite;
    - ``settings.json`` beside the shim: the suite's defaults here
      (``GNNPERF_ASV_MODELS``: :obj:`models`);
    - ``.gitignore``: asv's ``.asv/`` stays out of the repository.

    Args:
        repo: The top folder of the repository's git clone.
        project: The repository's distribution name, as ``pip uninstall``
            takes it (``mypkg``).
        branches: The branches asv follows (``["main"]``).
        models: The models the suite trains: the repository's own by import
            path (``mypkg.models:build``) and built-in names (``gcn``);
            empty keeps the suite's defaults.
        python: The Python of asv's environments (``3.11``; default: this
            interpreter's).
        gnnperf_requirement: What pip installs gnnperf from in each
            environment, resolved through the machine's index or
            ``PIP_FIND_LINKS`` (default: ``gnnperf==<this version>``).
        force: Overwrite an existing ``.gnnperf/asv.conf.json``.

    Returns:
        The files written.

    Raises:
        GnnperfError: :obj:`repo` is not the top of a git working tree, no
            branch or project is given, a model is unknown or cannot be
            imported, the requirement is not gnnperf's, or the configuration
            exists and :obj:`force` is not set (one line naming the fix).
    """
    repo = Path(repo).expanduser()
    top = _git_top(repo, "repository")
    if top != repo.resolve():
        raise GnnperfError(f"repository {repo} is inside the git repository {top}; give its top "
                           f"folder")
    if not branches:
        raise GnnperfError("give at least one branch for asv to follow (e.g. main)")
    if not project.strip():
        raise GnnperfError("give the repository's distribution name, as pip uninstalls it "
                           "(the name in its pyproject.toml)")
    requirement = _requirement(gnnperf_requirement or f"gnnperf=={__version__}")
    checked = _checked_models(list(models), top)
    folder = top / ADOPTED_DIR
    conf_path = folder / "asv.conf.json"
    if conf_path.exists() and not force:
        raise GnnperfError(f"{conf_path} exists; give --force to write it again")
    suite = suite_config()
    conf = config(suite, "..", project, branches, _python(python),
                  f"{{conf_dir}}/{CONSTRAINTS_FILE}", requirement)
    settings = {MODELS_ENV: ",".join(checked)} if checked else {}
    files = {
        conf_path: json.dumps(conf, indent=4) + "\n",
        folder / CONSTRAINTS_FILE: _torch_constraint(suite),
        folder / SHIM_DIR / "__init__.py": SHIM,
        folder / SHIM_DIR / SETTINGS_FILE: json.dumps(settings, indent=4) + "\n",
        folder / ".gitignore": GITIGNORE,
    }
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return list(files)


def write(repo: str, out: Path, project: str, branches: list[str],
          python: str | None = None) -> Path:
    """Writes ``asv.conf.json`` into :obj:`out` (an empty or new folder)
    with the shim beside it (:data:`SHIM`); returns its path. From a clone,
    gnnperf goes into asv's environments as a wheel built now
    (``out/wheels``); from an installed gnnperf, as ``gnnperf==<this
    version>``, which pip resolves through the index or
    ``PIP_FIND_LINKS``."""
    if out.exists() and any(out.iterdir()):
        raise GnnperfError(f"--out {out} is not empty; give a new folder")
    local = Path(repo).expanduser()
    if "://" not in repo and not repo.startswith("git@"):
        found = subprocess.run(["git", "-C", str(local), "rev-parse", "--git-dir"],
                               capture_output=True, text=True) if local.is_dir() else None
        if found is None or found.returncode != 0:  # a clone, bare or not
            raise GnnperfError(f"--repo {repo}: not a git clone; give its path or its URL")
        repo = str(local.resolve())
    if not branches:
        raise GnnperfError("--branch: give at least one branch to follow (e.g. master)")
    suite = suite_config()
    top = _checkout_top()
    out.mkdir(parents=True, exist_ok=True)
    if top is not None:
        wheels = out / "wheels"
        built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                                str(wheels), str(top)], capture_output=True, text=True)
        if built.returncode != 0:
            raise GnnperfError(f"building gnnperf's wheel failed: {built.stderr.strip()[-300:]}")
        wheel, = wheels.glob("gnnperf-*.whl")
        gnnperf_install = str(wheel.resolve())
    else:
        gnnperf_install = f"gnnperf=={__version__}"
    (out / CONSTRAINTS_FILE).write_text(_torch_constraint(suite))
    (out / SHIM_DIR).mkdir()
    (out / SHIM_DIR / "__init__.py").write_text(SHIM)
    conf = config(suite, repo, project, branches, _python(python),
                  f"{{conf_dir}}/{CONSTRAINTS_FILE}", gnnperf_install)
    path = out / "asv.conf.json"
    path.write_text(json.dumps(conf, indent=4) + "\n")
    return path


def add_parser(sub) -> None:
    """``gnnperf asv-init``'s options (registered by :mod:`gnnperf.cli`)."""
    from gnnperf.cli_help import command_parser
    parser = command_parser(
        sub, "asv-init", asv_init_command, help="point the asv suite at another repository's commits (a library "
                              "such as torch_geometric), gnnperf fixed",
        description="Writes asv.conf.json into --out: asv builds --repo's commits (the library "
                    "under test), installs this gnnperf beside each with torch pinned (a wheel "
                    "built now from a clone, else gnnperf==<this version>), and measures them "
                    "with the suite that gnnperf carries. Then: cd OUT && asv run --bench "
                    "training.TrainStep 2.6.1..2.7.0 (docs/your-library.md).")
    parser.add_argument("--repo", required=True,
                        help="the library's git clone (a path) or its URL")
    parser.add_argument("--out", type=Path, required=True,
                        help="a new folder for the configuration, results and HTML")
    parser.add_argument("--project", default="torch_geometric",
                        help="the library's distribution name, as pip uninstalls it "
                             "(default: %(default)s)")
    parser.add_argument("--branch", action="append", dest="branches",
                        help="a branch asv follows (repeatable; default: master)")
    parser.add_argument("--python", help="the environments' Python, e.g. 3.11 "
                                         "(default: this one's)")


def asv_init_command(args: argparse.Namespace) -> int:
    path = write(args.repo, args.out, args.project, args.branches or ["master"], args.python)
    print(f"wrote {path}; next: cd {path.parent} && asv machine --yes && "
          f"asv run --bench 'training.TrainStep' <old>..<new>")
    return 0


__all__ = ["ADOPTED_DIR", "SHIM", "SHIM_DIR", "add_parser", "asv_init_command", "config",
           "mount_suite", "suite_config", "write", "write_adopting_suite"]
