"""The asv suite runs: ``asv check`` and a ``--quick`` smoke run of every
benchmark in asv's own environment, built from ``asv.conf.json``'s matrix as
a runner's ``asv run`` builds it (no failure; CUDA-only figures n/a on CPU).

Select with ``pytest -m asv`` (or ``-k asv``); it is the run's longest module,
plus asv's environment's build where it is not built yet.
Results go to a temporary folder, never to the checkout's ``.asv/results``;
the environment is the config's own (``.asv/env``), which a later run, a
developer's ``asv run`` and ``.ci/run``'s early build share.
"""
from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("asv", reason="asv not installed (pip install -e '.[bench]')")

try:
    import tomllib
except ImportError:  # Python 3.10: pip's own copy of tomli, what tomllib became
    from pip._vendor import tomli as tomllib


ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.asv

# Figures that are n/a on a machine without CUDA.
CUDA_ONLY = ("track_cuda_peak_mib", "OffloadTransfer.", "OffloadGpuIdle.")
OWN = ("training.", "scaling.", "control.", "compile.", "sampling.", "distributed.",
       "time_to_accuracy.")


def _git_head() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                             text=True, timeout=10)
    except OSError:
        return None
    return out.stdout.strip() if out.returncode == 0 else None


@pytest.fixture(scope="module")
def asv_conf(tmp_path_factory) -> Path:
    return _temp_conf(tmp_path_factory.mktemp("asv"))


def _temp_conf(tmp: Path, env_dir: Path | None = None) -> Path:
    """The project's asv.conf.json with every output folder moved to :obj:`tmp`
    (the environments to :obj:`env_dir` where given)."""
    from asv.util import load_json

    conf = load_json(str(ROOT / "asv.conf.json"), js_comments=True)
    conf.update(repo=str(ROOT), benchmark_dir=str(ROOT / "benchmarks"),
                env_dir=str(env_dir or tmp / "env"), results_dir=str(tmp / "results"),
                html_dir=str(tmp / "html"))
    path = tmp / "asv.conf.json"
    path.write_text(json.dumps(conf, indent=2))
    return path


