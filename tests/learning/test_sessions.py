"""Learning from sessions end to end: hooks, the spool, the worker and the distill CLI.

The real anthropic SDK talks HTTP to a fake Messages API on 127.0.0.1; hooks and workers
run as real subprocesses, as a client would start them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from mtl_mcp import Memory
from mtl_mcp.cli import cli
from mtl_mcp.config import Settings, load_settings
from mtl_mcp.learning.proposals import DistilledInsights, Judgement
from mtl_mcp.learning.spool import Job, Spool
from mtl_mcp.learning.worker import run_worker
from tests.conftest import LEAKED, claude_code_transcript
from tests.fake_anthropic import FakeAnthropic

pytestmark = pytest.mark.slow

API_KEY = "sk-ant-test-0123456789abcdefghij"
LESSON = {
    "title": "Pin the clock in date-dependent tests",
    "description": "When a test or a job depends on the current date or time.",
    "content": "Inject a fixed clock and cover month and year boundaries; a test that reads "
    "the real time passes today and fails at midnight.",
    "polarity": "success",
    "category": "test-verification",
    "domain": "web-backend",
    "languages": ["python"],
    "tags": ["time", "tests"],
}


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


@pytest.fixture
def api_env(fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Environment pointing the SDK (here and in subprocesses) at the fake API."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
    return {**os.environ}


def script_success(fake: FakeAnthropic) -> None:
    fake.reply_json(Judgement(outcome="success", reason="the failing test now passes"))
    fake.reply_json(DistilledInsights.model_validate({"insights": [LESSON]}))


def wait_for(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    """Poll a detached process's effect (there is no event to wait on)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the background worker")
        time.sleep(0.1)


def hook(
    settings: Settings, event: str, payload: dict[str, Any], env: dict[str, str]
) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "mtl_mcp", "hook", event, "--home", str(settings.home)],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    return done, time.perf_counter() - start


def test_session_end_hook_returns_at_once_and_insights_land(
    settings: Settings, fake: FakeAnthropic, api_env: dict[str, str], tmp_path: Path
) -> None:
    """The hook exits 0 within 1.5 s; a detached worker stores insights; no log holds content."""
    script_success(fake)
    transcript = claude_code_transcript(tmp_path / "sess-1.jsonl")
    payload = {
        "session_id": "sess-1",
        "transcript_path": str(transcript),
        "cwd": str(tmp_path),
        "hook_event_name": "SessionEnd",
        "reason": "prompt_input_exit",
    }
    done, elapsed = hook(settings, "session-end", payload, api_env)
    assert done.returncode == 0 and done.stdout == ""
    assert elapsed < 1.5, f"hook took {elapsed:.2f}s"
    spool = Spool(settings)
    wait_for(lambda: not any(spool.pending.glob("*.json")) and spool.done_log.exists())
    items, total = Memory(settings).list()
    assert total == 1 and items[0].title == LESSON["title"]
    assert items[0].session_id == "sess-1" and items[0].client == "claude-code"
    sent = "".join(r.text for r in fake.requests)
    assert LEAKED not in sent and "REDACTED" in sent
    logs = "".join(p.read_text() for p in (settings.home / "logs").iterdir())
    assert "queued session sess-1" in logs  # the logs are there, and hold no content:
    for text in (LEAKED, LESSON["title"], LESSON["content"], "nightly report", "off-by-one"):
        assert text not in logs


@pytest.mark.parametrize("transcript", ["never-written.jsonl", "empty.jsonl"])
def test_session_end_without_a_conversation_queues_no_job(
    settings: Settings, tmp_path: Path, transcript: str
) -> None:
    """`claude mcp list` ends a session whose transcript never exists: dropped, one log line."""
    (tmp_path / "empty.jsonl").touch()
    payload = {
        "session_id": "ghost-1",
        "transcript_path": str(tmp_path / transcript),
        "cwd": str(tmp_path),
        "hook_event_name": "SessionEnd",
        "reason": "other",
    }
    done, _ = hook(settings, "session-end", payload, {**os.environ})
    assert done.returncode == 0 and done.stdout == ""
    assert list(Spool(settings).jobs()) == []
    [line] = (settings.home / "logs" / "hooks.log").read_text().splitlines()
    assert "session ghost-1 dropped: its transcript" in line
    assert not (settings.home / "logs" / "worker.log").exists()  # no worker was started


