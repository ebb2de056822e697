"""Bad requests to the dashboard's door, one row per case, sent as raw bytes to a real
`mtl-mcp ui`: odd, foreign, duplicate and oversized cookies; a session header missing,
forged, doubled or out of place; odd hosts and targets; launch codes wrong, used or of
every wrong shape. Each gets its answer (never a server error), and the dashboard serves
its page afterwards with nothing in the service's log but a line or two. Slow and idle
connections are in test_connections.py (they take time, not bytes). The CLI, hooks and
MCP tools have theirs in tests/frontdoors/test_bad_input.py."""

from __future__ import annotations

import contextlib
import socket
from dataclasses import dataclass

import httpx
import pytest

from tests.dashboard.conftest import Dashboard, code_of, redeem

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Bad:
    """One raw request: {host}, {origin}, {session} and {code} (a new link's, or one
    already traded when `used`) are filled in."""

    name: str
    request: bytes
    status: int
    used: bool = False


def get(path: str, *headers: str) -> bytes:
    lines = [f"GET {path} HTTP/1.1", "Host: {host}", *headers, "Connection: close", "", ""]
    return "\r\n".join(lines).encode()


def post(path: str, body: bytes, *headers: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: {host}", "Origin: {origin}", *headers,
             f"Content-Length: {len(body)}", "Content-Type: application/json",
             "Connection: close", "", ""]  # fmt: skip
    return "\r\n".join(lines).encode() + body


SESSION = "x-mtl-session: {session}"
ROWS = [
    # cookies other apps leave for 127.0.0.1 change nothing: the dashboard reads none
    Bad("a JSON cookie", get("/api/insights", SESSION, 'Cookie: prefs={"theme":"dark"}'), 200),
    Bad(
        "cookies SimpleCookie cannot parse",
        get("/api/insights", SESSION, 'Cookie: a="x; =v; b=1,2; c=\\; mtl_dashboard_1=x'),
        200,
    ),
    Bad("two Cookie headers", get("/", "Cookie: a=1", "Cookie: a=2"), 200),
    Bad("a 40 KB cookie", get("/api/insights", SESSION, "Cookie: big=" + "b" * 40_000), 200),
    Bad("a cookie of 8-bit bytes", get("/api/insights", SESSION, "Cookie: a=\xe9\xff"), 200),
    Bad("a cookie with a NUL", get("/", "Cookie: a=\x00"), 400),
    Bad("the session in a cookie", get("/api/insights", "Cookie: x-mtl-session={session}"), 401),
    # the session header: exactly once, exactly right, and nowhere else
    Bad("no session", get("/api/insights"), 401),
    Bad("no session for the live feed", get("/api/events"), 401),
    Bad("a forged session", get("/api/insights", "x-mtl-session: " + "A" * 43), 401),
    Bad("the session in the query", get("/api/insights?session={session}"), 401),
    Bad(
        "the session as a bearer token",
        get("/api/insights", "Authorization: Bearer {session}"),
        401,
    ),
    Bad("a code as the session", get("/api/insights", "x-mtl-session: {code}"), 401),
    Bad("a code in an API call's query", get("/api/insights?code={code}"), 401),
    Bad("the session twice", get("/api/insights", SESSION, SESSION), 401),
    Bad(
        "a wrong session, then the right one",
        get("/api/insights", "x-mtl-session: wrong", SESSION),
        401,
    ),
    Bad("the header name in capitals", get("/api/insights", "X-MTL-SESSION: {session}"), 200),
    Bad("a session of 8-bit bytes", get("/api/insights", "x-mtl-session: \xe9\xff"), 401),
    Bad("an empty session", get("/api/insights", "x-mtl-session: "), 401),
    # hosts and targets
    Bad("no Host", b"GET / HTTP/1.0\r\n\r\n", 421),
    Bad("two Host headers", get("/", "Host: 127.0.0.1"), 400),
    Bad(
        "a user in the Host",
        get("/", "Host: evil@127.0.0.1").replace(b"Host: {host}\r\n", b""),
        421,
    ),
    Bad("IPv6 loopback", get("/api/insights", SESSION).replace(b"{host}", b"[::1]:{port}"), 200),
    Bad("an absolute target", get("http://evil.example/api/insights"), 401),
    Bad("a target of dots", get("/static/../../api/insights"), 401),
    Bad("OPTIONS *", b"OPTIONS * HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n", 405),
    Bad("a NUL in a header", get("/", "x-odd: a\x00b"), 400),
    Bad("a garbage request line", b"GARBAGE\r\n\r\n", 400),
    Bad("a megabyte of path", get("/" + "p" * (1 << 20)), 400),
    # the code's exchange
    Bad("a used code", post("/api/session", b'{"code": "{code}"}'), 401, used=True),
    Bad("a made-up code", post("/api/session", b'{"code": "' + b"x" * 43 + b'"}'), 401),
    Bad("an empty code", post("/api/session", b'{"code": ""}'), 401),
    Bad("a code with a space", post("/api/session", b'{"code": " {code}"}'), 401),
    Bad("a code of no JSON", post("/api/session", b"not json"), 401),
    Bad("a code that is a list", post("/api/session", b'{"code": ["{code}"]}'), 401),
    Bad("a lone surrogate", post("/api/session", b'{"code": "\\ud83d"}'), 401),
    Bad("JSON nested deep", post("/api/session", b"[" * 100_000 + b"]" * 100_000), 401),
    Bad(
        "an exchange that names no Origin",
        post("/api/session", b'{"code": "{code}"}').replace(b"Origin: {origin}\r\n", b""),
        403,
    ),
    Bad(
        "a body of 10 MB promised",
        post("/api/session", b"").replace(b"Content-Length: 0", b"Content-Length: 10000000"),
        413,
    ),
    Bad(
        "a chunked body",
        post("/api/session", b"").replace(b"Content-Length: 0", b"Transfer-Encoding: chunked")
        + b"5\r\nhello\r\n0\r\n\r\n",
        411,
    ),
]