def _asv(conf: Path, *args: str, timeout: int = 900, **env_vars: str
         ) -> subprocess.CompletedProcess:
    env = dict(os.environ, GNNPERF_ASV_PROFILE="quick", **env_vars)
    return subprocess.run([sys.executable, "-m", "asv", "--config", str(conf), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)


def test_asv_conf_pins_and_no_deps():
    from asv.util import load_json

    conf = load_json(str(ROOT / "asv.conf.json"), js_comments=True)
    import torch
    import torch_geometric

    req = conf["matrix"]["req"]
    assert req["torch"] == [torch.__version__.split("+")[0]]
    # One exact release each, inside pyproject's range: the venv may carry
    # another one (cpu.yml's job on the GPU image's torch-geometric).
    from packaging.requirements import Requirement
    from packaging.version import Version
    pinned_pyg, = req["torch-geometric"]
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    allowed = next(Requirement(r) for r in dependencies
                   if Requirement(r).name == "torch-geometric")
    assert Version(pinned_pyg) in allowed.specifier, (pinned_pyg, str(allowed))
    assert Version(torch_geometric.__version__) in allowed.specifier
    assert all("--no-deps" in cmd for cmd in conf["install_command"] if "install" in cmd)
    assert conf["launch_method"] == "forkserver"
    assert all(conf[k].startswith(".asv/") for k in ("results_dir", "html_dir", "env_dir"))


# pyproject's extras, each either installed by asv's matrix (the suite's own
# figures import it), left out of it for a stated reason, or tooling that runs
# asv and the tests rather than a benchmark: a new extra must be placed here.
EXTRAS_IN_THE_MATRIX = {"cluster": "the cluster variant's METIS partition",
                        "gpu": "OffloadGpuIdle's NVML utilisation on a GPU runner"}
EXTRAS_LEFT_OUT = {"ogb": "a user's ogbn-* dataset only (GNNPERF_ASV_DATASETS); n/a without it"}
TOOLING_EXTRAS = {"test", "bench"}
PINNED = ("torch", "torch-geometric")


def _name(requirement: str) -> str:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
    return canonicalize_name(Requirement(requirement).name)


def test_the_matrix_installs_every_runtime_dependency_of_pyproject():
    # gnnperf goes into asv's environments with --no-deps (asv never replaces
    # the torch build), so the matrix is all that installs its dependencies:
    # pyproject's dependencies are the one list, and the matrix follows it.
    from asv.util import load_json
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    req = load_json(str(ROOT / "asv.conf.json"), js_comments=True)["matrix"]["req"]
    matrix = {canonicalize_name(key.removeprefix("pip+")): values for key, values in req.items()}
    extras = project.get("optional-dependencies", {})
    assert set(extras) == set(EXTRAS_IN_THE_MATRIX) | set(EXTRAS_LEFT_OUT) | TOOLING_EXTRAS, (
        "place each extra of pyproject in EXTRAS_IN_THE_MATRIX, EXTRAS_LEFT_OUT or TOOLING_EXTRAS")
    wanted = [Requirement(r) for r in project["dependencies"]]
    wanted += [Requirement(r) for extra in EXTRAS_IN_THE_MATRIX for r in extras[extra]]
    named = {canonicalize_name(r.name) for r in wanted}
    assert set(matrix) == named, (
        f"asv.conf.json's matrix lacks {sorted(named - set(matrix))} and has "
        f"{sorted(set(matrix) - named)} beyond pyproject's dependencies")
    for requirement in wanted:
        for version in matrix[canonicalize_name(requirement.name)]:
            # "" is pip's newest; a pin must be one pyproject allows.
            assert version == "" or requirement.specifier.contains(version, prereleases=True), (
                requirement, version)
    for name in PINNED:  # bumped in commits of their own (docs/asv.md)
        assert len(matrix[name]) == 1 and matrix[name][0], (name, matrix[name])


def test_asv_builds_the_matrix_with_the_python_a_runner_has():
    # The config's "pythons" (what the GPU workflow sets up) must be ones
    # pyproject allows; a runner whose Python is another one builds the same
    # matrix with `-E virtualenv:3.X`, its own interpreter found when no
    # python3.X is on the PATH (docs/asv.md).
    from asv.config import Config
    from asv.environment import get_environments
    from asv.util import load_json
    from packaging.specifiers import SpecifierSet

    conf = Config.from_json(load_json(str(ROOT / "asv.conf.json"), js_comments=True))
    requires = SpecifierSet(tomllib.loads((ROOT / "pyproject.toml").read_text())
                            ["project"]["requires-python"])
    assert conf.pythons and all(requires.contains(f"{p}.0") for p in conf.pythons), conf.pythons
    running = f"{sys.version_info[0]}.{sys.version_info[1]}"
    envs = list(get_environments(conf, [f"virtualenv:{running}"], verbose=False))
    assert [env.python for env in envs] == [running]
    assert envs[0].requirements == {k: v[0] for k, v in conf.matrix["req"].items()}


_IMPORT_WITHOUT_CUDA = """
import gc, importlib, os, pkgutil, sys, torch
from torch._inductor import cpu_vec_isa
def refuse(*args, **kwargs):
    raise RuntimeError("CUDA touched while the suite was imported")
# device_count is allowed: it asks NVML, which makes no CUDA context.
for name in ("init", "_lazy_init", "is_available", "current_device", "get_device_name",
             "get_device_capability", "synchronize", "is_bf16_supported", "mem_get_info"):
    setattr(torch.cuda, name, refuse)
sys.argv = ["benchmark.py", "discover"]  # as asv's discovery imports it: nothing warmed
import benchmarks
for module in pkgutil.iter_modules(benchmarks.__path__):
    importlib.import_module(f"benchmarks.{module.name}")
assert cpu_vec_isa.valid_vec_isa_list.cache_info().currsize == 0, "discovery warmed the compiler"
assert gc.get_freeze_count() == 0, "discovery froze its objects"
# A setup_cache measures each case with what was alive before it frozen.
measured = benchmarks.suite.measured_or_reason(lambda: {"frozen": gc.get_freeze_count()})
assert measured["frozen"] == 0, "a case outside a setup_cache ran frozen"
sys.argv = ["benchmark.py", "setup_cache"]
measured = benchmarks.suite.measured_or_reason(lambda: {"frozen": gc.get_freeze_count()})
assert measured["frozen"] > 100_000, "a setup_cache's case ran with nothing frozen"
gc.unfreeze()
# As asv's forkserver imports it (asv/benchmark.py run_server): the compiler
# warmed and the objects frozen before each fork, touching no CUDA either.
sys.argv = ["benchmark.py", "run_server"]
benchmarks.suite.prepare_process()
assert cpu_vec_isa.valid_vec_isa_list.cache_info().currsize == 1, "the compiler was not warmed"
child = os.fork()
if child == 0:
    os._exit(0 if gc.get_freeze_count() > 100_000 else 3)
assert os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) == 0, "a fork found nothing frozen"
print("imported", len(list(pkgutil.iter_modules(benchmarks.__path__))))
"""


def test_importing_the_suite_touches_no_cuda():
    # The config's forkserver imports every benchmark module in one process
    # and forks each benchmark from it; a CUDA context made on import would be
    # unusable in every child ("Cannot re-initialize CUDA in forked
    # subprocess"). Every CUDA entry point raises here while the suite loads.
    out = subprocess.run([sys.executable, "-c", _IMPORT_WITHOUT_CUDA], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.startswith("imported ")


def test_no_helper_of_the_suite_reads_as_a_benchmark(monkeypatch):
    # asv takes every module-level function named time_*, track_*, peakmem_*
    # or mem_* for a benchmark: a helper so named runs, and fails, as one
    # (time_to_accuracy's setup_cache did in a real asv run).
    import importlib
    import inspect
    monkeypatch.syspath_prepend(str(ROOT))
    prefixes = ("time_", "track_", "peakmem_", "mem_", "timeraw_")
    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        module = importlib.import_module(f"benchmarks.{path.stem}")
        named = [name for name, value in vars(module).items()
                 if inspect.isfunction(value) and name.startswith(prefixes)
                 and value.__module__ == module.__name__]
        assert not named, f"benchmarks/{path.name}: {named}"


def test_step_over_reference_reads_a_slower_step_and_not_a_slower_machine(monkeypatch):
    """The history's figure (benchmarks/relative.py): the reference against
    itself reads 1; a step that does the reference's work twice reads 2;
    and when the machine turns half as fast part-way through (every call
    from then on doing its work twice over), the ratio stays at 2."""
    import torch
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks import relative, suite
    suite.set_threads()  # one thread, as every benchmark: no idle threads' spinning
    cpu = torch.device("cpu")
    reference = relative.ReferenceStep(cpu)
    state = {"calls": 0, "slow_after": None}

    def machine(fn):
        def call():
            state["calls"] += 1
            slow = state["slow_after"] is not None and state["calls"] > state["slow_after"]
            for _ in range(2 if slow else 1):
                fn()
        return call

    def twice():
        reference()
        reference()

    def ratio(step, block_s: float = 0.004) -> float:
        return relative.step_over_reference(machine(step), machine(reference), cpu,
                                            rounds=15, block_s=block_s)

    assert 0.8 < ratio(lambda: reference()) < 1.25
    assert 1.6 < ratio(twice) < 2.5
    # One call a block (a block shorter than any call): two calibration
    # calls of each, then two calls a round, so the slow-down starts inside
    # round 5 of 15 and every round after it is slow on both sides.
    state.update(calls=0, slow_after=13)
    assert 1.6 < ratio(twice, block_s=1e-9) < 2.5


def test_each_case_gets_the_reference_of_its_kind(monkeypatch):
    """A case that reads its features sparse gets a reference with sparse
    (CSR) features, every other case dense ones, dropped out over the whole
    matrix for a full-graph step; the sparse and the dense reference do the
    same arithmetic, so one step of each leaves the same weights."""
    import torch
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks import relative
    cpu = torch.device("cpu")
    sparse = relative.reference_for("sparse+trimmed+sparse_features", cpu)
    dense = relative.reference_for("baseline", cpu)
    assert sparse.x.layout == torch.sparse_csr and dense.x.layout == torch.strided
    assert relative.reference_for("sampled", cpu).x.layout == torch.strided
    assert relative.reference_for("sparse", cpu).x.layout == torch.strided  # the adjacency only
    # A full-graph dense step drops out its whole feature matrix; a mini-batch
    # or sparse-features one does not.
    dropping = {name: relative.reference_for(name, cpu).input_dropout
                for name in ("baseline", "sparse", "sampled", "sampled+trimmed", "cluster",
                             "saint", "sparse+trimmed+sparse_features")}
    assert dropping == {"baseline": True, "sparse": True, "sampled": False,
                        "sampled+trimmed": False, "cluster": False, "saint": False,
                        "sparse+trimmed+sparse_features": False}
    assert relative.reference_for(" Sampled +trimmed", cpu).input_dropout is False
    torch.manual_seed(0)
    dropped = relative._half_dropped(torch.ones(1001, 31))
    assert set(dropped.unique().tolist()) == {0.0, 2.0}  # inverted: the kept ones doubled
    assert 0.47 < (dropped > 0).float().mean().item() < 0.53
    # The same draws and passes as the suite's own CPU dropout, written out.
    from gnnperf.models.kernels import dropout
    x = torch.rand(97, 13)
    torch.manual_seed(1)
    mine = relative._half_dropped(x)
    torch.manual_seed(1)
    torch.testing.assert_close(mine, dropout(x, 0.5, True))
    # The baseline's reference calls it each step; a sparse one cannot drop dense features.
    calls = []
    monkeypatch.setattr(relative, "_half_dropped", lambda t: calls.append(t.shape) or t)
    relative.reference_for("baseline", cpu)()
    assert calls == [torch.Size([relative.NODES, relative.FEATURES])]
    with pytest.raises(ValueError, match="sparse-features"):
        relative.ReferenceStep(cpu, sparse_features=True, input_dropout=True)
    # The fixed list of mini-batch techniques is the registry's.
    from gnnperf.variants import TECHNIQUES
    assert relative.MINIBATCH_TECHNIQUES == {name for name, technique in TECHNIQUES.items()
                                             if technique.makes_batches}
    torch.testing.assert_close(sparse.x.to_dense(), dense.x)
    dense = relative.ReferenceStep(cpu)  # no dropout: the same draws on both sides
    sparse(), dense()
    for after_sparse, after_dense in zip(sparse.weights, dense.weights):
        torch.testing.assert_close(after_sparse, after_dense)


def test_over_builds_averages_each_build_and_refuses_none(monkeypatch):
    """The history figure's value is the mean over its builds: each build
    measured once, in order; zero builds is a usage error, not a division by
    zero."""
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks import relative, training
    seen = []
    assert relative.over_builds(lambda i: seen.append(i) or [1.0, 1.1, 1.3, 1.2][i], 4) \
        == pytest.approx(1.15)
    assert seen == [0, 1, 2, 3]
    assert relative.over_builds(lambda i: 2.0, 1) == 2.0
    with pytest.raises(ValueError, match="at least 1"):
        relative.over_builds(lambda i: 1.0, 0)
    assert training.TrainStepOverReference.builds >= 2


def test_the_history_figure_builds_anew_and_checks_each_build(monkeypatch):
    """TrainStepOverReference's value: build 0 from setup, each later build
    fresh (the previous one dropped first and its loss checked, since
    teardown sees only the last), every ratio averaged."""
    import torch
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks import caches, relative, training
    log = []

    class Prep:
        def __init__(self, fresh):
            self.number, self.last_loss = sum(e[0] == "build" for e in log), 1.0
            log.append(("build", fresh))

        def synced_step(self):
            pass

        def check_loss(self, loss):
            log.append(("checked", self.number))

    def prepared(cache, dataset, variant, warm=True, fresh=False):
        assert bench.prep is None or not fresh, "a fresh build while the last is alive"
        return Prep(fresh)

    monkeypatch.setattr(caches, "prepared", prepared)
    monkeypatch.setattr(relative, "reference_for",
                        lambda variant, device: log.append(("reference", variant)) or object())
    ratios = iter([1.0, 2.0, 3.0, 6.0])
    monkeypatch.setattr(relative, "step_over_reference", lambda *a, **k: next(ratios))
    bench = training.TrainStepOverReference()
    bench.prep = None
    bench.device = torch.device("cpu")
    bench.make({}, "cora", "baseline")
    assert bench.track_step_over_reference({}, "cora", "baseline") == pytest.approx(3.0)
    assert [e for e in log if e[0] == "reference"] == [("reference", "baseline")] * 4
    assert [e for e in log if e[0] == "build"] == [("build", False)] + [("build", True)] * 3
    assert [e for e in log if e[0] == "checked"] == [("checked", 0), ("checked", 1),
                                                     ("checked", 2)]


@pytest.mark.e2e
def test_asv_check(asv_conf):
    out = _asv(asv_conf, "check", "--python=same")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "No problems found" in out.stdout


# The quick run in two halves, which pytest-xdist runs on its two workers at
# once, a third of the way through the run (tests/conftest.py), by when the
# background build of asv's environment is done: a single run would be the
# suite's longest test, and a failing half names its area. Not an xdist
# group: pytest-xdist starts its groups first, where the build is not done.
# The second pattern is the first's complement, so together they run every
# benchmark once, as one `asv run --quick` does.
SMOKE_HALVES = {"training": r"^training\.", "other areas": r"^(?!training\.)"}
# What the smoke selects: a variant of each kind a runner's environment must
# carry (full-batch Cora through scipy, mini-batches, METIS through pymetis;
# the compile module compiles its own) and two models, so every module and
# every matrix dependency is exercised; the whole quick profile is a runner's `asv run
# --quick` (docs/results.md), the other variants' steps are the in-process
# tests' (test_variants.py).
SMOKE_SELECTION = {"GNNPERF_ASV_VARIANTS": "baseline,sampled,cluster",
                   "GNNPERF_ASV_MODELS": "gcn,sage"}

# asv's own environments: the shipped config's folder, so one built by
# `.ci/run` while the test venv installs, or by an earlier run or a
# developer's `asv run`, is found there and not built again.
ENV_DIR = ROOT / ".asv" / "env"
# asv reads and writes an environment's files without a lock of its own:
# the environment is built and the commit installed under ENV_LOCK held
# exclusively, each run holds it shared, and runs start one at a time
# (START_LOCK) until asv has checked the environment, so no run reads a file
# another is writing. flock, so every pytest worker and session sees them.
ENV_LOCK = ENV_DIR.parent / "env.lock"
START_LOCK = ENV_DIR.parent / "env-start.lock"
PREPARE_LOCK = ENV_DIR.parent / "env-prepare.lock"


@contextlib.contextmanager
def _flock(path: Path, mode: int):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, mode)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _asv_in_built_env(conf: Path, *args: str, timeout: int = 900, **env_vars: str) -> str:
    """``asv`` on the built environment, started after any other run has
    passed asv's environment check; stdout and stderr together."""
    env = dict(os.environ, GNNPERF_ASV_PROFILE="quick", **env_vars)
    with _flock(ENV_LOCK, fcntl.LOCK_SH):
        with _flock(START_LOCK, fcntl.LOCK_EX):
            proc = subprocess.Popen([sys.executable, "-m", "asv", "--config", str(conf), *args],
                                    cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, env=env)
            head = []
            for line in proc.stdout:  # asv checks its environments before it discovers
                head.append(line)
                if "Discovering benchmarks" in line:
                    break
        rest, _ = proc.communicate(timeout=timeout)
    out = "".join(head) + rest
    assert proc.returncode == 0, out[-6000:]
    return out


@pytest.fixture(scope="session")
def built_env(tmp_path_factory) -> dict:
    """asv's own environment for the shipped config (a virtualenv of the
    matrix, gnnperf installed --no-deps, as a runner's ``asv run`` makes
    it), built where absent, with HEAD installed: once per test run, whichever
    worker comes first; the other reads what it recorded."""
    head = _git_head()
    if head is None:
        pytest.skip("no git history: asv builds and installs a commit")
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "asv-built-env"
    shared.mkdir(parents=True, exist_ok=True)
    record = shared / f"{head}.json"
    with _flock(PREPARE_LOCK, fcntl.LOCK_EX):
        if record.exists():
            return json.loads(record.read_text())
        (shared / head[:8]).mkdir(exist_ok=True)
        conf = _temp_conf(shared / head[:8], env_dir=ENV_DIR)
        with _flock(ENV_LOCK, fcntl.LOCK_EX):
            from asv.config import Config
            from asv.environment import get_environments
            env, = get_environments(Config.load(str(conf)), None, verbose=False)
            present = env.check_presence()
            assert _asv(conf, "machine", "--yes").returncode == 0
            start = time.perf_counter()
            # The virtualenv and the matrix, where absent. asv 0.6 exits 1 from
            # `setup` when it succeeds too (it returns its environment list),
            # so the environment's own check decides.
            setup = _asv(conf, "setup")
            built_s = time.perf_counter() - start
            assert env.check_presence(), (setup.stdout + setup.stderr)[-6000:]
            # Discovery installs HEAD, so the runs after it install nothing,
            # which two at once could not do safely. With no benchmark
            # selected asv exits 1: the installed commit decides.
            install = _asv(conf, "run", "--bench", "^$", f"{head}^!")
            env, = get_environments(Config.load(str(conf)), None, verbose=False)
            assert env.installed_commit_hash == head, (install.stdout + install.stderr)[-6000:]
            python = env.find_executable("python")
            # gnnperf went in --no-deps: the matrix must have installed each of
            # its dependencies (the installed commit's pyproject).
            check = subprocess.run([python, "-m", "pip", "check"], capture_output=True,
                                   text=True, timeout=300)
            assert check.returncode == 0, check.stdout + check.stderr
        built = {"commit": head, "name": env.name, "python": python,
                 "built_s": None if present else round(built_s, 1)}
        record.write_text(json.dumps(built))
    return built


@pytest.mark.parametrize("half", list(SMOKE_HALVES))
@pytest.mark.e2e
def test_asv_quick_smoke(tmp_path, half, built_env):
    """``asv run --quick`` as a runner runs it: in asv's own environment
    (neither ``--python=same`` nor ``existing:``), on a commit, with an
    empty gnnperf cache, so a dependency the matrix lacks fails here."""
    head = built_env["commit"]
    asv_conf = _temp_conf(tmp_path, env_dir=ENV_DIR)
    # forkserver, the config's: one import of torch for the whole run instead
    # of one per benchmark.
    log = _asv_in_built_env(asv_conf, "run", "--quick", "--launch-method", "forkserver",
                            "--show-stderr", "--bench", SMOKE_HALVES[half], f"{head}^!",
                            GNNPERF_CACHE=str(tmp_path / "gnnperf-cache"), **SMOKE_SELECTION)
    assert " failed" not in log, log[-6000:]

    results_dir = Path(json.loads(asv_conf.read_text())["results_dir"])
    files = [p for p in results_dir.glob("*/*.json") if p.name != "machine.json"]
    assert len(files) == 1, files
    results = json.loads(files[0].read_text())
    assert results["env_name"] == built_env["name"] and results["commit_hash"] == head
    benchmarks = json.loads((results_dir / "benchmarks.json").read_text())
    names = {name for name in benchmarks
             if name != "version" and re.search(SMOKE_HALVES[half], name)}
    assert names and names <= set(results["results"]), names - set(results["results"])
    modules = {p.stem for p in (ROOT / "benchmarks").glob("*.py")} - {
        "__init__", "base", "caches", "compat", "profiles", "relative", "suite"}  # the helpers
    areas = [m for m in sorted(modules) if re.search(SMOKE_HALVES[half], f"{m}.")]
    for area in areas:  # every benchmark module is touched by one half
        assert any(name.startswith(f"{area}.") for name in names), area
    columns = results["result_columns"]
    for name in sorted(names):
        row = dict(zip(columns, results["results"][name]))
        combos = list(itertools.product(*row["params"])) or [()]
        for combo, value in zip(combos, row["result"]):
            assert value is not None, f"{name}{combo} failed"  # failed: null, n/a: NaN
            # n/a is checked for this suite's own modules; others only must not fail.
            if isinstance(value, float) and math.isnan(value) and name.startswith(OWN):
                named = dict(zip(benchmarks[name]["param_names"], combo))
                assert _may_be_na(name, named), f"{name}{combo} is n/a"
    if half == "training":  # the selected variants and models, each step timed
        step = benchmarks["training.TrainStep.time_train_step"]
        assert step["param_names"] == ["dataset", "variant", "model"]
        assert ([v.strip("'") for v in step["params"][1]]
                == SMOKE_SELECTION["GNNPERF_ASV_VARIANTS"].split(","))
        assert ([m.strip("'") for m in step["params"][2]]
                == SMOKE_SELECTION["GNNPERF_ASV_MODELS"].split(","))


def _may_be_na(name: str, params: dict) -> bool:
    """n/a is right only for CUDA figures on a machine without CUDA, and
    for a variant of a model it cannot train (the registry's reason)."""
    import torch

    from gnnperf.models import get_model
    from gnnperf.variants import get_variant
    if "model" in params and "variant" in params:
        model, variant = params["model"].strip("'"), params["variant"].strip("'")
        if get_variant(variant).cannot_run_with(get_model(model)):
            return True
    return not torch.cuda.is_available() and any(tag in name for tag in CUDA_ONLY)


SPYGLASS_ENV = "GNNPERF_SPYGLASS"


def _spyglass() -> str:
    """The installed ``asv-spyglass`` (``$GNNPERF_SPYGLASS``, else on the
    PATH), or a skip: it needs Python >= 3.12, which the suite's venv may
    not be, and tests never download (``.ci/run`` installs it beside the
    venv where a Python 3.12 is present)."""
    import shutil

    found = os.environ.get(SPYGLASS_ENV) or shutil.which("asv-spyglass")
    if not found or not os.access(found, os.X_OK):
        pytest.skip("asv-spyglass not installed (pipx install asv-spyglass, Python >= 3.12; "
                    f"or set {SPYGLASS_ENV})")
    return found


@pytest.mark.e2e
def test_spyglass_compares_one_commit_across_two_environments(tmp_path):
    """docs/asv.md's route for dependency releases: ``asv compare -E a -E b``
    compares each environment with itself (ratio 1 everywhere); asv-spyglass
    compares the two result files. The files are written by asv's own
    ``Results`` for two environments of one commit, as ``asv run`` does."""
    spyglass = _spyglass()
    from asv.results import Results
    from asv.runner import BenchmarkResult

    bench = {"name": "training.TrainStep.time_train_step", "version": "v1", "type": "time",
             "params": [["'cora'"], ["'baseline'", "'sampled'"]], "unit": "seconds",
             "param_names": ["dataset", "variant"]}
    results = tmp_path / "results"
    (results / "runner").mkdir(parents=True)
    (results / "benchmarks.json").write_text(json.dumps({bench["name"]: bench, "version": 2}))
    files = []
    for env, medians in (("existing-pyg-2.7.0", [0.0200, 0.0100]),
                         ("existing-pyg-2.8.1", [0.0250, 0.0100])):
        run = Results({"machine": "runner"}, {"torch-geometric": env[-5:]}, "a" * 40, 1,
                      "3.11", env, {})
        samples = [[m * f for f in (0.99, 1.0, 1.01)] for m in medians]
        run.add_result(bench, BenchmarkResult(result=medians, samples=samples, number=[1, 1],
                                              errcode=0, stderr="", profile=None))
        run.save(str(results))
        files.append(results / "runner" / f"{'a' * 8}-{env}.json")
    out = subprocess.run([spyglass, "compare", *map(str, files),
                          str(results / "benchmarks.json")], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 1, out.stderr  # exit 1: a benchmark worsened by more than 10%
    rows = {line.split("|")[-2].strip().split(" [")[0]: line.split("|")[4].strip()
            for line in out.stdout.splitlines() if "time_train_step(" in line}
    assert rows == {"training.TrainStep.time_train_step('cora', 'baseline')": "1.25",
                    "training.TrainStep.time_train_step('cora', 'sampled')": "1"}


def test_one_comparison_cache_feeds_both_ratio_classes_and_isolates_a_failure(monkeypatch):
    """``fast_paths.comparisons_cache`` keys every figure the two classes read
    (each class's ``figure_key``), and a run that fails is found alone: a
    broken tutorial step fails the tutorial's ratio only, never the
    technique's."""
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks import caches, fast_paths

    calls = []

    def compare(data, label, variant, hidden, references):
        calls.append((variant, tuple(references)))
        if fast_paths.TUTORIAL in references and variant == "sparse":
            raise RuntimeError("a broken tutorial step beside sparse")
        return {ref: {"time_ratio": 1.0, "memory_ratio": 1.0, "error_delta": 0.0}
                for ref in references}
    monkeypatch.setattr(fast_paths, "compare", compare)
    monkeypatch.setattr(caches, "training_datasets_cache", lambda self: {})
    monkeypatch.setattr(caches, "dataset", lambda graphs, name: None)
    figures = fast_paths.comparisons_cache(None)

    technique, tutorial = fast_paths.TechniqueRatio(), fast_paths.TutorialRatio()
    for params in itertools.product(*fast_paths.TechniqueRatio.params):
        entry = figures[technique.figure_key(*params)]
        assert entry["time_ratio"] == 1.0, (params, entry)
    for params in itertools.product(*fast_paths.TutorialRatio.params):
        entry = figures[tutorial.figure_key(*params)]
        if params[1] == "sparse":
            assert "broken tutorial step" in entry["error"], entry
        else:
            assert entry["time_ratio"] == 1.0, (params, entry)
    # Built once per variant where it works; the failing pair measured apart.
    assert calls.count(("sparse", ("baseline", fast_paths.TUTORIAL))) == 1
    assert ("sparse", ("baseline",)) in calls and ("sparse", (fast_paths.TUTORIAL,)) in calls


def test_the_peakmem_floor_holds_what_the_benchmarks_above_it_hold_on_cuda(monkeypatch):
    # asv's peakmem_ is host RSS: on a GPU runner every training benchmark
    # holds a CUDA context and cuBLAS/cuSPARSE handles (hundreds of MiB), so
    # the no-op floor subtracted from them must hold them too.
    import torch
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks import compat, control, suite
    warmed = []
    monkeypatch.setattr(suite, "device", lambda: torch.device("cuda"))
    monkeypatch.setattr(suite, "set_threads", lambda: None)
    monkeypatch.setattr(compat, "gnnperf_name", lambda what, *older: {
        "measure.runner.warm_device": lambda dev: warmed.append((what, str(dev)))}[what])
    control.Control().setup()
    assert warmed == [("measure.runner.warm_device", "cuda")]


@pytest.mark.parametrize("k", [1.0, 2.0])
def test_the_growth_exponent_recovers_k_from_noisy_timings(monkeypatch, k):
    # Timings t = c * E^k over the scaling sizes with 10% multiplicative
    # noise, 200 draws: the fitted exponents centre on k and stay close.
    import random
    import statistics
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks.scaling import growth_exponent
    draws = random.Random(7)
    sizes = [1e4, 1e5, 1e6]
    fits = [growth_exponent(sizes, [3e-7 * e ** k * draws.lognormvariate(0, 0.1)
                                    for e in sizes]) for _ in range(200)]
    assert abs(statistics.fmean(fits) - k) < 0.01 and statistics.stdev(fits) < 0.1
    with pytest.raises(ValueError, match="two sizes or more"):
        growth_exponent([1e4], [1e-3])


def test_one_accuracy_cache_trains_every_pair_and_isolates_a_failure(monkeypatch):
    """``training.accuracy_cache`` trains every (dataset, variant, model) in
    one process; a crash fails that pair's benchmark alone, a declared
    "cannot here" is n/a, and the rest keep their figures."""
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks import caches, suite, training

    def trained(graphs, epochs, dataset, variant, model):
        if variant == "sparse" and model == "gcn":
            raise RuntimeError("a crash in sparse's step")
        if model == "gat":
            raise suite.NotHere("cannot combine")
        return {"test_error_pct": 20.0}
    monkeypatch.setattr(training, "trained_error_pct", trained)
    monkeypatch.setattr(caches, "training_datasets_cache", lambda self: {})
    monkeypatch.setattr(training.Accuracy, "params", [["cora"], ["baseline", "sparse"],
                                                      ["gcn", "gat"]])
    cache = training.accuracy_cache(None)
    assert set(cache) == set(itertools.product(*training.Accuracy.params))

    def error_pct(*params):
        bench = training.Accuracy()
        bench.setup(cache, *params)
        return bench.track_test_error_pct(cache, *params)
    assert error_pct("cora", "baseline", "gcn") == 20.0
    with pytest.raises(RuntimeError, match="a crash in sparse's step"):
        error_pct("cora", "sparse", "gcn")
    with pytest.raises(NotImplementedError, match="cannot combine"):
        error_pct("cora", "baseline", "gat")


def test_a_name_moved_by_the_measurement_wing_is_found_under_its_older_path(monkeypatch):
    # asv benchmarks commits from before gnnperf/measure/ too: a name is
    # looked up where this commit has it, then where older ones had it.
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks import compat
    from gnnperf.measure.runner import warm_device
    assert compat.gnnperf_name("no_such_module.warm_device",
                               "measure.runner.warm_device") is warm_device
    with pytest.raises(NotImplementedError, match="lacks no_such_module.warm_device"):
        compat.gnnperf_name("no_such_module.warm_device", "measure.no_such_name")


def test_a_users_model_package_joins_the_suite_from_its_own_folder(tmp_path):
    # asv runs benchmarks without the caller's PYTHONPATH: the folder the
    # model imports from is named in GNNPERF_ASV_PATH, and the model by its
    # import path becomes a model parameter (the case name records it).
    package = tmp_path / "teammodels"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "nets.py").write_text(
        "import torch\n\n"
        "def build(in_channels, hidden, out_channels, layers):\n"
        "    return torch.nn.Linear(in_channels, out_channels)\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["GNNPERF_ASV_MODELS"] = "gcn,teammodels.nets:build"
    code = "import benchmarks.profiles as p; print(p.PROFILE.models)"
    missing = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=300)
    assert missing.returncode != 0 and "GNNPERF_ASV_PATH" in missing.stderr
    found = subprocess.run([sys.executable, "-c", code], cwd=ROOT,
                           env={**env, "GNNPERF_ASV_PATH": str(tmp_path)},
                           capture_output=True, text=True, timeout=300)
    assert found.returncode == 0, found.stderr[-2000:]
    assert "teammodels.nets:build" in found.stdout


def test_each_benchmark_gets_the_regression_threshold_the_suite_declares_for_it():
    """asv publish takes the largest threshold of every regressions_thresholds
    pattern that matches a benchmark, so a catch-all must not match the
    benchmarks a smaller threshold is declared for (peak memory)."""
    pytest.importorskip("asv")
    from tool_script import load_tool
    study = load_tool("history_study")
    threshold = study.asv_threshold
    assert threshold("training.PeakMemory.peakmem_train_step('cora', 'baseline')") == 0.05
    assert threshold("training.TrainStep.time_train_step('cora', 'baseline', 'gcn')") == 0.25
    assert threshold(study.figure_entry("relative")) == 0.10
    assert threshold("compile.Compile.track_compile_seconds('cora', 'compiled')") == 0.30