def test_api_outage_keeps_the_job_and_a_later_run_stores_it(
    settings: Settings, fake: FakeAnthropic, api_env: dict[str, str], tmp_path: Path
) -> None:
    """529s leave the job queued with backoff; `distill --pending` later stores the insights."""
    fake.reply_status(529, times=10)
    transcript = claude_code_transcript(tmp_path / "sess-2.jsonl", "sess-2")
    runner = CliRunner()
    result = runner.invoke(cli, ["distill", str(transcript), "--json"])
    assert result.exit_code == 0, result.output
    [outcome] = json.loads(result.stdout)
    assert outcome["status"] == "retry"
    [(_, job)] = list(Spool(settings).jobs())
    assert job.attempts == 1 and "overloaded" in (job.last_error or "").lower()
    assert Memory(settings).list()[1] == 0
    fake.reset()
    script_success(fake)
    result = runner.invoke(cli, ["distill", "--pending", "--json"])
    [outcome] = json.loads(result.stdout)
    assert outcome["status"] == "stored" and outcome["results"][0]["status"] == "stored"
    assert not list(Spool(settings).jobs())


def test_a_killed_worker_leaves_the_job_for_the_next_one(
    settings: Settings, fake: FakeAnthropic, api_env: dict[str, str], tmp_path: Path
) -> None:
    """kill -9 during the API call: the job is still spooled and the next worker stores it."""
    fake.reply_delay(30)
    transcript = claude_code_transcript(tmp_path / "sess-3.jsonl", "sess-3")
    Spool(settings).enqueue(
        Job(session_id="sess-3", transcript_path=str(transcript), cwd=str(tmp_path))
    )
    worker = subprocess.Popen(
        [sys.executable, "-m", "mtl_mcp", "hook", "worker", "--home", str(settings.home)],
        env=api_env,
        stdin=subprocess.DEVNULL,
    )
    wait_for(lambda: len(fake.requests) >= 1)
    worker.send_signal(signal.SIGKILL)
    worker.wait(10)
    assert len(list(Spool(settings).jobs())) == 1
    fake.reset()
    script_success(fake)
    outcomes = run_worker(settings, ignore_backoff=True)
    assert outcomes is not None and [o.status for o in outcomes] == ["stored"]
    assert Memory(settings).list()[1] == 1


def test_the_same_transcript_is_never_distilled_twice(
    settings: Settings, fake: FakeAnthropic, api_env: dict[str, str], tmp_path: Path
) -> None:
    """A second job for an unchanged transcript is skipped without an API call."""
    script_success(fake)
    transcript = claude_code_transcript(tmp_path / "sess-4.jsonl", "sess-4")
    runner = CliRunner()
    assert runner.invoke(cli, ["distill", str(transcript)]).exit_code == 0
    calls = len(fake.requests)
    result = runner.invoke(cli, ["distill", str(transcript), "--json"])
    assert json.loads(result.stdout)[0]["status"] == "skipped"
    assert len(fake.requests) == calls


