"""Distilling with the user's Claude Code login: the real `claude` binary, a fake API.

Claude Code 2.1.332 (npm, pinned) runs as the worker would run it, logged in the way a user
with a key in their Claude Code settings is: `~/.claude/settings.json` sets the fake's URL
and a dummy key in its `env` block. Our own process has no API key, so `auto` must choose
the Claude Code login.
"""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from mtl_mcp import Memory
from mtl_mcp.cli import cli
from mtl_mcp.config import Settings
from mtl_mcp.learning.backends.structured import strict_schema
from mtl_mcp.learning.distill import DISTILL_MAX_TOKENS, JUDGE_MAX_TOKENS
from mtl_mcp.learning.pipeline import ledger
from mtl_mcp.learning.proposals import DistilledInsights, Judgement
from tests.claude_code import ClaudeCode
from tests.conftest import (
    LEAKED,
    claude_code_transcript,
    distil_file,
    distillation_children,
    queued_jobs,
)
from tests.fake_anthropic import FakeAnthropic
from tests.learning.test_sessions import LESSON  # the same date lesson

pytestmark = pytest.mark.slow

JUDGED = {"outcome": "success", "reason": "the failing test passes after the fix"}


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


@pytest.fixture
def claude(tmp_path: Path, fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> ClaudeCode:
    """The user's Claude Code, logged in through its settings' `env`, as our `claude`."""
    installed = ClaudeCode.install(tmp_path, fake)
    installed.update_settings(
        env={"ANTHROPIC_BASE_URL": fake.base_url, "ANTHROPIC_API_KEY": "sk-ant-test-dummy-key"}
    )
    monkeypatch.setenv("HOME", str(installed.home))
    monkeypatch.setenv("MTL_MCP_CLAUDE_COMMAND", str(installed.binary))
    monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", "0")  # fail at once, not after minutes
    return installed


def test_auto_distils_through_the_claude_code_login(
    settings: Settings, fake: FakeAnthropic, claude: ClaudeCode, tmp_path: Path
) -> None:
    """No API key: the session goes through `claude -p`; redacted digest and schema sent,
    nothing else offered to the model, insights stored, tokens in the ledger, no hook fired."""
    assert CliRunner().invoke(cli, ["install", "claude-code"]).exit_code == 0  # our hooks too
    assert "hook session-end" in json.dumps(claude.settings()["hooks"])
    fake.reply_tool("StructuredOutput", JUDGED, input_tokens=900, output_tokens=40)
    fake.reply_tool(
        "StructuredOutput", {"insights": [LESSON]}, input_tokens=1200, output_tokens=300
    )
    transcript = claude_code_transcript(tmp_path / "sess-cc.jsonl", "sess-cc")

    outcome = distil_file(transcript)

    assert outcome["status"] == "stored", outcome
    judge, distilled = fake.message_requests
    for request, schema_of, max_tokens in (
        (judge, Judgement, JUDGE_MAX_TOKENS),
        (distilled, DistilledInsights, DISTILL_MAX_TOKENS),
    ):
        tools = {tool["name"]: tool for tool in request.body["tools"]}
        assert tools["StructuredOutput"]["input_schema"] == strict_schema(schema_of)
        assert set(tools) <= {"StructuredOutput", "DeferredToolPlaceholder"}  # no Bash, no MCP
        assert request.body["model"] == "claude-haiku-5-5"  # --model haiku
        assert request.body["max_tokens"] == max_tokens and "thinking" not in request.body
        assert "[REDACTED" in request.user_text and "pytest" in request.user_text
    assert "abstract" in distilled.system.lower()  # our distill prompt, not Claude Code's
    assert all(LEAKED not in request.text for request in fake.requests)
    [stored] = Memory(settings).list()[0]
    assert stored.title == LESSON["title"] and stored.distilled_by == "haiku"
    assert ledger(settings).used_today("claude-code") == 900 + 40 + 1200 + 300
    assert queued_jobs(settings) == []  # the child's SessionEnd queued nothing
    assert not (settings.home / "logs" / "hooks.log").exists()  # its hooks never ran


def test_our_hooks_ignore_a_claude_session_that_carries_the_marker(
    settings: Settings, fake: FakeAnthropic, claude: ClaudeCode, tmp_path: Path
) -> None:
    """The second guard: with hooks enabled, a `claude -p` whose environment has the child
    marker runs our hooks, and they queue nothing; without the marker the same run queues."""
    assert CliRunner().invoke(cli, ["install", "claude-code"]).exit_code == 0
    fake.reply_text("Done.")
    fake.reply_text("Done.")
    hooks_log = settings.home / "logs" / "hooks.log"
    marked = claude.run(["-p", "say done"], cwd=tmp_path / "project", MTL_MCP_DISTILL_CHILD="1")
    assert marked.returncode == 0, marked.stdout + marked.stderr
    logged = hooks_log.read_text()
    assert "ignored: a distillation run started by mtl-mcp" in logged
    assert "queued session" not in logged and queued_jobs(settings) == []

    plain = claude.run(["-p", "say done"], cwd=tmp_path / "project")
    assert plain.returncode == 0, plain.stdout + plain.stderr
    # The hooks did run both times. (The worker this one started may already have taken
    # the job: its count is not stable.)
    assert "queued session" in hooks_log.read_text()


def test_a_claude_that_fails_leaves_the_job_queued(
    settings: Settings, fake: FakeAnthropic, claude: ClaudeCode, tmp_path: Path
) -> None:
    """`claude` exits 1 (the API answered 529): the job waits with backoff, nothing stored."""
    fake.reply_status(529, times=3)
    outcome = distil_file(claude_code_transcript(tmp_path / "sess-fail.jsonl", "sess-fail"))
    assert outcome["status"] == "retry" and "claude failed at the judge step" in outcome["detail"]
    [job] = queued_jobs(settings)
    assert job.attempts == 1 and "exit 1" in (job.last_error or "")
    assert Memory(settings).list()[1] == 0


def test_a_claude_that_hangs_is_killed_at_the_deadline_and_the_job_stays_queued(
    settings: Settings,
    fake: FakeAnthropic,
    claude: ClaudeCode,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The API never answers: the child is killed at MTL_MCP_CLI_TIMEOUT; a whole call is
    counted against the budget, since it may have been charged."""
    monkeypatch.setenv("MTL_MCP_CLI_TIMEOUT", "8")
    fake.reply_delay(120)
    outcome = distil_file(claude_code_transcript(tmp_path / "sess-hang.jsonl", "sess-hang"))
    assert outcome["status"] == "retry" and "did not finish within 8 s" in outcome["detail"]
    assert len(queued_jobs(settings)) == 1
    assert ledger(settings).used_today("claude-code") >= JUDGE_MAX_TOKENS
    assert distillation_children(settings) == []  # the whole process group is gone


def test_a_claude_that_prints_garbage_leaves_the_job_queued(
    settings: Settings,
    fake: FakeAnthropic,
    claude: ClaudeCode,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A wrapper that prints a banner before Claude Code's JSON: unparseable, job kept."""
    wrapper = tmp_path / "bin" / "claude"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\necho "Welcome back!"\nexec "{claude.binary}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("MTL_MCP_CLAUDE_COMMAND", str(wrapper))
    fake.reply_tool("StructuredOutput", JUDGED)
    outcome = distil_file(claude_code_transcript(tmp_path / "sess-junk.jsonl", "sess-junk"))
    assert outcome["status"] == "retry" and "printed no JSON result" in outcome["detail"]
    assert "Welcome back!" in outcome["detail"]
    assert len(queued_jobs(settings)) == 1 and Memory(settings).list()[1] == 0


def test_without_a_login_the_job_waits_and_the_queue_says_why(
    settings: Settings, claude: ClaudeCode, tmp_path: Path
) -> None:
    """`claude auth status` says not logged in: no call is made, no attempt is used up, and
    `mtl-mcp queue` and `doctor` say what to do."""
    claude.update_settings(env={})
    outcome = distil_file(claude_code_transcript(tmp_path / "sess-out.jsonl", "sess-out"))
    assert outcome["status"] == "waiting" and "not logged in" in outcome["detail"]
    [job] = queued_jobs(settings)
    assert job.attempts == 0
    shown = CliRunner().invoke(cli, ["queue"])
    assert "/login" in shown.stdout
    doctor = CliRunner().invoke(cli, ["doctor", "--json"])
    checks = {check["name"]: check for check in json.loads(doctor.stdout)}
    assert "/login" in checks["distillation"]["detail"] + (checks["distillation"]["fix"] or "")


def test_dry_run_and_install_name_the_claude_code_login(
    fake: FakeAnthropic, claude: ClaudeCode, tmp_path: Path
) -> None:
    """Without an API key, the dry run and `install claude-code` say the login is used and
    what it costs: quota, not money; nothing is sent."""
    transcript = claude_code_transcript(tmp_path / "sess-dry.jsonl", "sess-dry")
    shown = CliRunner().invoke(cli, ["distill", str(transcript), "--dry-run", "--json"])
    report = json.loads(shown.stdout)
    assert report["backend"] == "claude-code" and report["model"] == "haiku"
    assert report["subscription"] and report["worst_case_usd"] == 0
    assert "logged in (api_key)" in report["backend_reason"]
    installed = CliRunner().invoke(cli, ["install", "claude-code", "--dry-run"])
    assert "sessions are distilled by your claude-code login, model haiku" in installed.stderr
    assert "no API charge" in installed.stderr and "100,000 a day" in installed.stderr
    assert fake.requests == []  # not even a connectivity probe
