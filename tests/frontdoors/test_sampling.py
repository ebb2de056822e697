"""record_session without insights distils through the client's own model (MCP sampling),
driven by the real MCP client in process with a sampling callback, on the 2026-07-28
protocol (questions returned, then answered in a new call) and on the legacy handshake
(questions asked in the middle of the call)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client
from mcp_types import CreateMessageRequestParams, CreateMessageResult, TextContent

from mtl_mcp import Memory
from mtl_mcp.config import Settings, load_settings
from mtl_mcp.learning.distill import DISTILL_MAX_TOKENS, JUDGE_MAX_TOKENS
from mtl_mcp.learning.pipeline import ledger
from mtl_mcp.server.app import build_server
from tests.conftest import LEAKED, claude_code_transcript
from tests.fake_anthropic import FakeAnthropic

SUMMARY = (
    "Fixed a crash on the first day of each month: reproduced it with a test that froze the "
    f"clock, fixed an off-by-one in the date range; the suite passes. (key {LEAKED})"
)
LESSON = {
    "title": "Freeze the clock to reproduce date bugs",
    "description": "When a failure depends on the calendar or the current time.",
    "content": "Pin the time at the failing boundary in a test before changing code, so the "
    "fix is proven by a test that failed first.",
    "polarity": "success",
    "category": "test-verification",
    "domain": "web-backend",
    "languages": ["python"],
    "tags": ["dates", "tests"],
}
MODEL = "client-model-small"


class ClientModel:
    """A sampling callback: answers the judge and the distill questions, records them."""

    def __init__(self, answers: dict[str, str] | None = None) -> None:
        self.asked: list[CreateMessageRequestParams] = []
        self.answers = answers or {
            "judge": json.dumps({"outcome": "success", "reason": "the suite passes"}),
            "distill": json.dumps({"insights": [LESSON]}),
        }

    async def __call__(self, ctx: Any, params: CreateMessageRequestParams) -> CreateMessageResult:
        self.asked.append(params)
        step = "distill" if '"insights"' in (params.system_prompt or "") else "judge"
        text = TextContent(type="text", text=self.answers[step])
        return CreateMessageResult(role="assistant", content=text, model=MODEL)


def record(settings: Settings, model: ClientModel | None, mode: str = "auto") -> Any:
    async def call() -> Any:
        async with Client(build_server(settings), sampling_callback=model, mode=mode) as client:
            return await client.call_tool("record_session", {"summary": SUMMARY})

    return anyio.run(call)


@pytest.fixture
def memory(settings: Settings) -> Iterator[Memory]:
    store = Memory(settings)
    yield store
    store.close()


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_record_session_distils_through_the_clients_model(
    settings: Settings, memory: Memory, mode: str
) -> None:
    """No API key, a client that samples: the judge and distill questions go to its model
    with our prompts and schemas, redacted; the insight is stored and its tokens counted."""
    model = ClientModel()
    result = record(settings, model, mode)

    assert not result.is_error, result.content
    recorded = result.structured_content
    assert recorded["stored"] == 1, recorded
    assert recorded["note"] == f"distilled with {MODEL} via mcp-sampling: success"
    judge, distill = model.asked
    assert judge.max_tokens == JUDGE_MAX_TOKENS and distill.max_tokens == DISTILL_MAX_TOKENS
    assert '"outcome"' in (judge.system_prompt or "") and "JSON schema" in (
        judge.system_prompt or ""
    )
    for asked in model.asked:
        [message] = asked.messages
        assert isinstance(message.content, TextContent)
        assert "off-by-one" in message.content.text and "[REDACTED" in message.content.text
        assert LEAKED not in message.content.text + (asked.system_prompt or "")
        assert asked.model_preferences is not None and asked.model_preferences.hints
    [stored] = memory.list()[0]
    assert stored.title == LESSON["title"] and stored.distilled_by == MODEL
    assert ledger(settings).used_today("mcp-sampling") > 0


def test_an_api_key_wins_over_sampling(
    settings: Settings, memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a key, `auto` uses the API and never asks the client's model."""
    model = ClientModel()
    with FakeAnthropic() as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789abcdefghij")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        fake.reply_json({"outcome": "success", "reason": "passes"})
        fake.reply_json({"insights": [LESSON]})
        result = record(settings, model)
    assert not result.is_error and result.structured_content["stored"] == 1
    assert model.asked == []


