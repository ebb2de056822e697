"""Readers for the line-oriented formats (Claude Code, Codex CLI, Gemini CLI, Copilot CLI,
plain text) and the `read_transcript` entry point that picks one.

Each reader streams records into a Collector and ignores entry types it does not know:
both CLIs change their formats between versions, and a newer entry must not break us.
"""

from __future__ import annotations

import logging
import re
from collections import OrderedDict
from pathlib import Path
from typing import Any

from mtl_mcp.errors import InputError
from mtl_mcp.learning.transcripts.content import describe_call, flatten, parse_arguments
from mtl_mcp.learning.transcripts.events import (
    ERROR_LINE,
    Collector,
    Format,
    Kind,
    Role,
    Transcript,
)
from mtl_mcp.learning.transcripts.lines import detect_format, json_records, text_lines
from mtl_mcp.learning.transcripts.trajectory import read_trajectory

logger = logging.getLogger(__name__)

_RECENT = 1024  # tool-call ids and message ids remembered for pairing and de-duplication


class _Recent(OrderedDict[str, str]):
    """A small LRU map: the only state that grows with the file, so it is capped."""

    def put(self, key: str, value: str) -> None:
        self[key] = value
        self.move_to_end(key)
        if len(self) > _RECENT:
            self.popitem(last=False)


def _claude_block_key(message_id: str, block: dict[str, Any]) -> str:
    """Identity of one content block of one message, to drop the repeated split lines."""
    kind = str(block.get("type"))
    ident = (
        block.get("id") or block.get("tool_use_id") or block.get("text") or block.get("thinking")
    )
    return f"{message_id}\0{kind}\0{hash(str(ident))}"


def read_claude_code(path: Path, sink: Collector) -> None:
    """Claude Code session JSONL: visible user/assistant entries, de-duplicated by block."""
    seen = _Recent()
    tools = _Recent()
    for record in json_records(path, sink):
        entry = record.get("type")
        if entry not in ("user", "assistant"):
            continue  # summary, file-history-snapshot, progress, system, future types
        sink.meta(session_id=record.get("sessionId"), cwd=record.get("cwd"))
        if record.get("isSidechain") is True or record.get("isMeta") is True:
            continue
        message = record.get("message")
        if not isinstance(message, dict):
            sink.skipped += 1
            continue
        content = message.get("content")
        if record.get("isCompactSummary") is True:
            sink.emit("system", "summary", flatten(content))
            continue
        role: Role = "assistant" if entry == "assistant" else "user"
        if role == "assistant":
            sink.meta(model=message.get("model"))
        if isinstance(content, str):
            sink.emit(role, "text", content)
            continue
        if not isinstance(content, list):
            sink.skipped += 1
            continue
        message_id = message.get("id") if role == "assistant" else None
        for block in content:
            if not isinstance(block, dict):
                sink.skipped += 1
                continue
            if isinstance(message_id, str):
                key = _claude_block_key(message_id, block)
                if key in seen:
                    continue
                seen.put(key, "")
            _claude_block(block, role, sink, tools)


def _claude_block(block: dict[str, Any], role: Role, sink: Collector, tools: _Recent) -> None:
    kind = block.get("type")
    if kind == "text":
        sink.emit(role, "text", flatten(block.get("text")))
    elif kind == "tool_use":
        name = str(block.get("name") or "tool")
        if isinstance(block.get("id"), str):
            tools.put(block["id"], name)
        sink.emit("assistant", "tool_call", describe_call(block.get("input")), tool=name)
    elif kind == "tool_result":
        call_id = block.get("tool_use_id")
        sink.emit(
            "tool",
            "tool_result",
            flatten(block.get("content")),
            tool=tools.get(call_id) if isinstance(call_id, str) else None,
            is_error=block.get("is_error") is True,
        )
    # thinking and redacted_thinking are private reasoning; images carry no text


_CODEX_CONTEXT = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions")
_EXIT_CODE = re.compile(r"(?:Exit code|exit_code|Process exited with code)\W{0,3}(-?\d+)")


def _codex_output(output: object) -> tuple[str, bool]:
    """A function call's output text and whether it failed (a non-zero exit code)."""
    parsed = parse_arguments(output)
    if isinstance(parsed, dict) and ("output" in parsed or "content" in parsed):
        # Older rollouts: {"output": "...", "metadata": {"exit_code": 1, ...}}
        metadata = parsed.get("metadata")
        code = metadata.get("exit_code") if isinstance(metadata, dict) else None
        text = flatten(parsed.get("output", parsed.get("content")))
        return text, isinstance(code, int) and code != 0
    text = flatten(output)
    match = _EXIT_CODE.search(text[:500])
    return text, match is not None and match.group(1) != "0"


