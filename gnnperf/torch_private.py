"""Every private torch API gnnperf touches, in one place, each with why no
public one serves and its canary (tests/test_torch_private.py): a torch
release that moves one fails there by name, not somewhere in a measurement.

One exception, by necessity: ``gnnperf/measure/workcount.py`` uses
:class:`TorchDispatchMode` and ``OpOverload._schema`` itself (what
:func:`schema_arguments` reads), because the gate loads that file by path
and runs it against older trees, which have no ``torch_private``."""
from __future__ import annotations

import functools
from typing import Any

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


def schema_arguments(op) -> list:
    """The arguments of an ATen overload's schema (``OpOverload._schema``,
    what torchgen and FakeTensor read): which ones an op writes."""
    return op._schema.arguments


__all__ = ["HAS_STORAGE_USE_COUNT", "OLDEST_TORCH", "TorchDispatchMode", "cpp_compiler",
           "dynamo_config", "dynamo_counts", "schema_arguments", "storage_use_count",
           "traces_autograd_ops", "warm_compiler_for_forks"]
