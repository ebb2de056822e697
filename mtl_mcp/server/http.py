"""The MCP server over streamable HTTP, for one machine or a team sharing a memory.

It binds 127.0.0.1 unless told otherwise. Any other address needs a bearer token, and once
a token is configured every request must carry `Authorization: Bearer <token>` (compared
in constant time) or gets 401. Host and Origin headers are checked against an allow-list
with the SDK's TransportSecuritySettings, so a web page cannot reach the server through
DNS rebinding: a browser sends the attacker's host name, which is not on the list.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
from collections.abc import Sequence

from mcp.server.transport_security import TransportSecuritySettings
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from mtl_mcp.config import Settings
from mtl_mcp.errors import ConfigError
from mtl_mcp.server.app import build_server

logger = logging.getLogger(__name__)

TOKEN_ENV = "MTL_MCP_TOKEN"
MIN_TOKEN_LENGTH = 16
MCP_PATH = "/mcp"
_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
_WILDCARDS = ("0.0.0.0", "::", "")
_NEW_TOKEN = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps the server reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, token: str | None) -> None:
    """Refuse to expose the memory beyond this machine without a good token."""
    if token is not None and len(token) < MIN_TOKEN_LENGTH:
        raise ConfigError(
            f"the bearer token is {len(token)} characters long: use a random one of at least "
            f"{MIN_TOKEN_LENGTH}, e.g. from `{_NEW_TOKEN}`"
        )
    if not is_loopback(host) and not token:
        raise ConfigError(
            f"binding {host} would let anyone on the network read and change your memory: "
            f"set {TOKEN_ENV} (or pass --token) to a random secret, e.g. from `{_NEW_TOKEN}`, "
            "or bind 127.0.0.1"
        )


def _host_form(name: str) -> str:
    """A name as it appears in a Host header: IPv6 addresses in brackets."""
    try:
        if ipaddress.ip_address(name.strip("[]")).version == 6:
            return f"[{name.strip('[]')}]"
    except ValueError:
        pass
    return name


def security_settings(host: str, allowed_hosts: Sequence[str] = ()) -> TransportSecuritySettings:
    """Host and Origin allow-lists: loopback names always, plus the bound address (unless a
    wildcard) and any names the server is reached by (`--allowed-host`)."""
    names = list(_LOOPBACK_NAMES)
    if host not in _WILDCARDS and not is_loopback(host):
        names.append(_host_form(host))
    names += [_host_form(h.strip()) for h in allowed_hosts if h.strip()]
    hosts = [form for name in dict.fromkeys(names) for form in (name, f"{name}:*")]
    origins = [f"{scheme}://{form}" for form in hosts for scheme in ("http", "https")]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


class BearerTokenMiddleware:
    """Answer 401 to every HTTP request without `Authorization: Bearer <token>`."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._token = token.encode()

    def _authorized(self, scope: Scope) -> bool:
        for name, value in scope.get("headers", []):
            if name.lower() == b"authorization":
                scheme, _, supplied = bytes(value).partition(b" ")
                return scheme.lower() == b"bearer" and hmac.compare_digest(
                    supplied.strip(), self._token
                )
        return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and not self._authorized(scope):
            response = PlainTextResponse(
                "missing or wrong bearer token: send the header 'Authorization: Bearer <token>' "
                f"with the server's {TOKEN_ENV}\n",
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer realm="mtl-mcp"'},
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


def build_http_app(
    settings: Settings,
    host: str = "127.0.0.1",
    token: str | None = None,
    allowed_hosts: Sequence[str] = (),
) -> ASGIApp:
    """The ASGI app: the SDK's streamable HTTP app at /mcp, behind the token check."""
    check_exposure(host, token)
    mcp = build_server(settings, local=False)
    app: ASGIApp = mcp.streamable_http_app(
        streamable_http_path=MCP_PATH,
        transport_security=security_settings(host, allowed_hosts),
        host=host,
    )
    return BearerTokenMiddleware(app, token) if token else app


def serve_http(
    settings: Settings,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    allowed_hosts: Sequence[str] = (),
) -> None:
    """Serve until interrupted (uvicorn; its own logs at warning level and above)."""
    import uvicorn

    app = build_http_app(settings, host, token, allowed_hosts)
    where = f"http://{_host_form(host)}:{port}{MCP_PATH}"
    logger.info("serving MCP at %s (%s)", where, "token required" if token else "no token")
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False)
    uvicorn.Server(config).run()