def status_of(dashboard: Dashboard, request: bytes, code: str) -> int:
    """The status the dashboard answers `request` with (0: it closed without one)."""
    filled = (
        request.replace(b"{host}", f"127.0.0.1:{dashboard.port}".encode())
        .replace(b"{port}", str(dashboard.port).encode())
        .replace(b"{origin}", dashboard.base.encode())
        .replace(b"{session}", dashboard.session.encode())
        .replace(b"{code}", code.encode())
    )
    answer = b""
    with (
        socket.create_connection(("127.0.0.1", dashboard.port), timeout=60) as sock,
        contextlib.suppress(ConnectionResetError, BrokenPipeError),
    ):
        sock.sendall(filled)
        while chunk := sock.recv(65536):
            answer += chunk
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.") else 0


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_a_bad_request_gets_its_answer_and_nothing_breaks(dashboard: Dashboard, row: Bad) -> None:
    link = dashboard.new_link() if b"{code}" in row.request else "?code=unused"
    if row.used:
        assert redeem(dashboard, link) == dashboard.session
    assert status_of(dashboard, row.request, code_of(link)) == row.status
    with httpx.Client(base_url=dashboard.base, headers=dashboard.headers) as http:
        assert http.get("/api/insights").status_code == 200


def test_the_log_holds_no_traceback_and_few_lines(dashboard: Dashboard) -> None:
    """After every row above (and again here), the service's log has no traceback, no
    code and no session, and the parser's complaints are a line each at most."""
    for row in ROWS:
        status_of(dashboard, row.request, "unused")
    log = (dashboard.home / "logs" / "service.log").read_text()
    assert "Traceback" not in log
    assert dashboard.session not in log
    assert code_of(dashboard.url) not in log
    assert log.count("Invalid HTTP request received.") <= 1
