"""Who may talk to the dashboard: only the owner's browser tab, and only the dashboard's page.

No cookie: a browser sends a host's cookies to every port of it, so any other server on
this machine that the browser visits would receive one. Instead:

- **A one-time launch code.** `mtl-mcp ui` mints a code for each link it prints or opens
  (`/?code=`): it works once, for CODE_SECONDS at most, and only to start a session. The
  browser is opened on a private file that holds it (`run.launch_file`), never with it on
  its command line, and the file goes when the code dies.
- **A session secret held by the page.** The page trades the code for this launch's
  session secret (`POST /api/session`), keeps it in the tab's `sessionStorage` (which only
  the dashboard's own origin, port included, can read), and sends it in SESSION_HEADER on
  every API call. A reload, Back and Forward find it there; another tab (a link of the
  page opened in a new one included) or browser needs a new link (run `mtl-mcp ui`
  again). Browsers never attach the header by
  themselves, and another origin cannot set it without a CORS preflight, which is refused,
  so it is the CSRF token too.

Every request passes these checks, in this order, before any route runs:

1. **Host.** The Host header must be a loopback name or address (`127.0.0.1`, `localhost`,
   `[::1]`), with the dashboard's port if it names one: a web page that rebinds its own
   name to 127.0.0.1 sends its name, and gets 421 (DNS rebinding).
2. Only GET, HEAD and POST; no CORS headers, ever (an OPTIONS preflight gets 405).
3. **Origin.** A request that names an Origin must name the dashboard's own
   (`http://<host>:<port>`), and a mutation (every POST) must name it: 403 otherwise. A
   `Sec-Fetch-Site` other than same-origin or none is refused the same way, except for
   opening the page itself (a navigation to `/`: the launch file is another site). A POST
   must give a Content-Length of at most BODY_MAX (411, 413).
4. **Session.** Everything but the page's own files (`/`, `/static/...`: code, no memory)
   and the code's exchange needs the session secret in SESSION_HEADER (once), compared
   in constant time: 401 otherwise.

Every response carries a strict Content-Security-Policy (scripts, styles and connections
from the dashboard itself only; `frame-ancestors 'none'`), `nosniff`, `no-referrer` and
`no-store`.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import json
import secrets
import threading
import time
from collections.abc import Callable

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
# The page's own files, served to anyone on loopback: they are code, and hold no memory.
STATIC_FILES = {"app.js": "text/javascript", "app.css": "text/css", "icon.svg": "image/svg+xml"}
PAGE_PATHS = frozenset({"/", *(f"/static/{name}" for name in STATIC_FILES)})
SESSION_HEADER = "x-mtl-session"
BODY_MAX = 1 << 20  # a plan is 4,000 characters at most; an edit, a few fields
EXCHANGE = "/api/session"  # POST {"code": ...} -> the session secret
CODE_SECONDS = 300.0  # a link not opened by then is dead: `mtl-mcp ui` prints a new one
CODES_MAX = 32  # links outstanding at once; the oldest goes first
# What a code's death sets off (its launch file removed); its OSError is ignored.
Spent = Callable[[], object]
NEW_LINK = "run `mtl-mcp ui` again: it prints a new one-time link to this dashboard"


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


class Launch:
    """One dashboard's secrets: the session secret, and the one-time codes that give it.

    A code may come with `spent`, called once when the code dies (used, expired, pushed
    out, or the dashboard closed): the launch file that holds it goes with it.
    """

    def __init__(self, port: int) -> None:
        self.port = port
        self.session = secrets.token_urlsafe(32)
        self._codes: dict[str, tuple[float, Spent]] = {}  # code -> (expiry, monotonic; spent)
        self._lock = threading.Lock()  # minted by the CLI's thread, redeemed by the loop

    def new_code(self, spent: Spent | None = None) -> str:
        code = secrets.token_urlsafe(32)
        with self._lock:
            dead = self._expired()
            while len(self._codes) >= CODES_MAX:
                dead.append(self._codes.pop(next(iter(self._codes)))[1])
            self._codes[code] = (time.monotonic() + CODE_SECONDS, spent or _nothing)
        _call(dead)
        return code

    def redeem(self, code: object) -> bool:
        """Whether `code` is a live code of this launch; it is dead from now on."""
        if not isinstance(code, str):
            return False
        with self._lock:
            dead = self._expired()
            found = next((known for known in self._codes if _same(code, known)), None)
            if found is not None:
                dead.append(self._codes.pop(found)[1])
        _call(dead)
        return found is not None

    def close(self) -> None:
        """Every code dies: the dashboard closes."""
        with self._lock:
            dead = [spent for _, spent in self._codes.values()]
            self._codes.clear()
        _call(dead)

    def _expired(self) -> list[Spent]:
        now = time.monotonic()
        gone = [c for c, (expires, _) in self._codes.items() if expires <= now]
        return [self._codes.pop(code)[1] for code in gone]


def _nothing() -> None:
    pass


def _call(dead: list[Spent]) -> None:
    for spent in dead:
        with contextlib.suppress(OSError):  # a launch file already gone
            spent()


class Guard:
    """The checks above, as ASGI middleware around the dashboard's app."""

    def __init__(self, app: ASGIApp, launch: Launch) -> None:
        self.app = app
        self.launch = launch

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # no websockets; lifespan is not used
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        method, path = scope["method"], scope["path"]
        host = headers.get("host", "")
        name, port = split_host(host)
        if not is_loopback_host(name) or port not in (None, self.launch.port):
            await _refuse(send, 421, "this dashboard answers only on this machine's loopback")
            return
        if method not in (*SAFE_METHODS, "POST"):
            await _refuse(send, 405, "only GET and POST", [(b"allow", b"GET, HEAD, POST")])
            return
        origin = headers.get("origin")
        site = headers.get("sec-fetch-site")
        page = method in SAFE_METHODS and path in PAGE_PATHS
        opening = page and path == "/" and headers.get("sec-fetch-mode") == "navigate"
        if (origin is not None and origin != f"http://{host}") or (
            site not in (None, "same-origin", "none") and not opening
        ):
            await _refuse(send, 403, "requests from other sites are refused")
            return
        if method == "POST" and origin is None:
            await _refuse(send, 403, "a change must come from the dashboard's own page")
            return
        if method == "POST" and (refusal := _body_refusal(headers)):
            await _refuse(send, *refusal)
            return
        exchange = method == "POST" and path == EXCHANGE
        sessions = [v for k, v in scope["headers"] if k.lower() == SESSION_HEADER.encode()]
        supplied = sessions[0].decode("latin-1") if len(sessions) == 1 else None  # not two
        if not (page or exchange or _same(supplied, self.launch.session)):
            await _refuse(send, 401, f"this tab has no session of this dashboard: {NEW_LINK}")
            return
        await self.app(scope, receive, _with_headers(send))


def _body_refusal(headers: dict[str, str]) -> tuple[int, str] | None:
    """Why a POST's body is not read, if it is not: it must say its length (a browser's
    fetch does), and that length must be at most BODY_MAX."""
    length = headers.get("content-length", "")
    if "transfer-encoding" in headers or not length.isdigit():
        return 411, "a request with a body must give its Content-Length"
    if int(length) > BODY_MAX:
        return 413, f"a request's body may be {BODY_MAX >> 20} MB at most"
    return None


def _same(supplied: str | None, secret: str) -> bool:
    if supplied is None:
        return False
    # surrogatepass: a lone surrogate in a JSON body is a wrong code, not a crash
    return hmac.compare_digest(supplied.encode("utf-8", "surrogatepass"), secret.encode())


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
