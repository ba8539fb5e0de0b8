"""The exception types the CLI turns into a one-line error, and the one rule
for which failures are a declared "cannot here" (n/a) rather than a failure.

Standard library only: the gate's workers and the asv suite load this file by
path and apply it to exceptions raised by other checkouts of gnnperf."""
from __future__ import annotations

import re
import sys


class GnnperfError(Exception):
    """A user-facing error: its message is one line that names the fix."""


class Unavailable(GnnperfError):
    """A declared "cannot here": an optional dependency missing, a user's
    graph file absent on this runner, an op torch lacks on this device,
    CUDA-only work on a CPU machine, too few cores or GPUs. The one error that
    tables, the gate and asv show as n/a (with this message) instead of a
    failure."""


# Terminal control sequences (torch styles its weights_only refusal in bold):
# CSI ("ESC [ ... m"), OSC ("ESC ] ... BEL" or "... ESC \\", hyperlinks), and
# the other two-byte escapes; then any control character left.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?")
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]+")


def plain(text: str) -> str:
    """:obj:`text` without terminal escape codes and control characters
    (tabs and line breaks become one space): what a message may quote from
    another library's exception."""
    return " ".join(_CONTROLS.sub(" ", _ESCAPES.sub("", text)).split())


def first_line(exc: BaseException) -> str:
    """``Type: first line`` of :obj:`exc`'s text, :func:`plain`: how a
    one-line message quotes an exception it wraps."""
    lines = [plain(line) for line in str(exc).splitlines()]
    return f"{type(exc).__name__}: {next((line for line in lines if line), 'corrupt data')}"


class NonFiniteLoss(GnnperfError, ArithmeticError):
    """A training step's loss was NaN or infinite: the variant's numerics
    broke, and NaN arithmetic can run faster than real arithmetic, so
    nothing of it is reported (the one type, raised by
    ``gnnperf/measure/case.py``'s :func:`check_losses`)."""


class UnknownVariant(Unavailable):
    """A variant name the registry does not know: a typo at the command
    line (exit 2 there), and in asv a variant this commit does not have yet
    (n/a)."""


# What torch says when it has no kernel for an op on this backend or dtype
# (bf16 sparse CSR matmul on CPU: "addmm: computation on CPU is not implemented
# for SparseCsr + Strided @ Strided"; "Could not run 'aten::...' with arguments
# from the 'SparseCsrCPU' backend").
_TORCH_LACKS = ("could not run", "not implemented for", "is not implemented for")


def _names(exc: BaseException) -> set[str]:
    return {k.__name__ for k in type(exc).__mro__}


def is_unknown_variant(exc: BaseException) -> bool:
    """The registry's "no such variant" (``UnknownVariant``; in checkouts
    before it, the plain error whose message says so)."""
    return "UnknownVariant" in _names(exc) or (
        type(exc).__name__ == "GnnperfError" and str(exc).startswith("unknown variant"))


def is_unavailable(exc: BaseException) -> bool:
    """Whether :obj:`exc` is a declared "cannot here", by class name (the
    classes may be another checkout's): :class:`Unavailable`, a
    :class:`NotImplementedError` in which torch says it lacks a kernel here,
    or, in checkouts before :class:`Unavailable`, the plain error that names
    a package to install."""
    names = _names(exc)
    if "Unavailable" in names:
        return True
    text = str(exc).lower()
    if isinstance(exc, NotImplementedError):
        return any(marker in text for marker in _TORCH_LACKS)
    module = sys.modules.get(type(exc).__module__)
    legacy = "GnnperfError" in names and not hasattr(module, "Unavailable")
    return legacy and "pip install" in text
