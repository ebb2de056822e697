"""Owner-only files: atomic replacement, appends and content hashes.

Everything under the data directory is private to its owner (transcript paths, insight
text, spend records), so every file written here is created 0600.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path


def write_private(path: Path, data: str | bytes) -> None:
    """Replace `path` atomically with `data`, readable by the owner only.

    A reader sees the old file or the new one, never half of either. Each call writes its
    own temporary file (mkstemp: created 0600, a unique name), so threads and processes
    replacing the same file at once never write into one another's: the last replace wins.
    """
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    temporary = Path(name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def append_private(path: Path, line: str) -> None:
    """Append one line with a single O_APPEND write: concurrent writers never interleave.

    A writer that died mid-line left no newline: this line then starts on a fresh one, or it
    would be glued to the fragment and lost with it.
    """
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    payload = (line.rstrip("\n") + "\n").encode("utf-8")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            payload = b"\n" + payload
        written = os.write(fd, payload)
        if written != len(payload):  # never for a line this small on a local disk
            os.write(fd, payload[written:])
    finally:
        os.close(fd)


def sha256_file(path: Path) -> str:
    """The hex sha256 of a file's bytes, read in 1 MB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
