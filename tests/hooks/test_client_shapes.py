"""The hooks read Gemini CLI's, Copilot CLI's and opencode's payloads and transcripts, answer
each in its own shape, and ignore shapes no installed hook sends (VS Code's). Payloads as
the pinned clients sent them to probe hooks (Gemini CLI 0.61.0, Copilot CLI 1.0.102); the
real clients drive them in tests/frontdoors/test_clients_real.py."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from mtl_mcp.config import Settings
from mtl_mcp.hooks import session
from mtl_mcp.hooks.fast import STATE_FOLDER, served_already, state_name
from mtl_mcp.hooks.plans import signature, task_text
from mtl_mcp.hooks.session import parse_input, session_end, session_start
from mtl_mcp.hooks.tool_use import parse_call
from mtl_mcp.learning.spool import Spool
from mtl_mcp.learning.transcripts import detect_format, read_transcript

PLAN = (
    "First I will reproduce the failing test on its own to see the real error, then make "
    "the smallest fix and rerun the suite."
)
GEMINI_CHAT = "/u/.gemini/tmp/work/chats/session-2026-12-01T08-38-65bea617.jsonl"
GEMINI_AFTER_TOOL = {
    "session_id": "65bea617-f40d",
    "transcript_path": GEMINI_CHAT,
    "cwd": "/w",
    "hook_event_name": "AfterTool",
    "timestamp": "2026-12-01T08:38:09.672Z",
    "tool_name": "run_shell_command",
    "tool_input": {"command": "pytest -x", "description": "run the tests"},
    "tool_response": {"llmContent": "1 failed", "returnDisplay": "1 failed"},
    "mcp_context": None,
    "original_request_name": "run_shell_command",
}
COPILOT_POST_TOOL = {
    "sessionId": "c6b49f32-a9eb",
    "timestamp": 1796114369350,
    "cwd": "/w",
    "toolName": "bash",
    "toolArgs": {"command": "pytest -x", "description": "run the tests"},
    "toolResult": {"resultType": "success", "textResultForLlm": "1 failed"},
}
VSCODE_POST_TOOL = {  # VS Code runs Claude Code's and Copilot's hook files with this shape
    "timestamp": "2026-12-01T08:00:00Z",
    "cwd": "/w",
    "sessionId": "v1",
    "hookEventName": "PostToolUse",
    "transcript_path": "/u/vscode.json",
    "tool_name": "editFiles",
    "tool_input": {},
    "tool_use_id": "x",
    "tool_response": "ok",
}


def test_gemini_after_tool_is_read_with_its_transcript_and_failure() -> None:
    call = parse_call(GEMINI_AFTER_TOOL)
    assert call is not None
    assert (call.client, call.session, call.tool, call.transcript) == (
        "gemini-cli",
        "65bea617-f40d",
        "run_shell_command",
        GEMINI_CHAT,
    )
    assert call.call_key == signature("run_shell_command", GEMINI_AFTER_TOOL["tool_input"])
    assert not call.failed and not call.transcript_first
    failed = parse_call(GEMINI_AFTER_TOOL | {"tool_response": {"error": "exit 1"}})
    assert failed is not None and failed.failed


def test_copilot_post_tool_use_finds_its_events_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("COPILOT_HOME", str(tmp_path / "cop"))
    call = parse_call(COPILOT_POST_TOOL)
    assert call is not None and call.client == "copilot-cli" and not call.failed
    assert call.transcript == str(tmp_path / "cop/session-state/c6b49f32-a9eb/events.jsonl")
    denied = COPILOT_POST_TOOL | {"toolResult": {"resultType": "failure"}}
    assert parse_call(denied).failed  # type: ignore[union-attr]
    assert parse_call({k: v for k, v in COPILOT_POST_TOOL.items() if k != "toolResult"}) is None


def test_opencode_plugin_payload_carries_the_text_the_model_said() -> None:
    payload = {
        "client": "opencode",
        "hook_event_name": "tool.execute.after",
        "session_id": "ses_1",
        "turn_id": "msg_1",
        "tool_name": "read",
        "tool_input": {"filePath": "/w/a.py"},
        "tool_use_id": "call_1",
        "cwd": "/w",
        "assistant_text": PLAN,
    }
    call = parse_call(payload)
    assert call is not None
    assert (call.client, call.task, call.said) == ("opencode", "msg_1", PLAN)
    assert parse_call(payload | {"client": "other"}) is None


@pytest.mark.parametrize(
    "payload",
    [
        VSCODE_POST_TOOL,
        {"hook_event_name": "BeforeTool", "session_id": "s", "tool_name": "x"},
        {"sessionId": "s", "toolName": "bash", "toolArgs": {}},  # Copilot's preToolUse
        [1, 2],
    ],
)
def test_shapes_no_installed_hook_sends_are_ignored(payload: Any) -> None:
    assert parse_call(payload) is None


def write_lines(path: Path, lines: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return str(path)


def test_the_plan_is_read_from_a_gemini_chat_before_and_after_it_shows_the_call(
    tmp_path: Path,
) -> None:
    """Gemini writes a model message, then the same message again with its tool calls:
    the plan is the message's text either way, said once; the session-start context it put
    in front of the prompt is not part of the prompt."""
    arguments = {"file_path": "/w/a.py"}
    head = [
        {"sessionId": "s", "projectHash": "h", "startTime": "t", "kind": "main"},
        {"$set": {"messages": [{"type": "user", "content": [{"text": "<session_context>x"}]}]}},
        {
            "id": "u1",
            "type": "user",
            "content": [{"text": "<hook_context>mtl-mcp memory</hook_context>\n\nFix the bug"}],
        },
        {"id": "g1", "type": "gemini", "content": PLAN},
    ]
    path = write_lines(tmp_path / "chat.jsonl", head)
    before = task_text(path, signature("read_file", arguments))
    assert (before.prompt, before.said, before.seen) == ("Fix the bug", PLAN, False)
    call = {"id": "read_file_1", "name": "read_file", "args": arguments, "result": []}
    write_lines(tmp_path / "chat.jsonl", [*head, head[-1] | {"toolCalls": [call]}])
    after = task_text(path, signature("read_file", arguments))
    assert (after.prompt, after.said, after.seen, after.tool_calls) == (
        "Fix the bug",
        PLAN,
        True,
        1,
    )


def test_the_plan_is_read_from_copilot_events(tmp_path: Path) -> None:
    arguments = {"path": "/w/a.py"}
    lines = [
        {"type": "session.start", "data": {"sessionId": "s", "context": {"cwd": "/w"}}},
        {"type": "user.message", "data": {"content": "Fix the bug", "messageId": "m1"}},
        {
            "type": "assistant.message",
            "data": {
                "content": PLAN,
                "toolRequests": [{"toolCallId": "c1", "name": "view", "arguments": arguments}],
            },
        },
    ]
    task = task_text(write_lines(tmp_path / "events.jsonl", lines), signature("view", arguments))
    assert (task.prompt, task.prompt_key, task.said, task.seen) == ("Fix the bug", "m1", PLAN, True)


@pytest.mark.parametrize(
    ("payload", "client"),
    [
        ({"session_id": "g", "transcript_path": GEMINI_CHAT, "hook_event_name": "SessionStart",
          "timestamp": "2026-12-01T08:38:06.728Z", "source": "startup"}, "gemini-cli"),
        ({"sessionId": "c", "timestamp": 1, "cwd": "/w", "source": "new",
          "initialPrompt": "Fix"}, "copilot-cli"),
        ({"client": "opencode", "session_id": "ses_1", "cwd": "/w"}, "opencode"),
        ({"sessionId": "v", "hookEventName": "SessionStart", "source": "new"}, None),
    ],
)  # fmt: skip
def test_the_session_hooks_tell_the_client(payload: dict[str, Any], client: str | None) -> None:
    assert parse_input(json.dumps(payload)).client == client


def test_session_start_answers_in_each_clients_shape(settings: Settings, tmp_path: Path) -> None:
    """Gemini CLI reads only JSON from a hook; Copilot CLI and the opencode plugin take a flat
    additionalContext, Cursor additional_context; a VS Code payload gets nothing."""
    settings = dataclasses.replace(settings, service=False)
    base = {"cwd": str(tmp_path)}
    gemini = session_start(
        json.dumps(base | {"session_id": "g", "transcript_path": GEMINI_CHAT}), settings
    )
    context = json.loads(gemini)["hookSpecificOutput"]
    assert context["hookEventName"] == "SessionStart" and "mtl-mcp" in context["additionalContext"]
    copilot = json.loads(session_start(json.dumps(base | {"sessionId": "c"}), settings))
    assert copilot["additionalContext"] == context["additionalContext"]
    opencode = json.loads(session_start(json.dumps(base | {"client": "opencode"}), settings))
    assert opencode == copilot
    cursor = session_start(
        json.dumps(base | {"conversation_id": "u", "cursor_version": "2"}), settings
    )
    assert json.loads(cursor) == {"additional_context": context["additionalContext"]}
    vscode = base | {"sessionId": "v", "hookEventName": "SessionStart"}
    assert session_start(json.dumps(vscode), settings) == ""


def test_session_end_queues_each_clients_transcript_in_its_format(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(session, "spawn_detached", lambda *args: None)
    monkeypatch.setenv("COPILOT_HOME", str(tmp_path / "cop"))
    chat = tmp_path / "gem/tmp/work/chats/session-2026-12-01T08-38-65bea617.jsonl"
    chat.parent.mkdir(parents=True)
    write_lines(chat, [
        {"sessionId": "g", "projectHash": "h", "startTime": "t", "kind": "main"},
        {"id": "u1", "type": "user", "content": [{"text": "Fix the bug in the parser"}]},
        {"id": "g1", "type": "gemini", "content": "Done: the parser handles it."},
    ])  # fmt: skip
    events = tmp_path / "cop/session-state/c1/events.jsonl"
    events.parent.mkdir(parents=True)
    write_lines(events, [
        {"type": "session.start", "data": {"sessionId": "c1", "context": {"cwd": "/w"}}},
        {"type": "user.message", "data": {"content": "Fix the bug in the parser"}},
        {"type": "assistant.message", "data": {"content": "Done.", "toolRequests": []}},
    ])  # fmt: skip
    gemini = {"session_id": "g", "transcript_path": str(chat), "hook_event_name": "SessionEnd"}
    assert session_end(json.dumps(gemini), settings) == "queued session g"
    assert session_end(json.dumps({"sessionId": "c1", "reason": "complete"}), settings) == (
        "queued session c1"
    )
    vscode = {"sessionId": "v", "hookEventName": "Stop", "transcript_path": str(chat)}
    assert "ignored" in session_end(json.dumps(vscode), settings)
    jobs = {job.session_id: job for _, job in Spool(settings).jobs()}
    assert {(j.client, j.format) for j in jobs.values()} == {
        ("gemini-cli", "gemini-cli"),
        ("copilot-cli", "copilot-cli"),
    }
    for job in jobs.values():
        assert detect_format(Path(job.transcript_path)) == job.format
        transcript = read_transcript(Path(job.transcript_path), job.format)
        assert [e.role for e in transcript.events] == ["user", "assistant"]


def test_a_finished_task_of_a_client_naming_none_ends_in_the_fast_path(tmp_path: Path) -> None:
    """Gemini and Copilot name no task: the hook is done with one while the transcript holds
    no prompt after the point it was done (tool results, the model's messages are fine)."""
    chat = tmp_path / "chats" / "session-1.jsonl"
    chat.parent.mkdir()
    lines: list[dict[str, Any]] = [
        {"id": "u1", "type": "user", "content": [{"text": "Fix the bug"}]},
        {"id": "g1", "type": "gemini", "content": PLAN},
    ]
    write_lines(chat, lines)
    home = tmp_path / "home"
    (home / STATE_FOLDER).mkdir(parents=True)
    state = home / STATE_FOLDER / state_name("65bea617-f40d")
    state.write_text(json.dumps({"done": True, "read_to": chat.stat().st_size}))
    payload = GEMINI_AFTER_TOOL | {"transcript_path": str(chat)}
    assert served_already(str(home), json.dumps(payload))
    result = {"functionResponse": {"name": "read_file", "response": {"output": "x"}}}
    write_lines(chat, [*lines, {"id": "u2", "type": "user", "content": [result]}])
    assert served_already(str(home), json.dumps(payload))
    failed = payload | {"tool_response": {"error": "exit 1"}}
    assert not served_already(str(home), json.dumps(failed))
    write_lines(chat, [*lines, {"id": "u3", "type": "user", "content": [{"text": "Now the docs"}]}])
    assert not served_already(str(home), json.dumps(payload))
    state.write_text(json.dumps({"done": True}))  # no offset: no telling
    assert not served_already(str(home), json.dumps(payload))


def test_a_fifo_transcript_is_never_opened_by_the_fast_path(tmp_path: Path) -> None:
    """A transcript_path that is a FIFO (or a device): no writer ever comes, so opening it
    to read would block the hook until the client kills it. It is no regular file: the
    hook cannot tell whether a prompt came, and says so (False) at once."""
    import os

    fifo = tmp_path / "chats" / "session-1.jsonl"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    home = tmp_path / "home"
    (home / STATE_FOLDER).mkdir(parents=True)
    state = home / STATE_FOLDER / state_name("65bea617-f40d")
    state.write_text(json.dumps({"done": True, "read_to": 0}))
    for path in (fifo, Path("/dev/zero")):
        payload = GEMINI_AFTER_TOOL | {"transcript_path": str(path)}
        assert not served_already(str(home), json.dumps(payload))
