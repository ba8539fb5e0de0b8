"""Every private torch API gnnperf touches, in one place, each with why no
public one serves and its canary (tests/test_torch_private.py): a torch
release that moves one fails there by name, not somewhere in a measurement.

Two exceptions, by necessity. ``benchmarks/compile.py`` turns Inductor's
``fx_graph_cache`` off by name in its fresh interpreters (asked for with
``hasattr``), since asv runs the suite against commits that may have no
``torch_private``. ``gnnperf/measure/workcount.py`` uses
:class:`TorchDispatchMode`, ``OpOverload._schema`` (what
:func:`schema_arguments` reads) and the profiler's raw events
(``profile().profiler.kineto_results.events()``: each memory event's bytes,
time and device) itself, because the gate loads that file by path and runs
it against older trees, which have no ``torch_private``.

Every private name here and there exists in torch 2.11 (pyproject's floor,
:data:`OLDEST_TORCH`, the GPU image's) through 2.13, checked against both
releases' sources; where one may be absent the code asks for it by name
(``hasattr``) and skips it with the reason logged once (:func:`say_once`),
and each has a canary test that fails on the installed torch if it goes."""
from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import tempfile
from typing import Any, Iterator

import torch
# A dispatch mode seeing every ATen call (the op counter): torch has no
# public base class for one; FlopCounterMode and FakeTensorMode build on it.
from torch.utils._python_dispatch import TorchDispatchMode

#: torch._C._storage_Use_Count exists (the buffer pool needs it; without it
#: the pool is off and gathers get fresh tensors).
HAS_STORAGE_USE_COUNT = hasattr(torch._C, "_storage_Use_Count")


def storage_use_count(tensor: torch.Tensor) -> int:
    """References to :obj:`tensor`'s storage (tensors and views on it): no
    public API says whether a buffer is still referenced outside a pool."""
    return torch._C._storage_Use_Count(tensor.untyped_storage()._cdata)


def dynamo_counts() -> tuple[int, int]:
    """Dynamo's graphs compiled and graph breaks so far in this process:
    ``torch.compiler`` has no public count (only ``torch._dynamo.explain``,
    which compiles again)."""
    from torch._dynamo.utils import counters
    return counters["stats"]["unique_graphs"], sum(counters["graph_break"].values())


