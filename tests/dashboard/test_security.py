"""The dashboard's guard, over plain HTTP against a real `mtl-mcp ui`: only a tab that
opened a one-time link, on loopback, from the dashboard's own page, may read or change
anything."""

from __future__ import annotations

import socket

import httpx
import pytest

from mtl_mcp.dashboard import guard
from mtl_mcp.dashboard.guard import SESSION_HEADER, Launch
from mtl_mcp.dashboard.views import shown
from mtl_mcp.text.redact import redact
from tests.dashboard.conftest import Dashboard, code_of, redeem

pytestmark = pytest.mark.slow
API = ("/api/insights", "/api/session", "/api/facets", "/api/sessions", "/api/map")


def client(dashboard: Dashboard, session: bool = True, **headers: str) -> httpx.Client:
    """An HTTP client of the dashboard, with the page's session header (or none)."""
    return httpx.Client(
        base_url=dashboard.base,
        headers={**(dashboard.headers if session else {}), **headers},
        follow_redirects=False,
        timeout=60,
    )


def first_id(dashboard: Dashboard) -> str:
    return str(dashboard.cli_json("list", "--limit", "1")["items"][0]["id"])


def test_the_printed_link_is_loopback_with_a_long_one_time_code(dashboard: Dashboard) -> None:
    """`mtl-mcp ui` prints http://127.0.0.1:PORT/?code=..., and listens nowhere else."""
    assert dashboard.url.startswith(f"http://127.0.0.1:{dashboard.port}/?code=")
    assert len(code_of(dashboard.url)) >= 40
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


def test_without_the_session_no_memory_is_served(dashboard: Dashboard) -> None:
    """No session, a wrong one, a code or the session anywhere but its header: 401 for the
    API and the live feed alike. The page and its files are served (code, no memory)."""
    code = code_of(dashboard.new_link())
    wrong = [
        {},
        {SESSION_HEADER: "x" * 43},
        {SESSION_HEADER: code},
        {"authorization": f"Bearer {dashboard.session}"},
        {"cookie": f"mtl_dashboard_{dashboard.port}={dashboard.session}; session={code}"},
    ]
    with client(dashboard, session=False) as http:
        for headers in wrong:
            for path in (*API, "/api/events", f"/api/insights?code={code}"):
                answer = http.get(path, headers=headers)
                assert answer.status_code == 401, (path, headers)
                assert "mtl-mcp ui" in answer.json()["error"]
        assert http.get(f"/api/insights?session={dashboard.session}").status_code == 401
        page = http.get("/")
        assert page.status_code == 200
        assert "<title>mtl-mcp memory</title>" in page.text
        assert http.get("/static/app.js").status_code == 200
        for sneaky in ("/static/../api/insights", "/static/app.js/../../api/insights"):
            assert http.get(sneaky).status_code == 401
    with client(dashboard) as http:  # the code above was never redeemed: it still works
        assert http.get("/api/insights").status_code == 200
    assert redeem(dashboard, f"?code={code}") == dashboard.session


def test_a_link_opens_one_session_once(dashboard: Dashboard) -> None:
    """A link's code gives the session once: used again, made up, or of no JSON shape, it
    gets 401 in our words, never a server error."""
    link = dashboard.new_link()
    assert redeem(dashboard, link) == dashboard.session
    with client(dashboard, session=False, origin=dashboard.base) as http:
        again = http.post("/api/session", json={"code": code_of(link)})
        assert again.status_code == 401
        assert "used already or has expired" in again.json()["error"]
        assert "run `mtl-mcp ui` again" in again.json()["error"]
        for body in ({"code": "x" * 43}, {"code": ["a"]}, {"code": 7}, {}, [], "text"):
            assert http.post("/api/session", json=body).status_code == 401, body
        odd = b'{"code": "\\ud800"}'  # a lone surrogate: a wrong code, not a crash
        answer = http.post("/api/session", content=odd, headers={"content-type": "text/plain"})
        assert answer.status_code == 401
        assert "session" not in answer.json()


def test_a_code_expires_and_few_stay_outstanding(monkeypatch: pytest.MonkeyPatch) -> None:
    """A code is dead after CODE_SECONDS; past CODES_MAX outstanding, the oldest goes."""
    now = [1000.0]
    monkeypatch.setattr(guard.time, "monotonic", lambda: now[0])
    launch = Launch(8000)
    old, fresh = launch.new_code(), launch.new_code()
    now[0] += guard.CODE_SECONDS - 1
    assert launch.redeem(fresh)
    now[0] += 2
    assert not launch.redeem(old)
    codes = [launch.new_code() for _ in range(guard.CODES_MAX + 1)]
    assert not launch.redeem(codes[0])
    assert all(launch.redeem(code) for code in codes[1:])


