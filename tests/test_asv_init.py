"""The suite across another repository's commits: ``gnnperf asv-init``'s
configuration folder, what an adopting repository commits
(:func:`gnnperf.asv_init.write_adopting_suite`), the suite as gnnperf's
wheel carries it (its instrument found in both layouts, the shim, the
settings), one asv run over a model repository's commits from a wheel
install, and ``gnnperf bisect --library-repo`` on a small local repository
standing in for the library (its model by import path)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

from gnnperf.cli import main
from wheel_env import gnnperf_wheel, wheel_venv, working_tree_files  # noqa: F401 -- fixtures

ROOT = Path(__file__).resolve().parents[1]
GIT_ENV = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@localhost",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@localhost")

#: The library's model at each commit: a two-layer GCN; the third commit
#: adds one op to its forward (what a library change that does more work
#: per step looks like to an exact work metric).
MODEL = '''import torch
from torch_geometric.nn import GCNConv


class Net(torch.nn.Module):
    def __init__(self, in_channels, hidden, out_channels):
        super().__init__()
        self.conv1 = GCNConv(in_channels, hidden)
        self.conv2 = GCNConv(hidden, out_channels)

    def forward(self, x, edge_index):
        x = self.conv1(x, edge_index).relu(){extra}
        return self.conv2(x, edge_index)


def build(in_channels, hidden, out_channels, layers):
    return Net(in_channels, hidden, out_channels)
'''
EXTRA_AT = 1  # the commit (1-based after GOOD) whose forward does one more op
# Two commits after GOOD: the search probes the midpoint (commit 1, the
# answer, inside the range) after the two ends; each probe is a cold
# interpreter.
COMMITS = 2


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], env=GIT_ENV, check=True,
                          capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def library(tmp_path_factory) -> Path:
    """A library's clone: package ``steplib`` (a ``pyproject.toml``, a model
    at ``steplib.models:build``), GOOD then :data:`COMMITS` commits."""
    repo = tmp_path_factory.mktemp("library") / "steplib-repo"
    (repo / "steplib").mkdir(parents=True)
    (repo / "pyproject.toml").write_text(
        '[project]\nname = "steplib"\nversion = "0.1"\n'
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n')
    (repo / "steplib" / "__init__.py").write_text("")
    _git(repo, "init", "-q", "-b", "main")
    for n in range(COMMITS + 1):
        extra = "\n        x = x * 1.0  # a change that costs an op" if n >= EXTRA_AT else ""
        (repo / "steplib" / "models.py").write_text(MODEL.format(extra=extra))
        (repo / "NOTES").write_text(f"{n}\n")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", "good" if n == 0 else f"commit {n}")
    return repo


def test_asv_init_writes_the_configuration_for_the_librarys_commits(library, tmp_path, capsys):
    out = tmp_path / "bench"
    assert main(["asv-init", "--repo", str(library), "--out", str(out), "--project", "steplib",
                 "--branch", "main"]) == 0
    conf = json.loads((out / "asv.conf.json").read_text())
    assert conf["repo"] == str(library.resolve()) and conf["branches"] == ["main"]
    assert conf["project"] == "steplib" and conf["benchmark_dir"] == "benchmarks"
    # gnnperf's own matrix (torch pinned), the library left out of it; its
    # build, launch and thresholds gnnperf's own.
    from gnnperf.asv_init import SHIM, config, suite_config
    suite = suite_config(ROOT)
    assert suite_config() == suite  # from this clone, the one gnnperf runs from
    req = conf["matrix"]["req"]
    assert req == suite["matrix"]["req"] and req["torch"] == [torch.__version__.split("+")[0]]
    assert conf["regressions_thresholds"] == suite["regressions_thresholds"]
    assert conf["launch_method"] == suite["launch_method"]
    pyg = config(suite, "x", "torch_geometric", ["master"], "3.11", "c", "gnnperf==0")
    assert "torch-geometric" not in pyg["matrix"]["req"] and "torch" in pyg["matrix"]["req"]
    # The library's wheel with its dependencies, torch held by a constraint
    # beside the configuration; then this gnnperf, from a clone a wheel
    # built now, without dependencies.
    library_install, gnnperf_install = conf["install_command"]
    constraint = library_install.split("--constraint ")[1].split()[0]
    assert constraint == "{conf_dir}/constraints.txt"
    assert (out / "constraints.txt").read_text() == f"torch=={req['torch'][0]}\n"
    assert "--no-deps" in gnnperf_install.split()
    wheel = Path(gnnperf_install.split()[-1])
    assert wheel.is_file() and wheel.parent == out / "wheels" and wheel.name.startswith("gnnperf-")
    # The benchmarks: the suite that gnnperf carries, through the shim; no copy.
    assert (out / "benchmarks" / "__init__.py").read_text() == SHIM
    assert sorted(p.name for p in out.iterdir()) == ["asv.conf.json", "benchmarks",
                                                     "constraints.txt", "wheels"]
    assert "asv run" in capsys.readouterr().out


@pytest.mark.parametrize("what, message", [
    ("not-a-repo", "not a git clone"),
    ("full-out", "is not empty"),
])
def test_asv_init_refuses_what_it_cannot_use_in_one_line(what, message, library, tmp_path,
                                                         capsys):
    out = tmp_path / "bench"
    repo = str(library)
    if what == "not-a-repo":
        repo = str(tmp_path)
    else:
        out.mkdir()
        (out / "x").write_text("")
    assert main(["asv-init", "--repo", repo, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.e2e
def test_bisect_across_a_librarys_commits_finds_the_commit(library):
    # gnnperf fixed (this tree), the library's commits each first on the
    # path; the case trains the library's own model, by import path.
    proc = subprocess.run(
        [sys.executable, "-m", "gnnperf", "bisect", f"HEAD~{COMMITS}", "HEAD", "--library-repo",
         str(library), "--case", "baseline@synthetic-10k@steplib.models:build",
         "--metric", "aten_ops", "--quiet"],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    expected = _git(library, "rev-parse", f"HEAD~{COMMITS - EXTRA_AT}")
    first = proc.stdout.splitlines()[0]
    assert first.startswith(f"first changed commit: {expected[:12]} commit {EXTRA_AT}"), first
    before, after = (int(x.replace(",", "")) for x in
                     proc.stdout.splitlines()[1].split(": ")[1].split(" -> "))
    assert after > before  # its forward's op, and the op's backward


def test_bisect_of_a_library_runs_from_a_folder_that_is_no_gnnperf_tree(tmp_path, monkeypatch,
                                                                       capsys):
    """From a library's clone or any folder (a pip-installed gnnperf has no
    tree), the library bisect keeps gnnperf fixed as this process has it:
    the options pass their checks and the search starts."""
    from gnnperf.gate import bisection
    started = []

    def search(good, bad, case, metric, repo, options, log, library_repo=None,
               library_subdir=""):
        started.append((good, bad, library_repo))
        raise bisection.GnnperfError("stopped here")
    monkeypatch.setattr(bisection, "bisect", search)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["bisect", "2.4.0", "2.5.0", "--library-repo", str(tmp_path / "pyg"),
                 "--case", "baseline@cora", "--metric", "aten_ops"]) == 2
    assert "stopped here" in capsys.readouterr().err
    assert started == [("2.4.0", "2.5.0", str(tmp_path / "pyg"))]


def test_the_library_search_itself_needs_no_gnnperf_tree_where_it_runs(tmp_path, monkeypatch):
    """The search below the command line: from a folder that is no gnnperf
    tree, over a real two-commit library clone, it gets as far as probing
    its first commit (stood in: the probe is an interpreter start)."""
    from gnnperf.gate import bisection
    from gnnperf.gate.compare import GateOptions
    from gnnperf.measure.case import Case
    library = tmp_path / "lib"
    library.mkdir()
    _git(library, "init", "-q")
    for n in (1, 2):
        (library / "mod.py").write_text(f"X = {n}\n")
        _git(library, "add", "-A")
        _git(library, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", f"c{n}")
    probed = []

    def probe(arm, names=()):
        probed.append(arm)
        raise bisection.GnnperfError("probed")
    monkeypatch.setattr(bisection.arm_runner, "probe", probe)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    options = GateOptions(head_dir=str(elsewhere))
    with pytest.raises(bisection.GnnperfError, match="probed"):
        bisection.bisect("HEAD~1", "HEAD", Case("baseline", "cora"), "aten_ops", str(elsewhere),
                         options, lambda *a: None, library_repo=str(library))
    assert probed


def test_bisect_refuses_a_library_that_is_not_a_clone(tmp_path, capsys):
    assert main(["bisect", "HEAD~1", "HEAD", "--library-repo", str(tmp_path),
                 "--case", "baseline@cora"]) == 2
    assert "not a git checkout" in capsys.readouterr().err


# The suite as the wheel carries it, and what an adopting repository commits.
def test_the_suite_finds_its_instrument_beside_it_in_a_checkout_and_around_it_installed(
        tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks import suite
    assert suite.SUITE_SOURCES == ROOT / "gnnperf"  # this checkout's own

    def tree(*files: str) -> None:
        for name in files:
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name).write_text("")
    # A checkout: benchmarks/ beside gnnperf/.
    tree("clone/benchmarks/suite.py", "clone/gnnperf/errors.py", "clone/gnnperf/measure/case.py")
    assert suite.suite_sources(tmp_path / "clone" / "benchmarks") == tmp_path / "clone" / "gnnperf"
    # The wheel's layout: the suite inside the gnnperf package.
    tree("site/gnnperf/asv_suite/suite.py", "site/gnnperf/errors.py",
         "site/gnnperf/measure/case.py")
    assert suite.suite_sources(tmp_path / "site" / "gnnperf" / "asv_suite") == \
        tmp_path / "site" / "gnnperf"
    # Half of the instrument is none: the import fails, naming the fix.
    tree("half/benchmarks/suite.py", "half/gnnperf/errors.py")
    with pytest.raises(ImportError, match="install gnnperf"):
        suite.suite_sources(tmp_path / "half" / "benchmarks")


_ASV_JSON = """{
    // a comment, with "quotes" and a URL: https://example.org/x
    "url": "https://example.org//a", /* a block
    comment */ "escaped": "a\\"b // not a comment",
    "list": [1, 2, ],
    "version": 1,
}
"""


@pytest.mark.parametrize("with_asv", [True, False])
def test_read_asv_conf_reads_asvs_json_and_keeps_slashes_inside_strings(with_asv, tmp_path,
                                                                        monkeypatch):
    from gnnperf.asv_conf import read_asv_conf
    from gnnperf.errors import GnnperfError
    if not with_asv:  # the fallback: no asv (nor its json5) in this environment
        for name in ("asv", "asv.util", "json5"):
            monkeypatch.setitem(sys.modules, name, None)
    path = tmp_path / "asv.conf.json"
    path.write_text(_ASV_JSON)
    assert read_asv_conf(path) == {"url": "https://example.org//a",
                                   "escaped": 'a"b // not a comment', "list": [1, 2],
                                   "version": 1}
    own = read_asv_conf(ROOT / "asv.conf.json")
    assert own["matrix"]["req"]["torch"] == [torch.__version__.split("+")[0]]
    assert own["regressions_thresholds"]["(?!.*peakmem_).*"] == 0.10
    for text, message in (("{", "is not valid asv JSON"), ("[1]", "not a JSON object")):
        path.write_text(text)
        with pytest.raises(GnnperfError, match=message) as raised:
            read_asv_conf(path)
        assert len(str(raised.value).splitlines()) == 1 and "fix the file" in str(raised.value)
    with pytest.raises(GnnperfError, match="no such file"):
        read_asv_conf(tmp_path / "absent.json")


@pytest.fixture
def model_repo(tmp_path):
    """The stand-in model repository (tests/standin.py); the modules of
    ``mypkg`` that a test imports in this worker are dropped afterwards, so
    no later test of the worker finds this repository's."""
    from standin import make_model_repo
    before = set(sys.modules)
    yield make_model_repo(tmp_path / "mypkg-repo")
    for name in set(sys.modules) - before:
        if name == "mypkg" or name.startswith("mypkg."):
            del sys.modules[name]


