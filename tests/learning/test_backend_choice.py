"""Which backend distils a session, the budgets that hold each, and the rules around them:
one distillation at a time, jobs that wait for a backend, hooks that ignore our own runs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from mcp.client import Client

from mtl_mcp import Memory
from mtl_mcp.cli import cli
from mtl_mcp.config import Settings, load_settings
from mtl_mcp.errors import BudgetExceeded, ConfigError, DistillUnavailable
from mtl_mcp.hooks.session import OUR_OWN_RUN, session_end, session_start
from mtl_mcp.learning import pipeline
from mtl_mcp.learning.backends.anthropic_api import AnthropicBackend
from mtl_mcp.learning.backends.claude_code import ClaudeCodeBackend
from mtl_mcp.learning.backends.select import Chooser
from mtl_mcp.learning.pipeline import distillation_turn, learn, ledger
from mtl_mcp.learning.proposals import DistilledInsights
from mtl_mcp.learning.spool import NO_BACKEND_RECHECK, Job, Spool
from mtl_mcp.learning.worker import run_worker
from mtl_mcp.project import resolve_project
from mtl_mcp.schemas import Provenance
from mtl_mcp.server.app import build_server
from tests.conftest import claude_code_transcript, lesson
from tests.fake_anthropic import FakeAnthropic

API_KEY = "sk-ant-test-0123456789abcdefghij"
DIGEST = "user: fix the flaky date test\nassistant: froze the clock; the suite passes"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAnthropic]:
    """A fake Messages API the SDK reaches with an API key."""
    with FakeAnthropic() as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        yield server


def learn_once(memory: Memory, backend: Any, *, outcome: Any = "success", wait: float = 0) -> Any:
    """One pass through the pipeline for DIGEST."""
    return learn(
        memory,
        DIGEST,
        backend=backend,
        outcome_hint=outcome,
        project=resolve_project(Path.cwd()),
        provenance=Provenance(session_id="s"),
        wait=wait,
    )


def chosen(source: str | None = "claude-code", **overrides: Any) -> tuple[str | None, str]:
    choice = Chooser(load_settings(**overrides)).choose(source)
    return (choice.backend.name if choice.backend else None), choice.reason


def test_auto_takes_the_api_when_a_key_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a key, every source goes to the API, whatever CLI wrote the transcript."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    for source in ("claude-code", "codex", None):
        assert chosen(source) == ("anthropic", "the Anthropic API (auto: an API key is set)")


def test_without_a_key_auto_tries_only_the_cli_of_the_transcripts_assistant() -> None:
    """A Claude Code transcript never goes to Codex; a transcript of unknown origin tries both."""
    backend, reason = chosen("claude-code")
    assert backend is None and "claude-not-installed-for-tests" in reason
    assert "codex-not-installed" not in reason
    backend, reason = chosen(None)
    assert "claude-not-installed-for-tests" in reason and "codex-not-installed" in reason
    assert "ANTHROPIC_API_KEY is not set" in reason


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"MTL_MCP_DISTILL_BACKEND": "off"}, "distillation is off (MTL_MCP_DISTILL_BACKEND=off)"),
        ({"MTL_MCP_DAILY_TOKENS": "0"}, "the daily budget MTL_MCP_DAILY_TOKENS is 0"),
        (
            {"MTL_MCP_SUBSCRIPTION_DAILY_TOKENS": "0"},
            "subscription backends are off (MTL_MCP_SUBSCRIPTION_DAILY_TOKENS=0)",
        ),
        (
            {"MTL_MCP_DISTILL_BACKEND": "anthropic"},
            "MTL_MCP_DISTILL_BACKEND=anthropic, but ANTHROPIC_API_KEY is not set",
        ),
        ({"MTL_MCP_DISTILL_BACKEND": "codex"}, "`codex-not-installed-for-tests` is not on PATH"),
    ],
)
def test_what_turns_a_backend_off_is_named(
    env: dict[str, str], says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    backend, reason = chosen()
    assert backend is None and says in reason


def test_off_wins_over_an_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    monkeypatch.setenv("MTL_MCP_DISTILL_BACKEND", "off")
    assert chosen()[0] is None


def test_an_unknown_backend_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MTL_MCP_DISTILL_BACKEND", "gemini")
    with pytest.raises(ConfigError, match="auto, openai, anthropic, claude-code, codex, off"):
        load_settings()


def test_a_job_nothing_can_distil_waits_without_using_attempts(
    settings: Settings, tmp_path: Path
) -> None:
    """No backend: the job stays, its attempts untouched, rechecked later; `queue` says why."""
    transcript = claude_code_transcript(tmp_path / "s.jsonl", "s")
    Spool(settings).enqueue(Job(session_id="s", transcript_path=str(transcript)))
    for _ in range(2):  # `distill --pending` ignores the wait, and uses no attempt either
        [outcome] = run_worker(settings, ignore_backoff=True) or []
        assert outcome.status == "waiting" and "not on PATH" in outcome.detail
    [(_, job)] = list(Spool(settings).jobs())
    assert job.attempts == 0 and "claude-not-installed-for-tests" in (job.last_error or "")
    assert job.next_attempt_at - job.created_at >= NO_BACKEND_RECHECK
    assert run_worker(settings) == []  # not ready again until the recheck
    shown = CliRunner().invoke(cli, ["queue"]).stdout
    assert "attempts 0" in shown and "is not on PATH" in shown


def test_hooks_do_nothing_in_a_session_we_started(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the child marker, session-end queues nothing and session-start injects and spawns
    nothing; without it, the same input is queued."""
    transcript = claude_code_transcript(tmp_path / "t.jsonl")  # a real conversation
    payload = json.dumps({"session_id": "child", "transcript_path": str(transcript), "cwd": "."})
    monkeypatch.setenv("MTL_MCP_DISTILL_CHILD", "1")
    assert session_end(payload, settings) == OUR_OWN_RUN
    assert session_start(payload, settings) == ""
    assert list(Spool(settings).jobs()) == [] and not (settings.home / "logs").exists()
    monkeypatch.delenv("MTL_MCP_DISTILL_CHILD")
    assert session_end(payload, settings) == "queued session child"