def read_codex(path: Path, sink: Collector) -> None:
    """Codex CLI rollout JSONL: session_meta plus response_item payloads."""
    tools = _Recent()
    for record in json_records(path, sink):
        kind = record.get("type")
        payload = record.get("payload")
        if kind in ("session_meta", "turn_context"):
            if isinstance(payload, dict):
                sink.meta(session_id=payload.get("id"), cwd=payload.get("cwd"))
                sink.meta(model=payload.get("model"))
            continue
        if kind == "compacted":
            if isinstance(payload, dict):
                sink.emit("system", "summary", flatten(payload.get("message")))
            continue
        if kind != "response_item":
            if "payload" in record or kind == "event_msg":
                continue  # event_msg repeats response items for the TUI; others are unknown
            payload = record  # rollouts before the envelope wrote bare response items
        if not isinstance(payload, dict):
            sink.skipped += 1
            continue
        _codex_item(payload, sink, tools)


def _codex_item(item: dict[str, Any], sink: Collector, tools: _Recent) -> None:
    kind = item.get("type")
    call_id = item.get("call_id")
    if kind == "message":
        role = item.get("role")
        text = flatten(item.get("content"))
        if role == "assistant":
            sink.emit("assistant", "text", text)
        elif role == "user":
            injected = text.lstrip().startswith(_CODEX_CONTEXT)
            sink.emit("system" if injected else "user", "text", text)
    elif kind in ("function_call", "custom_tool_call"):
        name = str(item.get("name") or "tool")
        if isinstance(call_id, str):
            tools.put(call_id, name)
        arguments = item.get("arguments", item.get("input"))
        sink.emit("assistant", "tool_call", describe_call(arguments), tool=name)
    elif kind == "local_shell_call":
        action = item.get("action")
        command = action.get("command") if isinstance(action, dict) else None
        if isinstance(call_id, str):
            tools.put(call_id, "shell")
        sink.emit("assistant", "tool_call", describe_call({"command": command}), tool="shell")
    elif kind in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
        text, failed = _codex_output(item.get("output"))
        tool = tools.get(call_id) if isinstance(call_id, str) else None
        sink.emit("tool", "tool_result", text, tool=tool, is_error=failed)
    elif kind == "web_search_call":
        action = item.get("action")
        query = action.get("query") if isinstance(action, dict) else None
        sink.emit("assistant", "tool_call", str(query or ""), tool="web_search")
    # reasoning is private; anything else is a type newer than this reader


_HOOK_CONTEXT = re.compile(r"<hook_context>.*?</hook_context>\s*", re.S)


def read_gemini(path: Path, sink: Collector) -> None:
    """Gemini CLI chat JSONL (`~/.gemini/tmp/<project>/chats/session-*.jsonl`): a header, then
    messages, each model message written again once its tool calls ran (with their results),
    and `$set` lines that only update metadata."""
    said = _Recent()
    for record in json_records(path, sink):
        if "projectHash" in record:
            sink.meta(session_id=record.get("sessionId"))
            continue
        kind, ident = record.get("type"), str(record.get("id"))
        if kind == "user":
            parts = [p for p in record.get("content") or [] if isinstance(p, dict)]
            text = _HOOK_CONTEXT.sub("", flatten(parts))  # what hooks added, mtl-mcp's own
            if text.strip():
                injected = text.lstrip().startswith("<session_context>")
                sink.emit("system" if injected else "user", "text", text)
        elif kind == "gemini":
            sink.meta(model=record.get("model"))
            text = flatten(record.get("content"))
            if text.strip() and ident not in said:
                sink.emit("assistant", "text", text)
            said.put(ident, "")
            for call in record.get("toolCalls") or []:
                if isinstance(call, dict):
                    _gemini_call(call, sink)
        # "$set", info, error and newer types carry no conversation


def _gemini_call(call: dict[str, Any], sink: Collector) -> None:
    name = str(call.get("name") or "tool")
    sink.emit("assistant", "tool_call", describe_call(call.get("args")), tool=name)
    for part in call.get("result") or []:
        response = (
            part.get("functionResponse", {}).get("response") if isinstance(part, dict) else None
        )
        if isinstance(response, dict):
            failed = "error" in response
            text = flatten(response.get("error") if failed else response.get("output"))
            sink.emit("tool", "tool_result", text, tool=name, is_error=failed)


