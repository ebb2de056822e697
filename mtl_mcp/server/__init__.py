"""The MCP front door, over stdio for one client or streamable HTTP for a team.

app       build_server: the tools, resources, prompt and instructions over a `Memory`
results   what the tools return, and the framing of notes for the model
keeper    MemoryKeeper: the one memory a server keeps warm; the window a request is from
sampling  record_session's distillation through the client's model (MCP sampling)
http      the HTTP transport's safeguards: bearer token, Host and Origin checks
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from mtl_mcp.config import Settings, private_umask


def serve(
    settings: Settings,
    transport: Literal["stdio", "http"] = "stdio",
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    allowed_hosts: Sequence[str] = (),
) -> None:
    """Serve over stdio, or over HTTP (see `mtl_mcp.server.http` for its safeguards)."""
    private_umask()
    if transport == "stdio":
        from mtl_mcp.server.app import build_server

        build_server(settings).run("stdio")
    else:
        from mtl_mcp.server.http import serve_http

        serve_http(settings, host, port, token, allowed_hosts)
