"""Advisory file locks shared by processes on one machine.

They guard a store in a local directory. A store on object storage is shared by machines no
lock file reaches: there every function here is a no-op (`store` is None), and the callers
rely on LanceDB's commit protocol instead (`mtl_mcp.storage.table`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from mtl_mcp.errors import StoreError, StoreReadOnly
from mtl_mcp.files import open_private

PURGE_LOCK_WAIT = 60.0  # seconds a purge waits for in-flight writes to finish


@contextlib.contextmanager
def _lock_file(path: Path, needed: bool = True) -> Iterator[int | None]:
    """The open lock file at `path` (created 0600); closing it on exit releases any lock.

    Where this process may not write (a read-only data directory), an existing lock file is
    opened read-only: flock works on it, so readers still wait for a creation in progress.
    When there is none and none can be created, StoreReadOnly, or None if not `needed`.
    """
    fd: int | None
    try:
        fd = open_private(path, os.O_RDWR)
    except StoreReadOnly:
        fd = _open_existing(path)
        if fd is None and needed:
            raise
    if fd is None:
        yield None
        return
    try:
        yield fd
    finally:
        os.close(fd)


def _open_existing(path: Path) -> int | None:
    """The lock file opened read-only, or None if there is none."""
    try:
        return os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None


def _lock_within(fd: int, seconds: float) -> bool:
    """Lock `fd` exclusively, waiting up to `seconds` for others to let go; False if they
    did not (0 tries once)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)


@contextlib.contextmanager
def try_exclusive(path: Path, wait: float = 0.0) -> Iterator[bool]:
    """Hold an exclusive lock on `path` once no other process does, waiting up to `wait`
    seconds: yields True if this one holds it."""
    with _lock_file(path) as fd:
        assert fd is not None  # a needed lock file
        yield _lock_within(fd, wait)


@contextlib.contextmanager
def store_lock(store: Path | None, exclusive: bool = False) -> Iterator[None]:
    """An advisory lock beside a local store: writes share it, a purge or restore holds it alone.

    A purge deletes every file no committed version references, which would include the
    files of a write in flight in another process; the lock makes it wait for those.
    """
    if store is None:
        yield
        return
    with _lock_file(Path(f"{store}.lock")) as fd:
        assert fd is not None  # a needed lock file
        if not exclusive:
            fcntl.flock(fd, fcntl.LOCK_SH)
        elif not _lock_within(fd, PURGE_LOCK_WAIT):
            raise StoreError(
                f"other processes kept writing to {store} for "
                f"{PURGE_LOCK_WAIT:.0f} s: stop the running mtl-mcp servers and retry"
            )
        yield


@contextlib.contextmanager
def try_store_lock(store: Path | None, suffix: str) -> Iterator[bool]:
    """A non-blocking exclusive lock beside a local store: True if this process holds it."""
    if store is None:
        yield True
        return
    with try_exclusive(Path(f"{store}{suffix}")) as mine:
        yield mine


@contextlib.contextmanager
def creating(store: Path | None) -> Iterator[None]:
    """Serialize creating a new local store: a second process must not see it half made.

    In a read-only directory with no lock file, no process created a store there (each
    leaves the lock file), so there is nothing to wait for: reading goes on without it.
    """
    if store is None:
        yield
        return
    with _lock_file(Path(f"{store}.create.lock"), needed=False) as fd:
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
