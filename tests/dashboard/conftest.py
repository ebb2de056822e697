"""One real dashboard for these tests: `mtl-mcp ui --no-browser` as a subprocess, inside the
real service, over a memory seeded with the starter pack, a session's recall and verdicts,
a failed distillation job and some spend; and Debian's Chromium driven by Playwright."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from mtl_mcp import Memory
from mtl_mcp.config import load_settings
from mtl_mcp.dashboard.guard import SESSION_HEADER
from mtl_mcp.learning.pipeline import ledger
from mtl_mcp.learning.spool import Job, Spool
from mtl_mcp.schemas import RecallOrigin, VerdictEntry

CHROMIUM = Path("/usr/bin/chromium")
SESSION = "sess-dashboard-1"
PLAN = (
    "I will speed up a slow database query by adding an index, then measure the latency "
    "before and after to confirm the gain."
)
# What the autouse env_setup clears for each test, cleared here for a module's processes.
_CLEARED = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "CLAUDE_PROJECT_DIR",
    "MTL_MCP_EMBED_MODEL",
    "MTL_MCP_SERVICE",
    "MTL_MCP_DISTILL_BACKEND",
    "MTL_MCP_OPENAI_BASE_URL",
    "MTL_MCP_OPENAI_MODEL",
    "MTL_MCP_OPENAI_API_KEY",
    "OPENAI_API_KEY",
)


@dataclass
class Dashboard:
    """A running `mtl-mcp ui`: the link it printed, and the CLI over the same data directory."""

    url: str
    home: Path
    env: dict[str, str]
    process: subprocess.Popen[str]
    _session: str | None = None

    @property
    def base(self) -> str:
        parts = urlsplit(self.url)
        return f"{parts.scheme}://{parts.netloc}"

    @property
    def port(self) -> int:
        return int(urlsplit(self.url).port or 0)

    def new_link(self) -> str:
        """A new one-time link to this dashboard, as a user gets one: `mtl-mcp ui` again."""
        done = self.cli("ui", "--no-browser")
        link = done.stdout.split(": ", 1)[1].strip()
        assert link.startswith(f"{self.base}/?code="), (link, done.stderr)
        return link

    @property
    def session(self) -> str:
        """This dashboard's session secret, traded for a new link as the page does."""
        if self._session is None:
            self._session = redeem(self, self.new_link())
        return self._session

    @property
    def headers(self) -> dict[str, str]:
        """What the dashboard's page sends with each request: its session."""
        return {SESSION_HEADER: self.session}

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """`mtl-mcp ARGS --home HOME`, a real subprocess (it relays to the service)."""
        command, *rest = args
        done = subprocess.run(
            [sys.executable, "-m", "mtl_mcp", command, "--home", str(self.home), *rest],
            env=self.env,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=60,
        )
        if check:
            assert done.returncode == 0, done.stderr
        return done

    def cli_json(self, *args: str) -> Any:
        return json.loads(self.cli(*args, "--json").stdout)


def code_of(link: str) -> str:
    return link.split("code=", 1)[1]


def redeem(board: Dashboard, link: str) -> str:
    """Trade a link's one-time code for the session secret, as the page does."""
    answer = httpx.post(
        f"{board.base}/api/session",
        json={"code": code_of(link)},
        headers={"origin": board.base},
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    return str(answer.json()["session"])


def seed_demo(home: Path) -> None:
    """The starter pack, one session that was given recalls and judged them, a failed
    distillation job, and today's spend by two backends."""
    settings = load_settings(home)
    memory = Memory(settings)
    try:
        memory.seed()
        origin = RecallOrigin(session_id=SESSION, client="claude-code", trigger="hook")
        hits = memory.recall(PLAN, k=3, origin=origin)
        memory.flush()
        memory.record_verdicts(
            [
                VerdictEntry(
                    session_id=SESSION,
                    insight=hits[0].id,
                    verdict="helped",
                    reason="it said to measure first",
                    plan=PLAN,
                    backend="api",
                )
            ]
        )
    finally:
        memory.close()
    spool = Spool(settings)
    job = Job(session_id="sess-failed-1", transcript_path=str(home / "gone.jsonl"))
    path = spool.enqueue(job)
    while spool.postpone(path, job, "the distillation backend timed out") != "failed":
        pass
    spend = ledger(settings)
    spend.record(1200, session=SESSION, backend="api")
    spend.record(800, session=SESSION, backend="claude-code")


@pytest.fixture(scope="package")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    root = tmp_path_factory.mktemp("dashboard")
    home = root / "home"
    env = {k: v for k, v in os.environ.items() if k not in _CLEARED}
    env.update(
        MTL_MCP_HOME=str(home),
        MTL_MCP_STARTER="0",
        MTL_MCP_SERVICE_IDLE_SECONDS="30",
        MTL_MCP_CONSOLIDATE_IDLE_SECONDS="0",  # no pass of its own between the tests
        MTL_MCP_CLAUDE_COMMAND="claude-not-installed-for-tests",
        MTL_MCP_CODEX_COMMAND="codex-not-installed-for-tests",
    )
    seed_demo(home)
    log = root / "ui.log"
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "mtl_mcp", "ui", "--no-browser", "--home", str(home)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            text=True,
        )
    assert process.stdout is not None
    with process.stdout:
        line = process.stdout.readline()  # blocks until the service answers with the URL
        assert line.startswith("mtl-mcp dashboard: http://127.0.0.1:"), (line, log.read_text())
        board = Dashboard(line.split(": ", 1)[1].strip(), home, env, process)
        try:
            yield board
        finally:
            process.terminate()
            process.wait(10)
            board.cli("service", "stop", check=False)


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    """One Chromium for the package; gone when it ends, as Playwright's event loop must be
    before any anyio test of another package runs."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (.ci/run does)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any, dashboard: Dashboard) -> Iterator[Any]:
    """A fresh browser context on a new link to the dashboard."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    tab = context.new_page()
    errors = watch(tab)
    tab.goto(dashboard.new_link())
    tab.wait_for_selector("table[aria-label=Insights] tbody tr")
    yield tab
    context.close()
    assert errors == [], errors  # no script error, no CSP violation


def watch(tab: Any) -> list[str]:
    """The script errors and console errors of a tab, from now on."""
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    tab.set_default_timeout(10_000)
    return errors


def wait_until(check: Any, seconds: float = 10.0) -> Any:
    """Poll `check()` until it is truthy (for what another process changes)."""
    deadline = time.monotonic() + seconds
    while not (value := check()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)
    return value
