"""Shared test set-up. The README's ``pytest`` runs on two pytest-xdist
workers (``-n 2 --dist loadgroup`` in pyproject's addopts), so everything
here works in one process and across two:

- the Inductor cache is one directory for the whole run, its workers and
  every subprocess they start (the gate's workers, asv, ``python -m
  gnnperf``): each distinct graph compiles cold once per checkout, then loads
  from the cache, which is a small part of a cold compile's time;
- tests that start two ranks share one xdist group (``TWO_RANKS`` in
  test_distributed.py, a marker on each test: xdist reads the groups before
  a conftest hook could add them): two of them never run at once on the two
  cores (the asv smoke run, the longest test, runs beside them: its own
  ranks are a few seconds of it);
- each standard variant trains once per run (:func:`trained`), whichever
  worker asks first, and the others read its result;
- what is alive after each test is frozen (:func:`_collections_skip_earlier_tests`),
  so the collector's full passes in the next one skip torch, PyG and earlier
  tests' objects.
"""
import copy
import os
import pickle
from pathlib import Path

import pytest
import torch

def processes_with(marker: str) -> list[int]:
    """Live processes (no zombies) whose environment holds :obj:`marker`
    (``NAME=value``, set on the process a test starts and inherited by its
    children): what a test starts and must not leave behind (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "environ").read_bytes():
                if "(zombie)" not in (entry / "status").read_text():
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


# The one training of every standard variant that the variant, doctor and
# CLI tests share: Cora, seed 0, the doctor's 2 warm-up epochs. At 30 epochs
# every variant's loss has fallen below a tenth of its first and its test
# accuracy is in the range the accuracy checks expect; most of the registry's
# training time is its two cold compiles.
TRAINED_EPOCHS = 30
TRAINED_WARMUP = 3  # the first epoch, the one whose work is counted, the memory one


def pytest_configure(config):
    # Set before any test imports torch's compiler; subprocesses inherit it.
    # A user's own TORCHINDUCTOR_CACHE_DIR wins.
    if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
        cache = getattr(config, "cache", None)
        folder = (cache.mkdir("torchinductor") if cache is not None
                  else Path(config.rootpath) / ".pytest_cache" / "torchinductor")
        folder.mkdir(parents=True, exist_ok=True)
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(folder)
    # Inductor compiles in-process instead of in a pool of compile workers it
    # starts per compiling process: both cores are already busy with the two
    # xdist workers, and the pool's start costs CPU without shortening a
    # cold compile's wall time.
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    _build_asv_environment_in_background(config)


#: The tests that run in asv's own environment (test_asv_suite.py's
#: smoke): a third of the way through the run rather than at its start, so
#: the environment's build (begun when the run begins, where it is absent)
#: is done by the time they need it, instead of a worker idling on it while
#: the other runs the rest.
IN_ASV_BUILT_ENVIRONMENT = "test_asv_quick_smoke"


@pytest.hookimpl(trylast=True)  # after -m and -k deselect: a third of what runs
def pytest_collection_modifyitems(config, items):
    moved = [item for item in items if getattr(item, "originalname", None) == IN_ASV_BUILT_ENVIRONMENT]
    if not moved or len(moved) == len(items):
        return
    rest = [item for item in items if getattr(item, "originalname", None) != IN_ASV_BUILT_ENVIRONMENT]
    at = len(rest) // 3
    items[:] = rest[:at] + moved + rest[at:]


def _build_asv_environment_in_background(config) -> None:
    """Starts building asv's own environment (test_asv_suite.py's smoke runs
    in it) when the run begins, where it is absent, so the build overlaps
    the other tests instead of one worker building while the other waits
    for it. It holds the environment lock the smoke's fixture takes, which
    then finds the environment built; .ci/run starts the same build earlier
    still. Only for the whole end-to-end tier, ``pytest -m e2e`` (no paths
    but the configured test folder, no ``-k`` or ``--collect-only``), and
    only in its first process (not an xdist worker): a selection that runs
    no smoke, the README's ``pytest`` among them, never starts a build."""
    root = Path(config.rootpath)
    whole_run = [Path(arg).resolve() for arg in config.args] == [root / "tests"]
    if (hasattr(config, "workerinput") or not whole_run or config.getoption("keyword")
            or config.getoption("markexpr") != "e2e" or config.getoption("collectonly")):
        return
    if not (root / "asv.conf.json").is_file() or not (root / ".git").exists():
        return
    try:
        from asv.config import Config
        from asv.environment import get_environments
        conf = Config.load(str(root / "asv.conf.json"))
        conf.env_dir = str(root / conf.env_dir)  # asv reads it from the folder it runs in
        env, = get_environments(conf, None, verbose=False)
        if env.check_presence():
            return
    except Exception:  # noqa: BLE001 -- the smoke's own fixture builds it and reports why not
        return
    import subprocess
    import sys
    lock = root / ".asv" / "env.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    build = ("import fcntl, subprocess, sys\n"
             f"lock = open({str(lock)!r}, 'a')\n"
             "fcntl.flock(lock, fcntl.LOCK_EX)\n"
             "subprocess.call([sys.executable, '-m', 'asv', 'setup'])\n")
    with open(root / ".asv" / "setup-pytest.log", "w") as log:  # .ci/run's is setup.log
        subprocess.Popen([sys.executable, "-c", build], cwd=root, stdout=log,
                         stderr=subprocess.STDOUT, start_new_session=True)