def test_a_code_takes_its_launch_file_with_it_when_it_dies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What holds a code (its launch file) goes once the code is dead, whichever way it
    dies: used, expired, pushed out by newer ones, or the dashboard closed. A wrong code
    kills nothing."""
    now = [1000.0]
    monkeypatch.setattr(guard.time, "monotonic", lambda: now[0])
    launch = Launch(8000)
    dead: list[str] = []

    def code(name: str) -> str:
        return launch.new_code(lambda: dead.append(name))

    used, expiring = code("used"), code("expired")
    assert not launch.redeem("x" * 43)
    assert dead == []
    assert launch.redeem(used)
    assert dead == ["used"]
    now[0] += guard.CODE_SECONDS + 1
    assert not launch.redeem(expiring)
    assert dead == ["used", "expired"]
    oldest = code("pushed out")
    fresh = [code(f"fresh {n}") for n in range(guard.CODES_MAX)]
    assert dead == ["used", "expired", "pushed out"]
    assert not launch.redeem(oldest)
    launch.close()
    assert sorted(dead[3:]) == sorted(f"fresh {n}" for n in range(guard.CODES_MAX))
    assert not any(launch.redeem(c) for c in fresh)


def test_a_foreign_host_is_refused(dashboard: Dashboard) -> None:
    """DNS rebinding: a page whose own name now points at 127.0.0.1 sends that name."""
    for host in ("evil.example", f"evil.example:{dashboard.port}", "127.0.0.1:1", "10.0.0.1"):
        with client(dashboard, host=host) as http:
            for path in ("/", "/api/insights"):
                assert http.get(path).status_code == 421, (host, path)
            exchange = http.post("/api/session", json={"code": code_of(dashboard.new_link())})
            assert exchange.status_code == 421, host
    with client(dashboard, host=f"localhost:{dashboard.port}") as http:
        assert http.get("/api/session").status_code == 200


def test_a_foreign_origin_is_refused_on_every_mutation(dashboard: Dashboard) -> None:
    """Even with the session, a change from another origin is refused, and so is one that
    names no origin at all; so is a code's exchange, which then still works from home."""
    insight = first_id(dashboard)
    path = f"/api/insights/{insight}/rate"
    code = code_of(dashboard.new_link())
    for origin in ("http://evil.example", f"http://127.0.0.1:{dashboard.port + 1}", "null"):
        with client(dashboard, origin=origin) as http:
            assert http.post(path, json={"helpful": True}).status_code == 403, origin
            assert http.post("/api/session", json={"code": code}).status_code == 403, origin
    for site in ("cross-site", "same-site"):  # same-site: another port of 127.0.0.1
        with client(dashboard, **{"sec-fetch-site": site}) as http:
            assert http.get("/api/insights").status_code == 403
            assert http.get("/static/app.js").status_code == 403
    with client(dashboard) as http:  # no Origin
        assert http.post(path, json={"helpful": True}).status_code == 403
    assert dashboard.cli_json("show", insight)["helpful"] == 0
    assert redeem(dashboard, f"?code={code}") == dashboard.session


def test_a_mutation_needs_the_session(dashboard: Dashboard) -> None:
    """From the right origin, a POST without the session, or with a wrong one, is refused;
    with it, the change is made."""
    insight = first_id(dashboard)
    path = f"/api/insights/{insight}/retire"
    with client(dashboard, session=False, origin=dashboard.base) as http:
        for headers in ({}, {SESSION_HEADER: "wrong"}):
            assert http.post(path, json={}, headers=headers).status_code == 401
        assert dashboard.cli_json("show", insight)["status"] == "active"
        done = http.post(path, json={"reason": "test"}, headers=dashboard.headers)
        assert done.status_code == 200, done.text
        assert dashboard.cli_json("show", insight)["status"] == "retired"
        http.post(f"/api/insights/{insight}/restore", json={},
                  headers=dashboard.headers)  # fmt: skip
    assert dashboard.cli_json("show", insight)["status"] == "active"


def test_every_answer_has_a_strict_csp_and_no_cors(dashboard: Dashboard) -> None:
    """CSP with frame-ancestors 'none' on pages, data and refusals; no
    Access-Control-* header, and a preflight gets no permission."""
    with client(dashboard, origin="http://evil.example") as http:
        answers = [http.get("/"), http.options("/api/insights")]
    with client(dashboard, session=False) as http:
        answers.append(http.get("/api/insights"))
    with client(dashboard) as http:
        answers += [http.get("/"), http.get("/static/app.js"), http.get("/api/insights")]
    for answer in answers:
        csp = answer.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp
        assert "default-src 'none'" in csp
        assert "script-src 'self'" in csp
        assert "unsafe-inline" not in csp
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["cache-control"] == "no-store"
        assert "set-cookie" not in answer.headers
        assert not [h for h in answer.headers if h.lower().startswith("access-control-")]
    assert [a.status_code for a in answers] == [403, 405, 401, 200, 200, 200]


def test_no_answer_holds_a_secret_or_a_path(dashboard: Dashboard) -> None:
    """The API never echoes the session (but to the code's exchange), a code, the data
    directory or a key."""
    code = code_of(dashboard.new_link())
    with client(dashboard) as http:
        bodies = [
            http.get(path).text
            for path in (*API, f"/api/insights?text={code}", "/api/insights/ins_nope")
        ]
    for body in bodies:
        assert dashboard.session not in body
        assert code not in body
        assert str(dashboard.home) not in body


def test_a_share_error_names_no_path(dashboard: Dashboard) -> None:
    """With no team pool, Share says what to set, in words: not where the data directory
    is (the CLI names the config file; the page is told no path)."""
    insight = first_id(dashboard)
    with client(dashboard, origin=dashboard.base) as http:
        answer = http.post(f"/api/insights/{insight}/share", json={"dry_run": True})
    assert answer.status_code == 409, answer.text
    error = answer.json()["error"]
    assert "no team pool is configured: set MTL_MCP_TEAM_URI" in error
    assert str(dashboard.home) not in error
    assert "<data directory>/config.toml" in error
    assert str(dashboard.home) in dashboard.cli("share", insight, check=False).stderr


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
