"""The dashboard's guard, over plain HTTP against a real `mtl-mcp ui`: only the owner's
browser, on loopback, from the dashboard's own page, may read or change anything."""

from __future__ import annotations

import socket

import httpx
import pytest

from mtl_mcp.dashboard.views import shown
from mtl_mcp.text.redact import redact
from tests.dashboard.conftest import Dashboard

pytestmark = pytest.mark.slow


def client(dashboard: Dashboard, cookie: bool = True, **headers: str) -> httpx.Client:
    """An HTTP client of the dashboard, with the cookie the printed URL sets (or none)."""
    return httpx.Client(
        base_url=dashboard.base,
        headers=headers,
        cookies=dashboard.cookie if cookie else None,
        follow_redirects=False,
    )


def csrf(dashboard: Dashboard) -> str:
    with client(dashboard) as http:
        return str(http.get("/api/session").json()["csrf"])


def first_id(dashboard: Dashboard) -> str:
    return str(dashboard.cli_json("list", "--limit", "1")["items"][0]["id"])


def test_the_printed_url_is_loopback_with_a_long_token(dashboard: Dashboard) -> None:
    """`mtl-mcp ui` prints http://127.0.0.1:PORT/?token=..., and listens nowhere else."""
    assert dashboard.url.startswith(f"http://127.0.0.1:{dashboard.port}/?token=")
    assert len(dashboard.token) >= 40
    listening = socket.socket()
    with pytest.raises(OSError):  # the port is taken on loopback ...
        listening.bind(("127.0.0.1", dashboard.port))
    listening.close()
    outside = next(
        (a for *_, (a, *_) in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)
         if not a.startswith("127.")),
        None,
    )  # fmt: skip
    if outside is not None:  # ... and nothing answers on the machine's other address
        with pytest.raises(OSError):
            socket.create_connection((outside, dashboard.port), timeout=2).close()


def test_without_the_token_nothing_is_served(dashboard: Dashboard) -> None:
    """No token, or a wrong one: 401 for the page, the API and the live feed alike."""
    with client(dashboard, cookie=False) as http:
        for path in ("/", "/api/insights", "/api/session", "/api/events", "/static/app.js"):
            answer = http.get(path)
            assert answer.status_code == 401, path
            assert "mtl-mcp ui" in answer.json()["error"]
        assert http.get("/?token=not-the-token").status_code == 401
    wrong = {f"mtl_dashboard_{dashboard.port}": "x" * 43}
    with httpx.Client(base_url=dashboard.base, cookies=wrong) as http:
        assert http.get("/api/insights").status_code == 401


def test_the_token_moves_into_an_httponly_strict_cookie(dashboard: Dashboard) -> None:
    """The printed URL sets the cookie and redirects to the same page without the token."""
    with client(dashboard, cookie=False) as http:
        answer = http.get(f"/?token={dashboard.token}")
        assert answer.status_code == 303
        assert answer.headers["location"] == "/"
        cookie = answer.headers["set-cookie"]
        assert cookie.startswith(f"mtl_dashboard_{dashboard.port}={dashboard.token};")
        assert "HttpOnly" in cookie
        assert "SameSite=Strict" in cookie
        http.cookies.set(*next(iter(dashboard.cookie.items())))
        page = http.get("/")
        assert page.status_code == 200
        assert "<title>mtl-mcp memory</title>" in page.text


def test_a_foreign_host_is_refused(dashboard: Dashboard) -> None:
    """DNS rebinding: a page whose own name now points at 127.0.0.1 sends that name."""
    for host in ("evil.example", f"evil.example:{dashboard.port}", "127.0.0.1:1", "10.0.0.1"):
        with client(dashboard, host=host) as http:
            answer = http.get(f"/?token={dashboard.token}")
            assert answer.status_code == 421, host
    with client(dashboard, host=f"localhost:{dashboard.port}") as http:
        assert http.get("/api/session").status_code == 200


def test_a_foreign_origin_is_refused_on_every_mutation(dashboard: Dashboard) -> None:
    """Even with the cookie and the CSRF token, a change from another origin is refused,
    and so is one that names no origin at all."""
    insight = first_id(dashboard)
    token = csrf(dashboard)
    path = f"/api/insights/{insight}/rate"
    for origin in ("http://evil.example", f"http://localhost:{dashboard.port + 1}", "null"):
        with client(dashboard, origin=origin) as http:
            answer = http.post(
                path, json={"helpful": True},
                headers={"x-csrf-token": token},
            )  # fmt: skip
            assert answer.status_code == 403, origin
    with client(dashboard, **{"sec-fetch-site": "cross-site"}) as http:
        assert http.get("/api/insights").status_code == 403
    with client(dashboard) as http:  # no Origin
        answer = http.post(path, json={"helpful": True}, headers={"x-csrf-token": token})
        assert answer.status_code == 403
    assert dashboard.cli_json("show", insight)["helpful"] == 0