def test_a_client_without_sampling_gets_a_note_not_a_call(settings: Settings) -> None:
    """Nothing can distil (no key, no sampling, no CLI): nothing recorded, the note says why."""
    result = record(settings, None)
    assert not result.is_error
    assert result.structured_content["stored"] == 0
    assert "nothing recorded: pass 0-3 insights" in result.structured_content["note"]


def test_an_answer_that_is_not_json_fails_the_call_and_stores_nothing(
    settings: Settings, memory: Memory
) -> None:
    """The judge's prose falls back to 'unclear'; prose at the distill step is an error."""
    model = ClientModel({"judge": "It went well.", "distill": "Here are my lessons: ..."})
    result = record(settings, model)
    assert result.is_error and "unusable output at the distill step" in str(result.content)
    assert len(model.asked) == 2 and memory.list()[1] == 0


def test_the_budget_is_checked_before_the_first_question(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A sampling run is held to the subscription budget too, before anything is asked."""
    monkeypatch.setenv("MTL_MCP_SUBSCRIPTION_DAILY_TOKENS", "1000")
    model = ClientModel()
    result = record(load_settings(), model)
    assert result.is_error and "mcp-sampling daily budget of 1,000" in str(result.content)
    assert model.asked == []


def record_transcript(settings: Settings, path: str, *, local: bool = True) -> Any:
    """record_session naming a transcript, from a client that samples (its model would see
    the digest of whatever file is read)."""

    async def call() -> Any:
        server = build_server(settings, local=local)
        async with Client(server, sampling_callback=ClientModel()) as client:
            return await client.call_tool(
                "record_session", {"summary": "s", "transcript_path": path}
            )

    return anyio.run(call)


def test_record_session_reads_transcripts_only_from_the_assistants_session_folders(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A transcript in Claude Code's session folder is read; any other file the server's
    user can read (directly, or by a symbolic link from inside that folder) is refused
    before a byte of it is read, in our words."""
    sessions = tmp_path / "claude" / "projects" / "p"
    sessions.mkdir(parents=True)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    secret = tmp_path / "private.jsonl"
    secret.write_text(json.dumps({"type": "user", "message": {"content": f"pw {LEAKED}"}}))
    (sessions / "link.jsonl").symlink_to(secret)
    transcript = claude_code_transcript(sessions / "real.jsonl")
    for path in (str(secret), "/etc/passwd", str(sessions / "link.jsonl")):
        result = record_transcript(settings, path)
        assert result.is_error, path
        assert "must be a session transcript (.jsonl) in the assistants' session" in str(
            result.content
        )
    accepted = record_transcript(settings, str(transcript))
    assert not accepted.is_error, accepted.content
    assert accepted.structured_content["stored"] == 1


def test_over_http_record_session_names_no_file_at_all(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An HTTP client may be on another machine: even a real transcript path is refused."""
    sessions = tmp_path / "claude" / "projects" / "p"
    sessions.mkdir(parents=True)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    transcript = claude_code_transcript(sessions / "real.jsonl")
    result = record_transcript(settings, str(transcript), local=False)
    assert result.is_error and "transcript_path is not accepted over HTTP" in str(result.content)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_the_clients_model_also_rates_what_the_session_was_given(
    settings: Settings, memory: Memory, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """In a window that knows its session (Claude Code passes it), a recall_insights call is
    recorded under it; record_session's judge question then lists those notes, and the
    verdicts the client's model gives are stored with the plan."""
    monkeypatch.setenv("CLAUDE_CODE_SESSION_ID", "sess-42")
    [stored] = memory.record([LESSON])
    plan = "Freeze the clock at the failing boundary, fix the range check, rerun the suite."
    model = ClientModel(
        {
            "judge": json.dumps(
                {
                    "outcome": "success",
                    "reason": "passes",
                    "verdicts": [{"note": 1, "verdict": "helped", "mode": None, "reason": "used"}],
                }
            ),
            "distill": json.dumps({"insights": []}),
        }
    )

    async def session() -> Any:
        server = build_server(settings, memory)
        async with Client(server, sampling_callback=model, mode=mode) as client:
            await client.call_tool("recall_insights", {"plan": plan})
            return await client.call_tool("record_session", {"summary": SUMMARY})

    result = anyio.run(session)
    assert not result.is_error, result.content
    judge = model.asked[0]
    assert isinstance(judge.messages[0].content, TextContent)
    assert f"1. {LESSON['title']}: " in judge.messages[0].content.text
    [verdict] = memory.history(str(stored.id)).verdicts
    assert (verdict.verdict, verdict.session_id, verdict.plan) == ("helped", "sess-42", plan)
    assert verdict.backend == "mcp-sampling"
