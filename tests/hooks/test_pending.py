"""No plan is lost: a plan whose recall misses the hook's budget (the service starting or
busy) waits, and its notes go out once, at the next tool call of the same task, in every
client that runs the tool-use hook (each with its own payload and transcript), as
`mtl-mcp hook tool-use` runs for it, against the real shared service."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mtl_mcp import Memory
from mtl_mcp.config import Settings, load_settings
from mtl_mcp.operations.service import request
from mtl_mcp.schemas import RecallOrigin
from mtl_mcp.server.calls import ServiceMemory
from tests.conftest import FLAKY_LESSON, FLAKY_PLAN, serve_warm

pytestmark = pytest.mark.slow

MTL_MCP = str(Path(sys.executable).with_name("mtl-mcp"))
PROMPT = "The clock test fails now and then on CI; fix it."


def lines(path: Path, entries: list[dict[str, Any]]) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
    return str(path)


def claude_code(folder: Path, n: int) -> dict[str, Any]:
    entries: list[dict[str, Any]] = [
        {"type": "user", "uuid": "p1", "message": {"content": PROMPT}},
        {"type": "assistant", "message": {"content": [{"type": "text", "text": FLAKY_PLAN}]}},
    ]
    for call in range(1, n + 1):
        use = {"type": "tool_use", "id": f"t{call}", "name": "Read", "input": {}}
        entries.append({"type": "assistant", "message": {"content": [use]}})
    return {
        "session_id": "claude-1",
        "transcript_path": lines(folder / "claude.jsonl", entries),
        "cwd": str(folder),
        "prompt_id": "p1",
        "hook_event_name": "PostToolUse",
        "tool_name": "Read",
        "tool_input": {},
        "tool_use_id": f"t{n}",
    }


def codex(folder: Path, n: int) -> dict[str, Any]:
    def item(payload: dict[str, Any]) -> dict[str, Any]:
        return {"type": "response_item", "payload": payload}

    entries = [
        item({"type": "message", "role": "user", "content": [{"text": PROMPT}]}),
        item({"type": "message", "role": "assistant", "content": [{"text": FLAKY_PLAN}]}),
    ]
    entries += [
        item({"type": "function_call", "call_id": f"c{call}", "name": "exec_command"})
        for call in range(1, n + 1)
    ]
    return {
        "session_id": "codex-1",
        "turn_id": "turn-1",
        "transcript_path": lines(folder / "rollout-2026-codex-1.jsonl", entries),
        "cwd": str(folder),
        "hook_event_name": "PostToolUse",
        "tool_name": "exec_command",
        "tool_input": {"cmd": "cat a.py"},
        "tool_use_id": f"c{n}",
    }


def gemini(folder: Path, n: int) -> dict[str, Any]:
    calls = [{"name": "read_file", "args": {"file_path": f"/w/{c}.py"}} for c in range(1, n + 1)]
    entries = [
        {"id": "u1", "type": "user", "content": [{"text": PROMPT}]},
        {"id": "g1", "type": "gemini", "content": FLAKY_PLAN, "toolCalls": calls},
    ]
    return {
        "session_id": "gemini-1",
        "transcript_path": lines(folder / "chats" / "session-gemini-1.jsonl", entries),
        "cwd": str(folder),
        "hook_event_name": "AfterTool",
        "tool_name": "read_file",
        "tool_input": {"file_path": f"/w/{n}.py"},
        "tool_response": {"llmContent": "...", "returnDisplay": "..."},
    }


def copilot(folder: Path, n: int) -> dict[str, Any]:
    def said(text: str, call: int) -> dict[str, Any]:
        asked = {"toolCallId": f"k{call}", "name": "view", "arguments": {"path": f"/w/{call}"}}
        return {"type": "assistant.message", "data": {"content": text, "toolRequests": [asked]}}

    entries = [{"type": "user.message", "data": {"content": PROMPT, "messageId": "m1"}}]
    entries += [said(FLAKY_PLAN if call == 1 else "", call) for call in range(1, n + 1)]
    lines(folder / "copilot" / "session-state" / "copilot-1" / "events.jsonl", entries)
    return {
        "sessionId": "copilot-1",
        "cwd": str(folder),
        "toolName": "view",
        "toolArgs": {"path": f"/w/{n}"},
        "toolResult": {"resultType": "success", "textResultForLlm": "..."},
    }


def opencode(folder: Path, n: int) -> dict[str, Any]:
    return {
        "client": "opencode",
        "hook_event_name": "tool.execute.after",
        "session_id": "opencode-1",
        "turn_id": "msg-1",
        "tool_name": "read",
        "tool_input": {"filePath": f"/w/{n}.py"},
        "tool_use_id": f"call-{n}",
        "cwd": str(folder),
        "assistant_text": FLAKY_PLAN if n == 1 else "",  # the plugin: what was said since
    }


CLIENTS: dict[str, Callable[[Path, int], dict[str, Any]]] = {
    "claude-code": claude_code,
    "codex": codex,
    "gemini-cli": gemini,
    "copilot-cli": copilot,
    "opencode": opencode,
}


def notes_in(stdout: str) -> list[str]:
    """The ids of the notes in a hook's answer, whatever the client's shape."""
    if not stdout:
        return []

    def texts(value: Any) -> Iterator[str]:
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict):
            for inner in value.values():
                yield from texts(inner)

    [context] = [t for t in texts(json.loads(stdout)) if " · id ins_" in t]
    found = [line for line in context.splitlines() if " · id ins_" in line]
    return [line.rsplit("id ", 1)[1].rstrip("]") for line in found]


@dataclass
class Service:
    settings: Settings
    pid: int

    def hook(self, payload: dict[str, Any], folder: Path) -> str:
        env = {**os.environ, "MTL_MCP_HOME": str(self.settings.home)}
        env["COPILOT_HOME"] = str(folder / "copilot")
        done = subprocess.run(
            [MTL_MCP, "hook", "tool-use"],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert done.returncode == 0 and done.stderr == "", done.stderr
        return done.stdout


@pytest.fixture
def service(settings: Settings) -> Service:
    """The starter pack, and a warm service for it."""
    memory = Memory(settings)
    memory.seed()
    memory.close()
    serve_warm(settings)
    status = request(settings, "status")
    assert status
    return Service(load_settings(settings.home), int(status["pid"]))


@pytest.mark.parametrize("client", list(CLIENTS))
def test_a_plan_that_missed_the_budget_gets_its_notes_at_the_next_tool_call_once(
    service: Service, tmp_path: Path, client: str
) -> None:
    """The first tool call after the plan finds the service stopped (busy): nothing, and
    the plan waits. The next call of the task, the service answering again, brings the
    plan's notes (what in-process recall gives for it); the one after brings nothing; the
    ledger holds that one hook recall."""
    payload = CLIENTS[client]
    os.kill(service.pid, signal.SIGSTOP)
    try:
        assert service.hook(payload(tmp_path, 1), tmp_path) == ""
    finally:
        os.kill(service.pid, signal.SIGCONT)
    log = (service.settings.logs_dir / "hooks.log").read_text()
    assert "the service did not answer within" in log
    notes = notes_in(service.hook(payload(tmp_path, 2), tmp_path))
    assert service.hook(payload(tmp_path, 3), tmp_path) == ""
    memory = Memory(service.settings)
    try:
        expected = memory.recall_for_session(FLAKY_PLAN, RecallOrigin(session_id="elsewhere"))
        titles = [memory.get(i).title for i in notes]
    finally:
        memory.close()
    assert expected and notes == [h.id for h in expected] and FLAKY_LESSON in titles
    [report] = [r for r in ServiceMemory(service.settings).sessions(10) if r.client == client]
    assert [(r.trigger, [h.id for h in r.hits]) for r in report.recalls] == [("hook", notes)]


def test_a_waiting_plan_goes_out_at_a_failed_tool_call_too(
    service: Service, tmp_path: Path
) -> None:
    """A failed tool call is the next tool call too: the waiting plan's notes go out there."""
    os.kill(service.pid, signal.SIGSTOP)
    try:
        assert service.hook(claude_code(tmp_path, 1), tmp_path) == ""
    finally:
        os.kill(service.pid, signal.SIGCONT)
    failed = claude_code(tmp_path, 2) | {"hook_event_name": "PostToolUseFailure"}
    answer = json.loads(service.hook(failed, tmp_path))["hookSpecificOutput"]
    assert answer["hookEventName"] == "PostToolUseFailure"
    assert notes_in(json.dumps(answer))
