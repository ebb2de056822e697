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

from mtl_mcp.errors import StoreError

PURGE_LOCK_WAIT = 60.0  # seconds a purge waits for in-flight writes to finish


@contextlib.contextmanager
def _lock_file(path: Path) -> Iterator[int]:
    """The open lock file at `path` (created 0600); closing it on exit releases any lock."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        yield fd
    finally:
        os.close(fd)


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
    """Serialize creating a new local store: a second process must not see it half made."""
    if store is None:
        yield
        return
    with _lock_file(Path(f"{store}.create.lock")) as fd:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
