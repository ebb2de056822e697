"""Who may talk to the dashboard: only the owner's browser, and only the dashboard's own page.

Every request passes these checks, in this order, before any route runs:

1. **Host.** The Host header must be a loopback name or address (`127.0.0.1`, `localhost`,
   `[::1]`), with the dashboard's port if it names one: a web page that rebinds its own
   name to 127.0.0.1 sends its name, and gets 421 (DNS rebinding).
2. **Token.** The per-launch secret, from the URL `mtl-mcp ui` printed (`?token=`) or the
   cookie it is moved into on first load (HttpOnly, SameSite=Strict, named after the port:
   cookies ignore ports, and two dashboards must not overwrite each other's). Compared in
   constant time; without it, 401. The page's URL loses the token at once (a redirect), so
   it is in no history entry, bookmark or Referer.
3. **Origin.** A request that names an Origin must name the dashboard's own
   (`http://<host>:<port>`), and a mutation (every POST) must name it: 403 otherwise. A
   `Sec-Fetch-Site` other than same-origin or none is refused the same way.
4. **CSRF.** A mutation must carry the per-launch CSRF token in `X-CSRF-Token` (the page
   reads it from `/api/session`, which only a same-origin page with the cookie can read):
   403 otherwise.
5. Only GET, HEAD and POST; no CORS headers, ever (an OPTIONS preflight gets 405).

Every response carries a strict Content-Security-Policy (scripts, styles and connections
from the dashboard itself only; `frame-ancestors 'none'`), `nosniff`, `no-referrer` and
`no-store`.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from dataclasses import dataclass
from http.cookies import SimpleCookie
from urllib.parse import parse_qsl, urlencode

from starlette.types import ASGIApp, Message, Receive, Scope, Send

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]
SAFE_METHODS = ("GET", "HEAD")
OPEN_THE_URL = "open the URL that `mtl-mcp ui` printed (it holds this launch's token)"


def is_loopback_host(host: str) -> bool:
    """Whether a Host header's name (without the port) is a loopback name or address."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def split_host(value: str) -> tuple[str, int | None]:
    """'127.0.0.1:8080' -> ('127.0.0.1', 8080); '[::1]' -> ('[::1]', None)."""
    name, sep, port = value.rpartition(":")
    if not sep or name.endswith(":") or (name.startswith("[") and not name.endswith("]")):
        return value, None  # no port, or a bare IPv6 address
    if not port.isdigit():
        return value, -1
    return name, int(port)


@dataclass(frozen=True)
class Secrets:
    """This launch's secrets: the token in the printed URL, and the CSRF token."""

    token: str
    csrf: str
    port: int

    @property
    def cookie_name(self) -> str:
        return f"mtl_dashboard_{self.port}"


class Guard:
    """The checks above, as ASGI middleware around the dashboard's app."""

    def __init__(self, app: ASGIApp, secrets: Secrets) -> None:
        self.app = app
        self.secrets = secrets

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # no websockets; lifespan is not used
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        method = scope["method"]
        host = headers.get("host", "")
        name, port = split_host(host)
        if not is_loopback_host(name) or port not in (None, self.secrets.port):
            await _refuse(send, 421, "this dashboard answers only on this machine's loopback")
            return
        if method not in (*SAFE_METHODS, "POST"):
            await _refuse(send, 405, "only GET and POST", [(b"allow", b"GET, HEAD, POST")])
            return
        origin = headers.get("origin")
        own = f"http://{host}"
        site = headers.get("sec-fetch-site")
        if (origin is not None and origin != own) or site not in (None, "same-origin", "none"):
            await _refuse(send, 403, "requests from other sites are refused")
            return
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        from_url = query.get("token")
        cookie = _cookie(headers.get("cookie", ""), self.secrets.cookie_name)
        if not (_same(from_url, self.secrets.token) or _same(cookie, self.secrets.token)):
            await _refuse(send, 401, f"no valid token: {OPEN_THE_URL}")
            return
        if method == "POST":
            if origin is None:
                await _refuse(send, 403, "a change must come from the dashboard's own page")
                return
            if not _same(headers.get("x-csrf-token"), self.secrets.csrf):
                await _refuse(send, 403, "missing or wrong CSRF token: reload the page")
                return
        if from_url is not None and method in SAFE_METHODS:
            await self._move_token_to_cookie(scope, send, query)
            return
        await self.app(scope, receive, _with_headers(send))

    async def _move_token_to_cookie(self, scope: Scope, send: Send, query: dict[str, str]) -> None:
        """Answer a URL with the token by setting the cookie and redirecting to the same URL
        without it."""
        rest = urlencode({k: v for k, v in query.items() if k != "token"})
        location = scope["path"] + (f"?{rest}" if rest else "")
        cookie = (
            f"{self.secrets.cookie_name}={self.secrets.token}; HttpOnly; SameSite=Strict; Path=/"
        )
        await _with_headers(send)(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [(b"location", location.encode()), (b"set-cookie", cookie.encode())],
            }
        )
        await send({"type": "http.response.body", "body": b""})


def _same(supplied: str | None, secret: str) -> bool:
    return supplied is not None and hmac.compare_digest(supplied.encode(), secret.encode())


def _cookie(header: str, name: str) -> str | None:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(header)
    except Exception:  # a malformed Cookie header is no cookie
        return None
    morsel = jar.get(name)
    return morsel.value if morsel is not None else None


def _with_headers(send: Send) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *SECURITY_HEADERS]}
        await send(message)

    return sending


async def _refuse(
    send: Send, status: int, why: str, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = json.dumps({"error": why}).encode()
    await _with_headers(send)(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(extra or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
