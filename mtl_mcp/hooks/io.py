"""What every hook shares: logging to a file (their input comes from `hooks.fast`).

The standard library and the config only: the tool-use hook runs after every tool call.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from mtl_mcp.config import Settings
from mtl_mcp.errors import MtlError
from mtl_mcp.files import open_private

logger = logging.getLogger(__name__)


class _OneLine(logging.Formatter):
    """A log line without the traceback: for stderr, which a client may show the user."""

    def formatException(self, ei: Any) -> str:
        return ""


def _one_line_stderr() -> logging.Handler:
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(_OneLine("mtl-mcp hook: %(message)s"))
    return handler


_EARLY = _one_line_stderr()


def log_early() -> None:
    """Until `log_to_file` knows where the log goes (the settings may be what is wrong),
    a warning is one line on stderr: never a traceback."""
    root = logging.getLogger()
    if _EARLY not in root.handlers:
        root.addHandler(_EARLY)


def log_to_file(settings: Settings) -> None:
    """Hooks have no terminal: log to `<home>/logs/hooks.log` (no insight or transcript text).
    When it cannot be written (a read-only data directory, a file in its place), log one
    line per warning to stderr instead: a hook must still do its work."""
    root = logging.getLogger()
    root.removeHandler(_EARLY)
    root.setLevel(logging.INFO)
    path = settings.logs_dir / "hooks.log"
    try:
        os.close(open_private(path, os.O_WRONLY | os.O_APPEND))
        os.chmod(path, 0o600)
        handler: logging.Handler = logging.FileHandler(path, encoding="utf-8")
    except MtlError as exc:
        root.addHandler(_one_line_stderr())
        logger.warning("logging to stderr: %s", exc)
        return
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