def test_a_mutation_without_the_csrf_token_is_refused(dashboard: Dashboard) -> None:
    """From the right origin with the cookie, a POST still needs the CSRF token; with it,
    the change is made."""
    insight = first_id(dashboard)
    path = f"/api/insights/{insight}/retire"
    with client(dashboard, origin=dashboard.base) as http:
        for headers in ({}, {"x-csrf-token": "wrong"}):
            answer = http.post(path, json={}, headers=headers)
            assert answer.status_code == 403
            assert "CSRF" in answer.json()["error"]
        assert dashboard.cli_json("show", insight)["status"] == "active"
        right = {"x-csrf-token": csrf(dashboard)}
        done = http.post(path, json={"reason": "test"}, headers=right)
        assert done.status_code == 200, done.text
        assert dashboard.cli_json("show", insight)["status"] == "retired"
        http.post(f"/api/insights/{insight}/restore", json={},
                  headers=right)  # fmt: skip
    assert dashboard.cli_json("show", insight)["status"] == "active"


def test_every_answer_has_a_strict_csp_and_no_cors(dashboard: Dashboard) -> None:
    """CSP with frame-ancestors 'none' on pages, data and refusals; no
    Access-Control-* header, and a preflight gets no permission."""
    with client(dashboard, origin="http://evil.example") as http:
        answers = [http.get("/"), http.options("/api/insights")]
    with client(dashboard, cookie=False) as http:
        answers.append(http.get("/api/insights"))
    with client(dashboard) as http:
        answers += [http.get("/"), http.get("/static/app.js")]
    for answer in answers:
        csp = answer.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp
        assert "default-src 'none'" in csp
        assert "script-src 'self'" in csp
        assert "unsafe-inline" not in csp
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert not [h for h in answer.headers if h.lower().startswith("access-control-")]
    assert [a.status_code for a in answers] == [403, 405, 401, 200, 200]


def test_no_answer_holds_the_token_or_a_path(dashboard: Dashboard) -> None:
    """The API never echoes the launch token, the data directory or a key."""
    with client(dashboard) as http:
        bodies = [
            http.get(path).text
            for path in ("/api/session", "/api/facets", "/api/insights", "/api/sessions")
        ]
    for body in bodies:
        assert dashboard.token not in body
        assert str(dashboard.home) not in body


def test_a_bad_query_parameter_is_our_error_not_a_server_error(dashboard: Dashboard) -> None:
    """Every page's query parameters are checked in our words (400), as the CLI's are."""
    with client(dashboard) as http:
        answers = {
            path: http.get(path)
            for path in (
                "/api/insights?limit=abc",
                "/api/sessions?limit=abc",
                "/api/sessions?limit=0",
            )
        }
    for path, answer in answers.items():
        assert answer.status_code == 400, (path, answer.text)
        assert "limit" in answer.json()["error"], path


def test_the_redactor_runs_on_everything_shown() -> None:
    """Strings at any depth of what the page is sent pass the redactor."""
    key = "sk-ant-api03-" + "A1b2C3d4E5f6G7h8I9j0" * 3
    aws = "AKIA" + "J7QX2M9PLR4TZ8WB"
    sent = shown({"title": f"uses {key}", "nested": [{"reason": f"id {aws}"}]})
    assert key not in str(sent)
    assert aws not in str(sent)
    assert "[REDACTED:" in sent["nested"][0]["reason"]


def test_one_redactor_pass_per_answer_equals_one_per_string() -> None:
    """The page's strings are redacted in one joined pass; a finding that would span two of
    them (a `password = ` and the next string) falls back to one pass per string."""
    texts = [
        "password = ",
        "hunter2hunter2XY9",
        "uses sk-ant-api03-" + "A1b2C3d4E5f6G7h8I9j0" * 3,
        "plain",
        "token: ghp_" + "a8Kd93LmQ2x7Vb4Nw1Zr5Tp6Yc0Hs3Fj9Ue2",
    ]
    assert shown(texts) == [redact(t) for t in texts]
    assert shown({"a": texts[:2]})["a"] == [redact(t) for t in texts[:2]]
    assert "[REDACTED:github-token]" in shown(texts)[4]