def test_spent_budget_makes_jobs_wait_for_tomorrow(
    settings: Settings,
    fake: FakeAnthropic,
    api_env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the daily budget spent, the job waits until the next UTC day and nothing is sent."""
    monkeypatch.setenv("MTL_MCP_DAILY_TOKENS", "10")
    transcript = claude_code_transcript(tmp_path / "sess-5.jsonl", "sess-5")
    result = CliRunner().invoke(cli, ["distill", str(transcript), "--json"])
    [outcome] = json.loads(result.stdout)
    assert outcome["status"] in {"retry", "failed"} and "budget" in outcome["detail"]
    assert fake.requests == []


def test_trivial_sessions_are_skipped_without_a_call(
    settings: Settings, fake: FakeAnthropic, api_env: dict[str, str], tmp_path: Path
) -> None:
    """A two-line chat with no tool use costs nothing."""
    transcript = tmp_path / "hello.jsonl"
    transcript.write_text(
        json.dumps({"type": "user", "message": {"role": "user", "content": "hi"}})
        + "\n"
        + json.dumps(
            {
                "type": "assistant",
                "message": {
                    "id": "m",
                    "role": "assistant",
                    "content": [{"type": "text", "text": "Hello!"}],
                },
            }
        )
        + "\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(cli, ["distill", str(transcript), "--json"])
    assert json.loads(result.stdout)[0]["status"] == "skipped"
    assert fake.requests == []


def test_dry_run_prints_digest_and_cost_and_sends_nothing(
    fake: FakeAnthropic, api_env: dict[str, str], tmp_path: Path
) -> None:
    """--dry-run shows the redacted digest with token and cost estimates."""
    transcript = claude_code_transcript(tmp_path / "sess-6.jsonl", "sess-6")
    result = CliRunner().invoke(cli, ["distill", str(transcript), "--dry-run", "--json"])
    report = json.loads(result.stdout)
    assert report["digest_tokens"] > 0 and report["worst_case_usd"] > 0
    assert "pytest" in report["digest"] and LEAKED not in report["digest"]
    assert fake.requests == []


def test_hooks_exit_zero_on_garbage_and_log_the_problem(settings: Settings, tmp_path: Path) -> None:
    """Malformed hook input never fails the user's session."""
    for event in ("session-end", "session-start"):
        done = subprocess.run(
            [sys.executable, "-m", "mtl_mcp", "hook", event, "--home", str(settings.home)],
            input="\x00not json{",
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode == 0 and done.stdout == "" and done.stderr == ""
    logged = (settings.home / "logs" / "hooks.log").read_text()
    assert logged.count("the hook input is not JSON") == 2 and "Traceback" not in logged


def test_session_start_injects_context_from_the_first_session(
    settings: Settings, tmp_path: Path
) -> None:
    """The first start prints starter lessons and schedules a refresh; later starts print
    the project's precomputed context."""
    Memory(load_settings(settings.home, starter=True)).stats()  # starter pack
    payload = {
        "session_id": "s",
        "cwd": str(tmp_path),
        "hook_event_name": "SessionStart",
        "source": "startup",
    }
    env = {**os.environ, "MTL_MCP_STARTER": "1"}
    first, _ = hook(settings, "session-start", payload, env)
    assert first.returncode == 0 and "not instructions" in first.stdout
    wait_for(lambda: len(list((settings.home / "context").glob("*.md"))) == 2)
    second, _ = hook(settings, "session-start", payload, env)
    assert second.returncode == 0 and "recall_insights" in second.stdout
    assert "not instructions" in second.stdout and len(second.stdout) < 10_000


def test_record_session_without_insights_distils_the_summary(
    settings: Settings, fake: FakeAnthropic, api_env: dict[str, str]
) -> None:
    """With an API key, record_session(summary) distils it into stored insights."""
    import anyio
    from mcp.client import Client

    from mtl_mcp.server.app import build_server

    fake.reply_json(DistilledInsights.model_validate({"insights": [LESSON]}))

    async def record() -> dict[str, Any]:
        async with Client(build_server(settings)) as client:
            result = await client.call_tool(
                "record_session",
                {
                    "summary": "Fixed a month-boundary crash by freezing time in a new test; "
                    "the whole suite passes.",
                    "outcome": "success",
                },
            )
            assert not result.is_error, result.content
            return result.structured_content or {}

    recorded = anyio.run(record)
    assert recorded["stored"] == 1 and "distilled" in recorded["note"]
    assert len(fake.requests) == 1  # the outcome was given: no judge call


def test_install_dry_run_then_install_claude_code(tmp_path: Path, monkeypatch) -> None:
    """install --dry-run prints the diff only; install writes server and hooks, idempotently."""
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    runner = CliRunner()
    dry = runner.invoke(cli, ["install", "claude-code", "--dry-run"])
    assert dry.exit_code == 0 and "mtl-mcp" in dry.stdout
    assert not (tmp_path / "user" / ".claude.json").exists()
    assert runner.invoke(cli, ["install", "claude-code"]).exit_code == 0
    config = json.loads((tmp_path / "user" / ".claude.json").read_text())
    assert config["mcpServers"]["mtl-mcp"]["args"][-1] == "serve"
    hooks = json.loads((tmp_path / "user" / ".claude" / "settings.json").read_text())["hooks"]
    assert "hook session-end" in json.dumps(hooks["SessionEnd"])
    again = runner.invoke(cli, ["install", "claude-code"])
    assert "already up to date" in again.stdout
    assert runner.invoke(cli, ["uninstall", "claude-code"]).exit_code == 0
    assert not (tmp_path / "user" / ".claude.json").exists()  # it held only our entry


def test_a_session_queued_again_while_its_job_runs_is_not_dropped(settings: Settings) -> None:
    """Finishing or postponing an old job leaves the newer job for the same session queued."""
    spool = Spool(settings)
    spool.enqueue(Job(session_id="s", transcript_path="/old.jsonl"))
    [(path, running)] = list(spool.jobs())
    spool.enqueue(Job(session_id="s", transcript_path="/longer.jsonl"))  # the session ended again
    spool.finish(path, running)
    assert spool.postpone(path, running, "API down") == "retry"
    [(_, waiting)] = list(spool.jobs())
    assert waiting.transcript_path == "/longer.jsonl" and waiting.attempts == 0
