"""A pid lock file, so that two runs of the nightly job never overlap."""

import os
from pathlib import Path


class LockHeld(Exception):
    """Another process that is still running holds the lock."""


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, under another user
    return True


def _holder(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def acquire(path: Path) -> None:
    """Take the lock at `path` for this process: the file then holds our pid.

    If the file names a process that is still running, raise LockHeld. A lock left by a
    process that no longer runs (it crashed) is stale: take it over. Taking a free lock is
    atomic: of two processes racing for it, exactly one wins.
    """
    path = Path(path)
    for _ in range(2):
        try:
            # O_EXCL: creating the file is the test-and-set; two racers cannot both win
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            pid = _holder(path)
            if pid is not None and _running(pid):
                raise LockHeld(f"{path} is held by running pid {pid}") from None
            path.unlink(missing_ok=True)  # stale: its process is gone
            continue
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        return
    raise LockHeld(f"{path} was taken by another process while it was being cleared")


def release(path: Path) -> None:
    """Give the lock up, if this process holds it."""
    path = Path(path)
    if path.exists() and path.read_text().strip() == str(os.getpid()):
        path.unlink()
