"""Files everyone writes: atomic writes (a reader sees a whole file or none),
and the check every command makes of where it will write, before any work."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from gnnperf.errors import GnnperfError


def write_atomic(path: str | os.PathLike, payload: bytes) -> None:
    """Writes via a temporary file and a rename, so a failure leaves no half file."""
    path = Path(path)
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(payload)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def check_output(path: str | os.PathLike | None, option: str) -> None:
    """Refuses, before any work, an output whose folder does not exist, so a
    long run never ends unable to write what it measured.

    Args:
        path: Where the command will write (``None``: the option was not given).
        option: The option's name as the user typed it (``--json``), for the message.

    Raises:
        GnnperfError: One line naming the option, the folder and the fix.
    """
    if path is None:
        return
    path = Path(path)
    if not path.parent.resolve().is_dir():
        raise GnnperfError(f"{option} {path}: folder {path.parent} does not exist; create it first")


__all__ = ["check_output", "write_atomic"]
