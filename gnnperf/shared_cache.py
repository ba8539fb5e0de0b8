"""Caches several processes fill at once: a gate's two arms, asv's
processes, test workers and data-parallel ranks all start on the same cold
``$GNNPERF_CACHE``.

One rule for every entry (a file or a folder): it is built in a private
place beside where it goes and published by a rename, under a lock on the
entry, so a reader sees a whole entry or none, and N processes on a cold
cache build it once while the others wait and read it. A reader tries a
published entry without the lock (the common, warm case); whatever fails
there is decided under the lock, where an entry that still fails to load is
corrupt: it is rebuilt, and said once on stderr.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Callable, Iterator, TypeVar

from gnnperf.errors import GnnperfError, first_line

T = TypeVar("T")
#: Where gnnperf writes what it derives (processed datasets, roofs, METIS
#: partitions, locks): ``$GNNPERF_CACHE``, else the XDG cache folder.
CACHE_ENV = "GNNPERF_CACHE"
# Building the largest entries (a processed OGB graph, a download) takes
# minutes; a lock held far longer belongs to a process that hangs.
LOCK_TIMEOUT_S = 3600.0


def cache_dir() -> Path:
    """The writable cache (``$GNNPERF_CACHE``, else ``~/.cache/gnnperf``)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "gnnperf"


def lock_path(entry: str | os.PathLike) -> Path:
    """The lock file of :obj:`entry`: in ``<cache>/locks``, named by the
    entry's absolute path, so entries in read-only or user folders (a
    ``pyg:`` dataset's processed files under ``$GNNPERF_DATA``) are locked
    without writing beside them."""
    entry = Path(entry).absolute()
    digest = hashlib.sha256(str(entry).encode()).hexdigest()[:16]
    slug = re.sub(r"[^A-Za-z0-9.+-]+", "_", entry.name)[-60:]
    return cache_dir() / "locks" / f"{slug}-{digest}.lock"


@contextlib.contextmanager
def locked(entry: str | os.PathLike) -> Iterator[None]:
    """Holds :obj:`entry`'s lock (an OS file lock: a killed holder releases it)."""
    import filelock
    path = lock_path(entry)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = filelock.FileLock(str(path), timeout=LOCK_TIMEOUT_S)
    try:
        lock.acquire()
    except filelock.Timeout:
        raise GnnperfError(f"another process has held the lock {path} on {entry} for "
                           f"{LOCK_TIMEOUT_S:.0f} s; stop the gnnperf process that hangs "
                           f"and retry") from None
    try:
        yield
    finally:
        lock.release()


def publish(entry: str | os.PathLike, build: Callable[[Path], T]) -> T:
    """Runs ``build(private)``, which makes :obj:`entry` at the private path
    (a file or a folder, not yet there), then renames it into place,
    replacing an old entry. The caller holds :func:`locked`.

    The private path is in the nearest existing folder above :obj:`entry`
    (one file system, so the rename is atomic); the folders above
    :obj:`entry` are made only once it is built, so a failed build leaves
    nothing behind (and OGB, which takes a dataset folder without its release
    file for an old download, never sees one made early).
    """
    entry = Path(entry).absolute()
    base = entry.parent
    while not base.is_dir():
        base = base.parent
    prefix = f".{entry.name}.{hashlib.sha256(str(entry).encode()).hexdigest()[:8]}."
    # Builders of this entry hold its lock: other private copies are a killed
    # process's leftovers.
    for stale in base.glob(f"{glob_escape(prefix)}*.tmp"):
        _remove(stale)
    private = Path(tempfile.mkdtemp(dir=base, prefix=prefix, suffix=".tmp"))
    private.rmdir()  # the name stays unique by its random part; build makes a file or folder
    try:
        result = build(private)
        entry.parent.mkdir(parents=True, exist_ok=True)
        if entry.is_dir() and not entry.is_symlink():
            # A folder cannot be renamed over another: the old one moves aside first.
            old = private.with_name(private.name[:-len(".tmp")] + ".old.tmp")
            os.rename(entry, old)
            os.rename(private, entry)
            _remove(old)
        else:
            os.replace(private, entry)
    except BaseException:
        _remove(private)
        raise
    return result


def cached(entry: str | os.PathLike, load: Callable[[Path], T], build: Callable[[Path], T],
           what: str, refresh: bool = False) -> T:
    r"""The cache entry :obj:`entry`, read by ``load(entry)``; built by
    ``build(private)`` and published (:func:`publish`) when absent, when
    :obj:`load` fails on it under the lock (a corrupt entry: rebuilt, with
    one line on stderr), or when :obj:`refresh`.

    Args:
        entry (Path): Where the entry lives (a file or a folder).
        load (callable): Reads a published entry; raises on an unreadable one.
        build (callable): Makes the entry at the private path it is given
            and returns what :obj:`load` would.
        what (str): The entry in the stderr line, e.g. ``"processed Cora"``.
        refresh (bool): Build it again whatever is there.
    """
    entry = Path(entry)
    if not refresh and os.path.lexists(entry):
        try:
            return load(entry)
        except Exception:  # noqa: BLE001 -- absent, being replaced or corrupt: decided below
            pass
    with locked(entry):
        broken = None
        if not refresh and os.path.lexists(entry):
            try:
                return load(entry)  # another process built it while this one waited
            except Exception as exc:  # noqa: BLE001 -- any failure to read is a corrupt entry
                broken = exc
        result = publish(entry, build)
    if broken is not None:
        print(f"gnnperf: the cached {what} in {entry} was unreadable ({first_line(broken)}); "
              f"rebuilt it", file=sys.stderr)
    return result


def glob_escape(name: str) -> str:
    """:obj:`name` with glob's special characters taken literally."""
    return re.sub(r"([*?\[])", r"[\1]", name)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


__all__ = ["LOCK_TIMEOUT_S", "cached", "lock_path", "locked", "publish"]