@pytest.fixture(scope="session", autouse=True)
def _offline_cache(tmp_path_factory):
    # Tests never download and never write outside their temporary folders
    # (and the checkout's ignored .pytest_cache); they read only what the
    # project carries (the bundled Planetoid files).
    os.environ["GNNPERF_CACHE"] = str(tmp_path_factory.mktemp("gnnperf-cache"))
    os.environ.pop("GNNPERF_DATA", None)
    torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _collections_skip_earlier_tests():
    """Freezes (:func:`gnnperf.measure.case.freeze_collector`) every object
    alive after a test: torch's, PyG's, the compiler's once imported, the
    session fixtures'. A full collection in a worker then walks only what
    the current test made (the one before every measured run, the one
    before each profiled step of the work metrics, the collector's
    automatic ones). What a test drops is still collected; an object alive
    at a test's end that dies later in a cycle (compile artifacts a later
    ``torch.compiler.reset`` drops) stays allocated until the worker exits.
    :func:`gnnperf.measure.runner.measure_variant` keeps a caller's frozen
    objects frozen, as for any caller; its own freeze, for an unfrozen
    process as a user's is, is tested in test_measure.py with the collector
    unfrozen. Runs after the test's own fixtures are torn down (autouse, so
    set up first)."""
    yield
    from gnnperf.measure.case import freeze_collector
    freeze_collector()


@pytest.fixture(scope="session")
def planetoid_root() -> Path:
    from gnnperf.data import BUNDLED_PLANETOID
    return BUNDLED_PLANETOID


@pytest.fixture(scope="session")
def cora_dataset():
    """Bundled Cora as :func:`gnnperf.data.load_dataset` gives it: the
    :class:`~gnnperf.data.Dataset` record that ``measure_variant`` takes."""
    from gnnperf.data import load_dataset
    return load_dataset("cora")


@pytest.fixture(scope="session")
def cora(cora_dataset):
    """Cora's graph (a PyG ``Data``), what techniques and samplers take."""
    return cora_dataset.graph


def _run_folder(tmp_path_factory) -> Path:
    """A folder every xdist worker of this run sees (the run's base temp)."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    return shared / "trained-variants"


@pytest.fixture(scope="session")
def trained(tmp_path_factory, cora_dataset):
    """``trained(variant)``: :func:`gnnperf.measure.runner.measure_variant` of a
    standard variant on Cora for :data:`TRAINED_EPOCHS` epochs (seed 0,
    :data:`TRAINED_WARMUP` warm-up epochs), trained once per test run. The
    first worker to ask trains it under a file lock and pickles the result;
    the others load it. Each call returns a fresh copy."""
    from filelock import FileLock

    from gnnperf.measure.runner import measure_variant
    from gnnperf.variants import TrainConfig, get_variant

    folder = _run_folder(tmp_path_factory)
    folder.mkdir(parents=True, exist_ok=True)
    local: dict = {}

    def get(name: str):
        if name not in local:
            path = folder / f"{name.replace('+', '_')}.pkl"
            with FileLock(str(path) + ".lock"):
                if path.exists():
                    local[name] = pickle.loads(path.read_bytes())
                else:
                    local[name] = measure_variant(get_variant(name), cora_dataset,
                                                  TrainConfig(epochs=TRAINED_EPOCHS),
                                                  torch.device("cpu"), TRAINED_WARMUP)
                    path.write_bytes(pickle.dumps(local[name]))
        return copy.deepcopy(local[name])
    return get


@pytest.fixture
def reuse_trained(trained, monkeypatch):
    """Makes :func:`gnnperf.measure.runner.measure_variant` answer a call like the
    one the :func:`trained` fixture made (a standard variant, the bundled
    Cora by name and source, its epochs, warm-up and seed, default options,
    CPU) from that training, so the doctor and ``gnnperf run`` tests go
    through their real code paths without training the registry again. Any
    other call trains for real. It does not see process state (threads, a
    monkeypatched technique): a test that changes those must not use it.
    ``.hits`` lists the variants it answered."""
    import gnnperf.measure.runner
    from gnnperf.variants import TrainConfig, standard_variants

    real = gnnperf.measure.runner.measure_variant
    standard = set(standard_variants())
    expected = TrainConfig(epochs=TRAINED_EPOCHS)

    def measure_variant(variant, dataset, config=None, device="cpu", warmup_epochs=3,
                        on_epoch=None, track_accuracy=True):
        if (variant.name in standard and config == expected and warmup_epochs == TRAINED_WARMUP
                and str(device) == "cpu" and dataset.name == "cora"
                and dataset.source.startswith("planetoid (bundled)")):
            for _ in range(config.epochs):
                if on_epoch is not None:
                    on_epoch()
            measure_variant.hits.append(variant.name)
            return trained(variant.name)
        return real(variant, dataset, config, device, warmup_epochs, on_epoch, track_accuracy)

    measure_variant.hits = []

    monkeypatch.setattr(gnnperf.measure.runner, "measure_variant", measure_variant)
    return measure_variant
