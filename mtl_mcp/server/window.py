"""One client window's `mtl-mcp serve` over stdio: through the shared service when it can,
in-process (as before the service existed) when it cannot."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from mtl_mcp.config import Settings, load_settings, private_umask
from mtl_mcp.errors import ConfigError


def serve_window(settings: Settings) -> None:
    """Serve this window until its client closes stdin."""
    private_umask()
    if settings.service:
        from mtl_mcp.server.relay import relay

        if relay(settings):
            return
        reason = "the shared service cannot start here"
    else:
        reason = "MTL_MCP_SERVICE is off"
    sys.stderr.write(f"mtl-mcp: serving this window in-process ({reason})\n")
    from mtl_mcp.server import serve

    serve(settings, "stdio")


def main(home: str | None, verbose: int) -> int:
    """`mtl-mcp serve` without the CLI's imports: what a client starts per window."""
    level = (logging.WARNING, logging.INFO, logging.DEBUG)[min(verbose, 2)]
    logging.basicConfig(
        stream=sys.stderr, level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        settings = load_settings(Path(home) if home else None)
    except ConfigError as exc:
        sys.stderr.write(f"Error: {exc}\n")
        return 1
    serve_window(settings)
    return 0
