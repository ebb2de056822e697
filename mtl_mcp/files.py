"""Owner-only files: atomic replacement, appends and content hashes.

Everything under the data directory is private to its owner (transcript paths, insight
text, spend records), so every file written here is created 0600.

A data directory that cannot be written is not a crash: `writing` translates the OSError of
any write under it into our error, saying what is in the way and what to do. A read-only
one (a locked-down machine, a mounted team directory) is `StoreReadOnly`, since reading it
still works; a file where a directory belongs is a `ConfigError`.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from mtl_mcp.errors import ConfigError, StoreError, StoreReadOnly
from mtl_mcp.untrusted import open_regular

# errno values meaning "this process may not write here": a read-only mount, or permissions.
READ_ONLY_ERRNOS = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})
_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


READ_ONLY_ADVICE = (
    "the data directory is read-only for mtl-mcp. Reading it still works (recall, list, "
    "show, stats, export, the session-start context); to change the memory, make it "
    "writable by this user, or point MTL_MCP_HOME (or --home) at a writable directory"
)


def read_only_problem(path: Path, reason: str) -> StoreReadOnly:
    """The error for a write the data directory or store does not allow."""
    return StoreReadOnly(f"cannot write {path} ({reason}): {READ_ONLY_ADVICE}")


def _not_a_directory(path: Path) -> ConfigError:
    """The error for a path under which a file stands where a directory belongs."""
    blocker = next(
        (p for p in reversed([path, *path.parents]) if p.exists() and not p.is_dir()), path
    )
    return ConfigError(
        f"{blocker} is a file, but mtl-mcp keeps its data in a directory there: point "
        "MTL_MCP_HOME (or --home) at a directory, or move the file away"
    )


@contextlib.contextmanager
def writing(path: Path) -> Iterator[None]:
    """Translate the OSError of creating or writing `path` into our error: a file in the
    way (ConfigError), a read-only or foreign directory (StoreReadOnly), a full disk."""
    try:
        yield
    except (FileExistsError, NotADirectoryError) as exc:
        raise _not_a_directory(path) from exc
    except OSError as exc:
        if exc.errno in READ_ONLY_ERRNOS:
            raise read_only_problem(path, exc.strerror or str(exc)) from exc
        if exc.errno in _FULL_ERRNOS:
            raise StoreError(
                f"cannot write {path} ({exc.strerror}): the disk is full; free some space and retry"
            ) from exc
        raise


def owner_only_dirs(path: Path) -> None:
    """Create `path` and its missing parents, each 0700 (OSError if that cannot be).
    mkdir(parents=True) gives the parents the umask's mode, 0755 under 022: the data dir
    itself, when one of its subdirectories is the first thing made."""
    for directory in reversed([path, *(p for p in path.parents if not p.is_dir())]):
        directory.mkdir(exist_ok=True, mode=0o700)


def private_dir(path: Path) -> Path:
    """Create `path` and its missing parents, owner-only; our error if that cannot be."""
    if not path.is_dir():
        with writing(path):
            owner_only_dirs(path)
    return path


def write_private(path: Path, data: str | bytes) -> None:
    """Replace `path` atomically with `data`, readable by the owner only.

    A reader sees the old file or the new one, never half of either. Each call writes its
    own temporary file (mkstemp: created 0600, a unique name), so threads and processes
    replacing the same file at once never write into one another's: the last replace wins.
    """
    private_dir(path.parent)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    with writing(path):
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        temporary = Path(name)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(payload)
            os.replace(temporary, path)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise


def open_private(path: Path, flags: int) -> int:
    """`os.open` of a file under the data directory (created 0600, directories made),
    with our errors when it cannot be opened as asked."""
    private_dir(path.parent)
    with writing(path):
        return os.open(path, flags | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)


def append_private(path: Path, line: str) -> None:
    """Append one line with a single O_APPEND write: concurrent writers never interleave.

    A writer that died mid-line left no newline: this line then starts on a fresh one, or it
    would be glued to the fragment and lost with it.
    """
    payload = (line.rstrip("\n") + "\n").encode("utf-8")
    fd = open_private(path, os.O_RDWR | os.O_APPEND)
    try:
        with writing(path):
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                payload = b"\n" + payload
            written = os.write(fd, payload)
            if written != len(payload):  # never for a line this small on a local disk
                os.write(fd, payload[written:])
    finally:
        os.close(fd)


def sha256_file(path: Path) -> str:
    """The hex sha256 of a regular file's bytes, read in 1 MB blocks (OSError for a FIFO or a
    device, which could block or never end)."""
    digest = hashlib.sha256()
    with open_regular(path) as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