def test_one_distillation_at_a_time(settings: Settings, fake: FakeAnthropic) -> None:
    """While another process holds the slot, learn() gives up after its wait, sending
    nothing; once it is free, the same call distils."""
    fake.reply_json(DistilledInsights.model_validate({"insights": []}))
    memory = Memory(settings)
    try:
        with distillation_turn(settings, 0):
            with pytest.raises(DistillUnavailable, match="another distillation is running"):
                learn_once(memory, AnthropicBackend(settings), wait=0.2)
            assert fake.requests == []
        learned = learn_once(memory, AnthropicBackend(settings), wait=0.2)
    finally:
        memory.close()
    assert learned.distilled.outcome == "success" and len(fake.message_requests) == 1


def test_record_session_waits_its_turn_too(
    settings: Settings, fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    """record_session's distillation takes the same slot: busy, it says so and sends nothing."""
    monkeypatch.setattr(pipeline, "INTERACTIVE_WAIT", 0.2)

    async def record() -> Any:
        async with Client(build_server(settings)) as client:
            return await client.call_tool(
                "record_session", {"summary": "Fixed a flaky test.", "outcome": "success"}
            )

    with distillation_turn(settings, 0):
        result = anyio.run(record)
    assert result.is_error and "another distillation is running" in str(result.content)
    assert fake.requests == []


def test_a_subscription_backend_stops_at_its_own_budget(settings: Settings) -> None:
    """Claude Code's spend today is near its 100k: the next run waits for tomorrow, before any
    `claude` runs (this one does not even exist); the API's own spend does not count."""
    ledger(settings).record(95_000, session="earlier", backend="claude-code")
    ledger(settings).record(150_000, session="api", backend="anthropic")
    memory = Memory(settings)
    try:
        with pytest.raises(BudgetExceeded) as caught:
            learn_once(
                memory, ClaudeCodeBackend(settings, "/nonexistent/claude"), outcome="unknown"
            )
    finally:
        memory.close()
    assert "claude-code daily token budget reached: 95,000 of 100,000" in str(caught.value)


def test_dry_run_shows_the_backend_and_the_estimate(
    fake: FakeAnthropic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dry run names the backend that would be used and what it would cost, or why none."""
    transcript = claude_code_transcript(tmp_path / "s.jsonl")
    report = json.loads(
        CliRunner().invoke(cli, ["distill", str(transcript), "--dry-run", "--json"]).stdout
    )
    assert report["backend"] == "anthropic" and report["worst_case_usd"] > 0
    assert report["model"] == "claude-haiku-5-5" and not report["subscription"]
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    result = CliRunner().invoke(cli, ["distill", str(transcript), "--dry-run"])
    assert "nothing would distil it now" in result.stderr and "not on PATH" in result.stderr
    assert fake.requests == []


def test_install_says_which_backend_distils_and_what_it_costs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    waiting = CliRunner().invoke(cli, ["install", "claude-code", "--dry-run"])
    assert "sessions wait in the queue, not distilled" in waiting.stderr
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    paid = CliRunner().invoke(cli, ["install", "claude-code", "--dry-run"])
    assert "distilled by the Anthropic API" in paid.stderr and "a session" in paid.stderr
    assert "$0.0" in paid.stderr and "300,000 tokens a day" in paid.stderr


def test_the_api_spend_lands_in_the_same_ledger_under_its_name(
    settings: Settings, fake: FakeAnthropic
) -> None:
    fake.reply_json(
        DistilledInsights.model_validate(
            {
                "insights": [
                    lesson(
                        "Freeze the clock in date tests",
                        "Pin the current time in tests that depend on it, and cover month "
                        "boundaries.",
                        polarity="success",
                        category="test-verification",
                        domain="web-backend",
                    )
                ]
            }
        )
    )
    memory = Memory(settings)
    try:
        learn_once(memory, AnthropicBackend(settings))
        [stored] = memory.list()[0]
    finally:
        memory.close()
    assert stored.distilled_by == "claude-haiku-5-5"
    assert ledger(settings).used_today("anthropic") == ledger(settings).used_today() == 150


def old_cli(tmp_path: Path, name: str, version: str, flags: str) -> Path:
    """A stand-in for an old release (none can be installed offline): it knows its version
    and lists only `flags` in its help."""
    script = tmp_path / name
    script.write_text(
        f'#!/bin/sh\ncase "$*" in --version) echo "{version}";; *--help) echo "{flags}";; esac\n',
        encoding="utf-8",
    )
    script.chmod(0o755)
    return script


def test_a_cli_too_old_for_the_flags_is_named_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `claude` without --json-schema, a `codex exec` without --output-schema: the job
    waits and the reason says what is missing and how to update."""
    claude = old_cli(tmp_path, "claude", "1.0.3 (Claude Code)", "-p --tools --settings --model")
    codex = old_cli(tmp_path, "codex", "codex-cli 0.9.0", "--json --sandbox")
    monkeypatch.setenv("MTL_MCP_CLAUDE_COMMAND", str(claude))
    monkeypatch.setenv("MTL_MCP_CODEX_COMMAND", str(codex))
    backend, reason = chosen("claude-code")
    assert backend is None and "claude 1.0.3 (Claude Code) is too old (no --json-schema" in reason
    assert "claude update" in reason
    backend, reason = chosen("codex")
    assert backend is None and "codex-cli 0.9.0 is too old (no --output-schema" in reason
