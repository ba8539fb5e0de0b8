"""The exception types the CLI turns into a one-line error."""


class GnnperfError(Exception):
    """A user-facing error: its message is one line that names the fix."""


class Unavailable(GnnperfError):
    """A declared "cannot here": an optional dependency missing, a user's
    graph file absent on this runner, CUDA-only work on a CPU machine, too
    few cores or GPUs. The one error that tables, the gate and asv show as
    n/a (with this message) instead of a failure."""


class UnknownVariant(Unavailable):
    """A variant name the registry does not know: a typo at the command
    line (exit 2 there), and in asv a variant this commit does not have yet
    (n/a)."""


def is_unavailable(exc: BaseException) -> bool:
    """Whether :obj:`exc` is a declared "cannot here" (:class:`Unavailable`),
    by class name: the gate's workers and the asv suite meet the exception
    classes of other checkouts of gnnperf."""
    return any(k.__name__ == "Unavailable" for k in type(exc).__mro__)
