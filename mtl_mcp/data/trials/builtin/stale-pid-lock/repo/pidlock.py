"""A pid lock file, so that two runs of the nightly job never overlap."""

import os
from pathlib import Path


class LockHeld(Exception):
    """Another process that is still running holds the lock."""


def acquire(path: Path) -> None:
    """Take the lock at `path` for this process: the file then holds our pid.

    If the file names a process that is still running, raise LockHeld. A lock left by a
    process that no longer runs (it crashed) is stale: take it over. Taking a free lock is
    atomic: of two processes racing for it, exactly one wins.
    """
    path = Path(path)
    if path.exists():
        raise LockHeld(f"{path} is held by pid {path.read_text().strip()}")
    path.write_text(str(os.getpid()))


def release(path: Path) -> None:
    """Give the lock up, if this process holds it."""
    path = Path(path)
    if path.exists() and path.read_text().strip() == str(os.getpid()):
        path.unlink()