def _release(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


#: The oldest torch with every private setting below: ``trace_autograd_ops``
#: arrives in torch 2.11 (pyproject's torch floor is this release).
OLDEST_TORCH = (2, 11)


@functools.cache
def traces_autograd_ops() -> bool:
    """Whether Dynamo can trace ``torch.autograd.grad`` into a graph (its
    ``trace_autograd_ops`` flag, torch 2.11 on). Without it ``compiled``
    compiles the forward alone, as it does for steps it cannot trace whole.
    Asked when a step compiles, not at import: importing Dynamo is slow."""
    if _release(torch.__version__) < OLDEST_TORCH:
        return False
    import torch._dynamo as dynamo
    return hasattr(dynamo.config, "trace_autograd_ops")


def dynamo_config() -> Any:
    """``torch._dynamo.config``: Dynamo traces ``autograd.grad`` (the whole
    compiled step) only with its ``trace_autograd_ops`` flag (torch 2.11 on,
    :func:`traces_autograd_ops`), which has no public setter."""
    return torch._dynamo.config


def cpp_compiler() -> str | None:
    """The C++ compiler Inductor builds CPU kernels with, found as Inductor
    finds it (``torch._inductor.config.cpp.cxx``: ``$CXX``, else ``g++``,
    each run with ``--version``; MSVC's ``cl`` on Windows), or None where
    there is none: then every CPU ``torch.compile`` fails at its first call.
    No public API says whether Inductor has a compiler; asking Inductor's own
    search (``cpp_builder.get_cpp_compiler``, cached per process, so the
    compile that follows reuses its answer) keeps the check in step with
    what the compile will do. A torch without that function falls back to
    the same rule by hand."""
    try:
        from torch._inductor import cpp_builder
    except ImportError:
        cpp_builder = None
    if cpp_builder is None or not hasattr(cpp_builder, "get_cpp_compiler"):
        import os
        import shutil
        return shutil.which(os.environ.get("CXX", "g++"))
    try:
        return cpp_builder.get_cpp_compiler()
    except Exception:  # noqa: BLE001 -- any failed search (a broken $CXX too) is "none usable"
        return None


def warm_compiler_for_forks() -> None:
    """Picks Inductor's CPU vector ISA once, in a process that forks workers
    which compile (asv's forkserver): each child inherits the pick instead of
    paying it before its first compile. The pick
    (``torch._inductor.cpu_vec_isa.pick_vec_isa``, cached per process) builds
    a probe per candidate ISA and loads each in a fresh Python; no public API
    warms it. Importing Inductor's compiler as well would save a
    child more, but add to every child's resident floor, the base of each
    ``peakmem_`` figure, eager variants' included. A machine without a C++
    compiler picks no ISA, as its first compile would."""
    from torch._inductor.cpu_vec_isa import pick_vec_isa
    pick_vec_isa()


_LOG = logging.getLogger("gnnperf")
_SAID: set[str] = set()


def say_once(reason: str) -> None:
    """Logs :obj:`reason` (why a private setting is skipped here) once per process."""
    if reason not in _SAID:
        _SAID.add(reason)
        _LOG.warning("gnnperf: %s", reason)


def inductor_options(options: dict[str, Any]) -> dict[str, Any]:
    """The :obj:`options` (``torch.compile(options=...)``: Inductor config
    names) this torch's Inductor has. ``torch.compile`` rejects an unknown
    one at the first compiled call, so one a release renamed or removed is
    left out, the reason logged once; tests/test_torch_private.py's canary
    fails on the installed torch instead. Every one gnnperf sets exists from
    torch 2.11 (the floor, :data:`OLDEST_TORCH`) to 2.13."""
    import torch._inductor.config as config
    known = {}
    for name, value in options.items():
        if hasattr(config, name):
            known[name] = value
        else:
            say_once(f"torch {torch.__version__}'s Inductor has no option {name!r}: "
                     f"compiled runs without it")
    return known


@contextlib.contextmanager
def fresh_compile_cache() -> Iterator[str]:
    """A private, empty compile cache for the block, removed after it:
    Inductor's on-disk caches (FX graphs, AOTAutograd, C++ and Triton
    kernels: ``TORCHINDUCTOR_CACHE_DIR``, ``TRITON_CACHE_DIR``) and its
    in-memory code caches, so a compile inside is cold whatever compiled
    before in this process or on this machine. torch's own
    ``torch._inductor.utils.fresh_cache`` (torch 2.8 on; no public API makes
    a compile cold); a torch without it gets fresh on-disk caches only (the
    reason logged once). Yields how fresh: ``fresh`` or that fallback."""
    try:
        from torch._inductor.utils import fresh_cache
    except ImportError:
        fresh_cache = None
    if fresh_cache is not None:
        with fresh_cache():
            yield "fresh"
        return
    say_once(f"torch {torch.__version__} has no torch._inductor.utils.fresh_cache: compile "
             f"caches in memory are not cleared before a compiled run")
    root = tempfile.mkdtemp(prefix="gnnperf-inductor-")
    saved = {name: os.environ.get(name) for name in ("TORCHINDUCTOR_CACHE_DIR",
                                                     "TRITON_CACHE_DIR")}
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = root
    os.environ["TRITON_CACHE_DIR"] = os.path.join(root, "triton")
    try:
        yield "fresh on disk (in-memory code caches kept)"
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(root, ignore_errors=True)


def warm_compiler(device: torch.device) -> None:
    """Pays the compiler's one-off costs of a process, so a compiled run's
    first epoch holds its own compilation only: Inductor's import, on CPU
    its vector ISA pick (:func:`warm_compiler_for_forks`, where there is a
    C++ compiler), on a GPU its compile workers' start
    (``AsyncCompile.wait_pool_ready``: no public API starts them), and the
    lazy set-up of a first compile (Dynamo's, AOTAutograd's and Inductor's
    imports and pattern registration), by compiling a matrix product forward
    and backward in a throwaway fresh cache. On CPU the product alone:
    extern kernels, no C++ kernel to build (a C++ build's own first-use
    set-up, under a second on 2 cores, stays in the first compiled run);
    on a GPU with a ReLU after it, so Triton's first kernel (its import and
    driver set-up) is built here too. A second call costs a fraction of a
    second."""
    import torch._inductor.compile_fx  # noqa: F401 -- Inductor's import, once per process
    device = torch.device(device)
    if device.type == "cpu":
        if cpp_compiler() is None:
            return  # nothing compiles on this CPU (compiled is n/a)
        warm_compiler_for_forks()
    else:
        from torch._inductor.async_compile import AsyncCompile
        wait = getattr(AsyncCompile, "wait_pool_ready", None)
        if wait is None:
            say_once(f"torch {torch.__version__} has no AsyncCompile.wait_pool_ready: a "
                     f"compiled run's first epoch may hold its compile workers' start")
        else:
            wait()

    def product(left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
        out = left @ right
        return out if device.type == "cpu" else out.relu()

    weight = torch.ones(4, 4, device=device, requires_grad=True)
    with fresh_compile_cache():
        torch.compile(product)(torch.ones(4, 4, device=device), weight).backward(
            torch.ones(4, 4, device=device))
    torch.compiler.reset()


def compile_cache_hits() -> int:
    """Inductor's FX graph and AOTAutograd cache hits so far in this process
    (Dynamo's counters, private like :func:`dynamo_counts`)."""
    from torch._dynamo.utils import counters
    return (counters["inductor"]["fxgraph_cache_hit"]
            + counters["aot_autograd"]["autograd_cache_hit"])


def schema_arguments(op) -> list:
    """The arguments of an ATen overload's schema (``OpOverload._schema``,
    what torchgen and FakeTensor read): which ones an op writes."""
    return op._schema.arguments


__all__ = ["HAS_STORAGE_USE_COUNT", "OLDEST_TORCH", "TorchDispatchMode", "compile_cache_hits",
           "cpp_compiler", "dynamo_config", "dynamo_counts", "fresh_compile_cache",
           "inductor_options", "say_once", "schema_arguments", "storage_use_count",
           "traces_autograd_ops", "warm_compiler", "warm_compiler_for_forks"]