def read_copilot(path: Path, sink: Collector) -> None:
    """Copilot CLI events JSONL (`~/.copilot/session-state/<id>/events.jsonl`)."""
    tools = _Recent()
    for record in json_records(path, sink):
        kind, data = record.get("type"), record.get("data")
        if not isinstance(data, dict):
            continue
        if kind == "session.start":
            context = data.get("context")
            cwd = context.get("cwd") if isinstance(context, dict) else None
            sink.meta(session_id=data.get("sessionId"), cwd=cwd, model=data.get("selectedModel"))
        elif kind == "user.message":
            sink.emit("user", "text", flatten(data.get("content")))
        elif kind == "assistant.message":
            sink.emit("assistant", "text", flatten(data.get("content")))
            for request in data.get("toolRequests") or []:
                if not isinstance(request, dict):
                    continue
                name = str(request.get("name") or "tool")
                tools.put(str(request.get("toolCallId")), name)
                sink.emit("assistant", "tool_call", describe_call(request.get("arguments")),
                          tool=name)  # fmt: skip
        elif kind == "tool.execution_complete":
            result, error = data.get("result"), data.get("error")
            failed = data.get("success") is False
            text = (
                flatten(error.get("message") if isinstance(error, dict) else None) if failed else ""
            )
            if isinstance(result, dict) and not text:
                text = flatten(result.get("content"))
            tool = tools.get(str(data.get("toolCallId")))
            sink.emit("tool", "tool_result", text, tool=tool, is_error=failed)
        # hooks, usage, turn markers and newer types carry no conversation


_SPEAKERS = r"(user|human|you|assistant|claude|ai|model|agent|codex)"
_LABEL = re.compile(r"(?i)^\s*>?\s*\**" + _SPEAKERS + r"\**\s*:\**\s*")
_HEADING = re.compile(r"(?i)^\s*#{1,6}\s*" + _SPEAKERS + r"\s*:?\s*$")
_ASSISTANT_NAMES = frozenset({"assistant", "claude", "ai", "model", "agent", "codex"})
_PARAGRAPH_MAX = 8000


def read_text(path: Path, sink: Collector) -> None:
    """Plain text or Markdown: paragraphs become events.

    A `$ cmd` line is a shell tool call and the lines right under it are its output.
    A paragraph opening with a speaker label ("User:", "**Assistant:**", "## Claude")
    sets the role of what follows; before any label, text counts as the user's.
    """
    role: Role = "user"
    kind: Kind = "text"
    paragraph: list[str] = []
    size = 0

    def flush() -> None:
        nonlocal size, kind
        if paragraph or kind == "tool_result":
            text = "\n".join(paragraph)
            if kind == "tool_result":
                sink.emit("tool", "tool_result", text, tool="shell", is_error=_failed(text))
            else:
                sink.emit(role, "text", text)
        paragraph.clear()
        size = 0
        kind = "text"

    for line in text_lines(path, sink, keep_blank=True):
        if not line.strip():
            flush()
            continue
        if "\x00" in line or line.count("\ufffd") > len(line) // 4:
            sink.skipped += 1  # binary garbage, not prose
            continue
        if line.startswith("$ "):
            flush()
            sink.emit("assistant", "tool_call", line[2:], tool="shell")
            kind = "tool_result"
            continue
        speaker = (_HEADING.match(line) or _LABEL.match(line)) if not paragraph else None
        if speaker is not None and kind == "text":
            role = "assistant" if speaker.group(1).lower() in _ASSISTANT_NAMES else "user"
            line = line[speaker.end() :]
            if not line.strip():
                continue
        if size < _PARAGRAPH_MAX:  # the event is clipped anyway; do not hoard the rest
            paragraph.append(line)
            size += len(line)
    flush()


def _failed(output: str) -> bool:
    return ERROR_LINE.search(output) is not None


_READERS = {
    "claude-code": read_claude_code,
    "codex": read_codex,
    "gemini-cli": read_gemini,
    "copilot-cli": read_copilot,
    "trajectory": read_trajectory,
    "text": read_text,
}


def read_transcript(path: Path, fmt: Format = "auto", *, max_events: int = 5000) -> Transcript:
    """Read a session transcript into a bounded list of normalized events.

    Bad lines and records are counted in `skipped`, never raised; TranscriptError is
    raised only when the file itself is missing, a directory, or unreadable.
    """
    if fmt != "auto" and fmt not in _READERS:
        raise InputError(f"unknown transcript format {fmt!r}: use auto, {', '.join(_READERS)}")
    path = Path(path).expanduser()
    sink = Collector(max_events)
    chosen = detect_format(path) if fmt == "auto" else fmt
    reader = _READERS.get(chosen, read_text)
    reader(path, sink)
    transcript = sink.transcript(chosen if chosen in _READERS else "text")
    if transcript.skipped:
        logger.info("%s: skipped %d unreadable records", path, transcript.skipped)
    return transcript
