"""The suite's own instrument and rules, taken from the gnnperf that
carries this suite whatever commit is benchmarked: ``gnnperf/measure/case.py``
(the one way to build, warm, fix a batch, time a step and tune the
collector) and ``gnnperf/errors.py`` (the one rule of what is a declared
"cannot here"), both loaded by path (:func:`suite_sources`: beside the suite
in a checkout, around it where the suite is installed as
``gnnperf.asv_suite``); the n/a rules built on them; the device and threads.

Over gnnperf's own history the benchmarks come from the working tree while
gnnperf comes from each benchmarked commit, so everything taken from gnnperf
is looked up lazily. Over an adopting repository's commits (the suite
installed with gnnperf in asv's environment, gnnperf/asv_init.py) both are
that one installed version.
n/a (:class:`NotImplementedError`) means "cannot here" for a declared reason
only: a variant or module this commit does not have, gnnperf's
``Unavailable`` (an optional dependency missing, a user's graph absent on
this runner), CUDA-only on CPU, too few cores. Every other exception fails
its benchmark, with its traceback in asv's output: a crash must never look
like a variant an old commit lacks.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
from pathlib import Path

import torch

DEVICE_ENV = "GNNPERF_ASV_DEVICE"
#: torch's intra-op threads in every benchmark: one, as on the gate's
#: workers; more threads on the small CI machines measure the contention
#: with other load more than the step.
THREADS = 1


def suite_sources(suite_dir: Path) -> Path:
    """The ``gnnperf`` folder whose ``errors.py`` and ``measure/case.py``
    the suite in :obj:`suite_dir` loads: the one beside it in a checkout
    (``benchmarks/`` next to ``gnnperf/``), else the one around it where
    the suite is installed (``gnnperf/asv_suite/``, the wheel's layout).

    Args:
        suite_dir: The folder of the suite's modules.

    Raises:
        ImportError: Neither layout holds both files.
    """
    for folder in (suite_dir.parent / "gnnperf", suite_dir.parent):
        if (folder / "errors.py").is_file() and (folder / "measure" / "case.py").is_file():
            return folder
    raise ImportError(f"gnnperf's errors.py and measure/case.py are neither beside nor around "
                      f"the suite in {suite_dir}; install gnnperf (its wheel carries the suite) "
                      f"or run the suite from a gnnperf clone")


#: The gnnperf folder the suite's instrument comes from (:func:`suite_sources`).
SUITE_SOURCES = suite_sources(Path(__file__).resolve().parent)


def load_suite_module(name: str):
    """``<name>.py`` of :data:`SUITE_SOURCES`, loaded by path and applied to
    every benchmarked commit's gnnperf (``case.py`` loads its sibling
    ``errors.py`` under the same prefix, so both see one module)."""
    module_name = f"_gnnperf_asv_{Path(name).stem}"
    if module_name not in sys.modules:
        path = SUITE_SOURCES / f"{name}.py"
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    return sys.modules[module_name]


ERRORS = load_suite_module("errors")
CASES = load_suite_module("measure/case")


class NotHere(NotImplementedError):
    """The suite's own n/a: what this commit or machine cannot do here."""


def declared_na(exc: BaseException) -> bool:
    """Whether :obj:`exc` is a declared "cannot here": the suite's own
    :class:`NotHere`, or what ``gnnperf/errors.py`` says is one (gnnperf's
    ``Unavailable``, an unknown variant, torch lacking a kernel on this
    device). A bare :class:`NotImplementedError` from a bug is a failure."""
    return (isinstance(exc, NotHere) or ERRORS.is_unavailable(exc)
            or ERRORS.is_unknown_variant(exc))


@contextlib.contextmanager
def unavailable_as_na():
    """Turns a declared "cannot here" (:func:`declared_na`: a missing
    optional dependency such as pymetis in this environment) into asv's n/a;
    every other exception goes on and fails the benchmark."""
    try:
        yield
    except Exception as exc:
        if declared_na(exc) and not isinstance(exc, NotHere):
            raise NotHere(str(exc)) from None
        raise