def test_write_adopting_suite_writes_what_asv_needs_into_the_repository(model_repo):
    from asv.config import Config

    from gnnperf import __version__
    from gnnperf.asv_init import GITIGNORE, SHIM, suite_config, write_adopting_suite
    from standin import MODEL
    written = write_adopting_suite(model_repo, project="mypkg", branches=["main"],
                                   models=[MODEL, "GCN"], python="3.11")
    folder = model_repo / ".gnnperf"
    assert sorted(p.relative_to(folder).parts for p in written) == [
        (".gitignore",), ("asv.conf.json",), ("benchmarks", "__init__.py"),
        ("benchmarks", "settings.json"), ("constraints.txt",)]
    conf = Config.load(str(folder / "asv.conf.json"))  # asv reads it
    suite = suite_config()
    # asv runs in the configuration's folder: the repository is its parent,
    # its files stay inside .gnnperf/.
    assert conf.repo == ".." and conf.project == "mypkg" and conf.branches == ["main"]
    assert conf.benchmark_dir == "benchmarks" and conf.pythons == ["3.11"]
    assert (conf.env_dir, conf.results_dir, conf.html_dir) == (".asv/env", ".asv/results",
                                                                ".asv/html")
    assert conf.matrix == suite["matrix"] and conf.regressions_thresholds == suite[
        "regressions_thresholds"]
    assert conf.build_command == suite["build_command"]
    assert conf.launch_method == suite["launch_method"]
    assert conf.install_command == [
        "in-dir={env_dir} python -m pip install --constraint {conf_dir}/constraints.txt "
        "{wheel_file}",
        f"in-dir={{env_dir}} python -m pip install --no-deps gnnperf=={__version__}"]
    assert (folder / "constraints.txt").read_text() == f"torch=={torch.__version__.split('+')[0]}\n"
    assert (folder / "benchmarks" / "__init__.py").read_text() == SHIM
    # The models spelled as the registry spells them, for the suite's profiles.py.
    assert json.loads((folder / "benchmarks" / "settings.json").read_text()) == {
        "GNNPERF_ASV_MODELS": f"{MODEL},gcn"}
    assert (folder / ".gitignore").read_text() == GITIGNORE and ".asv/" in GITIGNORE.split()
    # Again with force, another requirement, no models: the suite's defaults.
    write_adopting_suite(model_repo, project="mypkg", branches=["main"], models=[],
                         python="3.11", gnnperf_requirement="gnnperf>=0.1,<0.2", force=True)
    conf = json.loads((folder / "asv.conf.json").read_text())
    assert conf["install_command"][1].endswith("--no-deps 'gnnperf>=0.1,<0.2'")
    assert json.loads((folder / "benchmarks" / "settings.json").read_text()) == {}


