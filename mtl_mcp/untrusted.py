"""Reading what another program wrote, safely: a regular file only, opened without blocking
and read within a cap; JSON of any nesting without a RecursionError.

A path a hook payload, a job or a folder names may be a FIFO (opening it blocks until a
writer comes), a device (`/dev/zero` never ends) or a symbolic link to either: only a
regular file is read. JSON nested deeper than the interpreter's recursion limit makes
`json.loads` raise RecursionError, which no reader expects: here it is a ValueError like any
other bad JSON. The standard library only: the tool-use hook imports this.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from typing import IO, Any


class NotRegularFile(OSError):
    """The path names something other than a regular file: a FIFO, a device, a socket."""


def open_regular(path: str | os.PathLike[str], *, follow: bool = True) -> IO[bytes]:
    """`path` opened for binary reading, if it is a regular file (through symbolic links
    unless `follow` is False). Never blocks: a FIFO is opened non-blocking and refused.
    IsADirectoryError for a directory, NotRegularFile for anything else that is not a file,
    and any other OSError as `os.open` raises it."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", str(path))
        if not stat.S_ISREG(mode):
            raise NotRegularFile(errno.EINVAL, "not a regular file", str(path))
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)  # a regular file: reads never wait anyway
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike[str], limit: int, offset: int = 0) -> bytes:
    """At most `limit` bytes of the regular file `path` from `offset` (OSError otherwise)."""
    with open_regular(path) as stream:
        if offset:
            stream.seek(offset)
        return stream.read(limit)


def json_loads(data: str | bytes) -> Any:
    """`json.loads`, with nesting too deep to decode a ValueError rather than a
    RecursionError."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested too deeply to read") from None