def measured_or_reason(measure, *args, **kwargs) -> dict:
    """``measure(*args, **kwargs)`` (a dict of figures) or, where it raised,
    ``{"n/a": reason}`` for a declared "cannot here" and ``{"error":
    traceback}`` for anything else: what ``setup_cache`` stores per case, so
    :class:`~benchmarks.base.CachedFigures` fails the benchmarks of a crash
    and skips the rest. In a ``setup_cache`` process every object alive
    before the case is frozen first (:func:`prepare_process`)."""
    import traceback
    if sys.argv[1:2] == ["setup_cache"]:
        CASES.freeze_collector()
    try:
        return measure(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 -- sorted into n/a and failed, none hidden
        if declared_na(exc):
            return {"n/a": f"{type(exc).__name__}: {exc}"}
        return {"error": traceback.format_exc()}


# Environment -----------------------------------------------------------------
def set_threads() -> None:
    """Pins torch's intra-op threads (every ``setup`` calls it: cheap)."""
    if torch.get_num_threads() != THREADS:
        torch.set_num_threads(THREADS)


def device() -> torch.device:
    """``$GNNPERF_ASV_DEVICE`` (``auto`` by default: CUDA when present).

    Called on import too (parameter lists), in the process asv's forkserver
    forks every benchmark from: ``torch.cuda.device_count`` asks NVML and
    leaves no CUDA context behind, where ``torch.cuda.is_available`` would
    initialise the driver and poison every forked child (torch's note on
    fork poisoning). Where NVML cannot load, ``device_count`` falls back to
    the driver itself, and forkserver is then unsafe on that runner: use
    ``--launch-method spawn`` there."""
    name = os.environ.get(DEVICE_ENV, "auto")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.device_count() > 0 else "cpu")
    return torch.device(name)


def require_cuda() -> torch.device:
    dev = device()
    if dev.type != "cuda":
        raise NotHere("CUDA-only metric; this machine runs on CPU")
    return dev



# Processes -----------------------------------------------------------------------
def prepare_process() -> None:
    """The one place the suite tunes asv's processes, called once when the
    suite is imported (``benchmarks/__init__.py``).

    In asv's forkserver (``asv/benchmark.py run_server``), which imports the
    suite once and forks every benchmark from it (asv runs each
    ``setup_cache`` as a process of its own, which gets neither):

    - Inductor's CPU vector ISA pick is made once here instead of in each
      child that compiles (``warm_compiler_for_forks`` of
      :data:`SUITE_SOURCES`' ``torch_private.py``, whatever the benchmarked
      commit, so every commit and every variant selection get the same
      resident floor, the base of the ``peakmem_`` figures). A pick that
      fails (no C++ compiler, an unwritable cache) is left to each child's
      first compile. ``compile.Compile`` measures in fresh interpreters, so
      its figure keeps what a user's first compile pays.
    - Every object alive is frozen before each fork
      (:func:`gnnperf.measure.case.freeze_before_forks`): a child's
      collections, such as the one before each profiled step, skip the
      suite's import.

    A ``setup_cache`` process freezes before each case instead
    (:func:`measured_or_reason`), so the steps a cache times run with the
    collector as a forked child has it. Discovery and spawned runs get
    neither: :mod:`compile`'s fresh interpreters measure what a user's first
    compile pays, collections included."""
    if sys.argv[1:2] != ["run_server"]:
        return
    try:
        load_suite_module("torch_private").warm_compiler_for_forks()
    except Exception as exc:  # noqa: BLE001 -- an optimisation only
        print(f"gnnperf: the forkserver's compiler warm-up failed ({exc}); "
              "each compiling benchmark picks its ISA itself", file=sys.stderr)
    CASES.freeze_before_forks()