def test_the_suites_settings_file_is_the_one_write_adopting_suite_writes(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks import profiles
    from gnnperf import asv_init
    assert (asv_init.SETTINGS_FILE, asv_init.MODELS_ENV) == (profiles.SETTINGS_FILE,
                                                             profiles.MODELS_ENV)
    assert profiles.SETTINGS == {}  # gnnperf's own checkout has none


@pytest.mark.parametrize("what, message", [
    ("not-a-repo", "not a git repository with a working tree; give the top folder"),
    ("subfolder", "is inside the git repository"),
    ("exists", "exists; give --force"),
    ("unknown-model", "unknown model 'nosuch'"),
    ("unimportable-model", "cannot import nopkg"),
    ("no-branch", "give at least one branch"),
    ("no-project", "give the repository's distribution name"),
    ("wheel-path", "a wheel's path is not portable"),
])
def test_write_adopting_suite_refuses_in_one_line_naming_the_fix(what, message, model_repo,
                                                                  tmp_path):
    from gnnperf.asv_init import write_adopting_suite
    from gnnperf.errors import GnnperfError
    repo, kwargs = model_repo, dict(project="mypkg", branches=["main"], models=["gcn"])
    if what == "not-a-repo":
        repo = tmp_path / "plain"
        repo.mkdir()
    elif what == "subfolder":
        repo = model_repo / "mypkg"
    elif what == "exists":
        write_adopting_suite(repo, **kwargs)
    elif what == "unknown-model":
        kwargs["models"] = ["nosuch"]
    elif what == "unimportable-model":
        kwargs["models"] = ["nopkg.models:build"]
    elif what == "no-branch":
        kwargs["branches"] = []
    elif what == "no-project":
        kwargs["project"] = " "
    else:
        kwargs["gnnperf_requirement"] = "wheels/gnnperf-0.1.0-py3-none-any.whl"
    with pytest.raises(GnnperfError) as raised:
        write_adopting_suite(repo, **kwargs)
    assert message in str(raised.value) and len(str(raised.value).splitlines()) == 1
    if what != "exists":
        assert not (model_repo / ".gnnperf").exists()  # nothing half-written


_MOUNT_THE_SHIM = """
import importlib.util, json, os, pkgutil, sys
from pathlib import Path
root, shim_parent = Path(sys.argv[1]), sys.argv[2]
# Stands in for an install whose gnnperf carries the suite (the wheel's
# gnnperf.asv_suite): this checkout's benchmarks/.
spec = importlib.util.spec_from_file_location(
    "gnnperf.asv_suite", root / "benchmarks" / "__init__.py",
    submodule_search_locations=[str(root / "benchmarks")])
class Installed:
    @staticmethod
    def find_spec(name, path=None, target=None):
        return spec if name == "gnnperf.asv_suite" else None
sys.meta_path.insert(0, Installed)
sys.path.insert(0, shim_parent)
sys.argv = ["benchmark.py", "discover"]
import benchmarks, benchmarks.profiles as profiles
# asv_runner's discovery: the package's modules, named below its name.
from asv_runner.discovery import disc_modules
names = [m.__name__ for m in disc_modules("benchmarks") if m.__name__.count(".") == 1][:3]
before = list(profiles.PROFILE.models)
os.environ["GNNPERF_ASV_MODELS"] = "sage"
print(json.dumps({"file": benchmarks.__file__, "path": benchmarks.__path__,
                  "modules": sorted(m.name for m in pkgutil.iter_modules(benchmarks.__path__)),
                  "discovered": names, "suite": benchmarks.suite.__name__,
                  "sources": str(benchmarks.suite.SUITE_SOURCES), "models": before,
                  "set": list(profiles.current_profile().models)}))
"""


def test_the_shim_is_the_installed_suite_named_as_gnnperfs_own_and_its_settings_choose_models(
        model_repo):
    # asv imports the shim folder as the package "benchmarks" and walks its
    # __path__ (asv_runner.discovery): the suite's modules, named
    # benchmarks.<module>, so a benchmark's name is gnnperf's own
    # (training.TrainStep...); the settings beside the shim pick the models
    # unless GNNPERF_ASV_MODELS is set.
    from gnnperf.asv_init import write_adopting_suite
    write_adopting_suite(model_repo, project="mypkg", branches=["main"], models=["GAT"])
    env = {k: v for k, v in os.environ.items() if not k.startswith("GNNPERF_ASV_")}
    proc = subprocess.run([sys.executable, "-c", _MOUNT_THE_SHIM, str(ROOT),
                           str(model_repo / ".gnnperf")], cwd=model_repo, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["file"] == str(model_repo / ".gnnperf" / "benchmarks" / "__init__.py")
    assert seen["path"] == [str(ROOT / "benchmarks")]
    expected = sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py") if p.stem != "__init__")
    assert seen["modules"] == expected and "training" in expected
    assert all(name.startswith("benchmarks.") for name in seen["discovered"]), seen["discovered"]
    assert seen["suite"] == "benchmarks.suite" and seen["sources"] == str(ROOT / "gnnperf")
    assert seen["models"] == ["gat"] and seen["set"] == ["sage"]


@pytest.mark.e2e
def test_the_wheel_carries_gnnperf_the_suite_and_gnnperfs_asv_conf(gnnperf_wheel):
    # setuptools cannot find a package mapped to another folder, so
    # pyproject names the packages: a new one, or a data file no
    # package-data pattern covers, would be missing from the wheel.
    names = set(zipfile.ZipFile(gnnperf_wheel).namelist())
    packaged_conf = "/".join(("gnnperf", "asv.conf.json"))  # the wheel's, no file of the clone
    expected = {packaged_conf}
    for name in working_tree_files():
        if name.startswith("gnnperf/") and (ROOT / name).is_file():
            expected.add(name)
        elif name.startswith("benchmarks/") and (ROOT / name).is_file():
            expected.add("gnnperf/asv_suite/" + name.removeprefix("benchmarks/"))
    missing = sorted(expected - names)
    assert not missing, (f"the wheel lacks {missing[:5]}: add its package to [tool.setuptools] "
                         f"packages or its pattern to package-data in pyproject.toml")
    tops = {name.split("/")[0] for name in names}
    assert tops == {"gnnperf", gnnperf_wheel.name.split("-py3")[0] + ".dist-info"}, tops
    from gnnperf.asv_conf import strip_comments
    text = zipfile.ZipFile(gnnperf_wheel).read(packaged_conf).decode()
    assert json.loads(strip_comments(text)) == json.loads(strip_comments(
        (ROOT / "asv.conf.json").read_text()))


#: The one benchmark the adopting run measures: the step time, which
#: every variant and model has (asv matches a parameterised benchmark's
#: regex against its name with its parameters).

#: Run by the wheel's venv: where its suite is, whether a top-level
#: ``benchmarks`` exists there, what write_adopting_suite wrote, and
#: ``gnnperf asv-init``'s exit status (one interpreter: each start imports
#: torch).
_ADOPT_FROM_THE_WHEEL = """
import importlib.util, json, sys
from pathlib import Path
import gnnperf.asv_init, gnnperf.asv_suite, gnnperf.cli
repo, model, out = sys.argv[1:4]
written = gnnperf.asv_init.write_adopting_suite(
    Path(repo), project="mypkg", branches=["main"], models=[model],
    python="%d.%d" % sys.version_info[:2])
status = gnnperf.cli.main(["asv-init", "--repo", repo, "--out", out, "--project", "mypkg",
                           "--branch", "main"])
print(json.dumps({"suite": gnnperf.asv_suite.__file__, "writer": gnnperf.asv_init.__file__,
                  "top_level_benchmarks": importlib.util.find_spec("benchmarks") is not None,
                  "written": [str(p) for p in written], "asv_init": status}))
"""


@pytest.mark.e2e
def test_an_adopting_repository_gets_the_installed_suite_from_the_wheel(wheel_venv, tmp_path):
    """The point of shipping the suite in the wheel: a model repository with
    gnnperf pip-installed (no clone anywhere) writes what asv needs, the
    suite being the wheel's own."""
    from standin import MODEL, make_model_repo
    repo = make_model_repo(tmp_path / "mypkg-repo")
    out = tmp_path / "asv-init-out"
    made = wheel_venv.python_json(_ADOPT_FROM_THE_WHEEL, str(repo), MODEL, str(out),
                                  cwd=tmp_path)
    # The wheel carries the suite as a subpackage of gnnperf, no top-level
    # "benchmarks" beside it; the wheel's gnnperf wrote the files.
    site = wheel_venv.root / "lib"
    assert Path(made["suite"]).is_relative_to(site) and Path(made["suite"]).parent.name == \
        "asv_suite", made
    assert Path(made["writer"]).is_relative_to(site) and not made["top_level_benchmarks"], made
    assert str(repo / ".gnnperf" / "asv.conf.json") in made["written"]
    # gnnperf asv-init from a wheel: the same shim, gnnperf by its requirement
    # (no clone to build a wheel from).
    from gnnperf import __version__
    from gnnperf.asv_init import SHIM
    assert made["asv_init"] == 0 and not (out / "wheels").exists()
    assert (out / "benchmarks" / "__init__.py").read_text() == SHIM
    assert json.loads((out / "asv.conf.json").read_text())["install_command"][1].endswith(
        f"--no-deps gnnperf=={__version__}")
    # asv over two of its commits with this suite: tests/test_adopt.py, through the
    # CPU workflow gnnperf adopt writes, in a fresh clone.


@pytest.mark.e2e
def test_the_compile_probe_imports_the_suite_as_asv_did(tmp_path):
    # The compile figures time a cold compile in a fresh interpreter that
    # imports the suite again: through an adopting repository's shim, that
    # is the shim's package, not the folder the installed suite's files lie in.
    from gnnperf.asv_init import SHIM
    shim = tmp_path / "adopted" / "benchmarks"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text(SHIM)
    code = ("import json, subprocess, sys; sys.path.insert(0, sys.argv[1]); "
            "import benchmarks.compile as c; parent, package = c._suite_package(); "
            "probe = c._PROBE.split('out =')[0]; "
            "done = subprocess.run([sys.executable, '-c', probe, parent, package], "
            "capture_output=True, text=True); "
            "print(json.dumps([parent, package, done.returncode, done.stderr[-500:]]))")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "adopted")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    parent, package, code, err = json.loads(out.stdout.strip().splitlines()[-1])
    assert (parent, package) == (str((tmp_path / "adopted").resolve()), "benchmarks")
    assert code == 0, err
