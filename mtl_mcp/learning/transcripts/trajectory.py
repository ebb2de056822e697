"""Agent trajectories stored as one JSON document (or a JSONL of the same entries).

Three shapes of entry are understood, whatever key holds the list:
chat messages with `role` (mini-swe-agent, OpenAI-style tool calls), OpenHands events
with `source` plus `action` or `observation`, and SWE-agent steps that hold a
`thought`, an `action` and its `observation` together.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtl_mcp.learning.transcripts.content import describe_call, flatten
from mtl_mcp.learning.transcripts.events import Collector, Role
from mtl_mcp.learning.transcripts.lines import open_transcript

MAX_DOCUMENT_BYTES = 50 * 1024 * 1024
_LIST_KEYS = ("messages", "trajectory", "history", "steps", "events")
_RETURNCODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_OBSERVATION_START = ("<returncode>", "<output>", "observation:", "<observation>")
_SHELLS = frozenset({"", "bash", "sh", "shell", "console", "zsh"})
# OpenHands bookkeeping, not steps of the work; "think" is private reasoning.
_OPENHANDS_IGNORED = frozenset(
    {
        "system",
        "recall",
        "change_agent_state",
        "agent_state_changed",
        "null",
        "condensation",
        "think",
    }
)


@dataclass
class _State:
    first_user_seen: bool = False


def read_trajectory(path: Path, sink: Collector) -> None:
    """Read a trajectory document of at most MAX_DOCUMENT_BYTES; larger ones are skipped."""
    with open_transcript(path) as stream:
        size = os.fstat(stream.fileno()).st_size
        if size > MAX_DOCUMENT_BYTES:
            sink.skipped += 1
            sink.note(
                f"the JSON document is {size // (1024 * 1024)} MB, over the "
                f"{MAX_DOCUMENT_BYTES // (1024 * 1024)} MB limit for trajectories; not read"
            )
            return
        text = stream.read().decode("utf-8", errors="replace").lstrip("\ufeff")
    state = _State()
    try:
        document: object = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: hostile nesting depth
        _read_json_lines(text, sink, state)
        return
    del text
    entries = _entries(document)
    if entries is None:
        sink.skipped += 1
        sink.note("no list of messages, steps or events was found in the JSON document")
        return
    if isinstance(document, dict):
        _document_meta(document, sink)
    for entry in entries:
        sink.total_lines += 1
        if not (isinstance(entry, dict) and _entry(entry, sink, state)):
            sink.skipped += 1


def _read_json_lines(text: str, sink: Collector, state: _State) -> None:
    """Fallback for a JSONL of entries (or a document cut short): one entry per line."""
    for line in text.splitlines():
        if not line.strip():
            continue
        sink.total_lines += 1
        try:
            entry = json.loads(line)
        except (ValueError, RecursionError):
            sink.skipped += 1
            continue
        if not (isinstance(entry, dict) and _entry(entry, sink, state)):
            sink.skipped += 1


def _entries(document: object) -> list[Any] | None:
    if isinstance(document, list):
        return document
    if isinstance(document, dict):
        for key in _LIST_KEYS:
            value = document.get(key)
            if isinstance(value, list):
                return value
    return None


def _get(value: object, *keys: str) -> object:
    """`value[k1][k2]...`, or None as soon as a level is missing or not a dict."""
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _document_meta(document: dict[str, Any], sink: Collector) -> None:
    sink.meta(
        session_id=document.get("session_id") or document.get("instance_id") or document.get("id"),
        cwd=_get(document, "info", "config", "environment", "cwd"),
        model=_get(document, "info", "config", "model", "model_name") or document.get("model"),
    )


def _entry(entry: dict[str, Any], sink: Collector, state: _State) -> bool:
    """Emit one entry's events; False if the entry has no shape this reader knows."""
    if "role" in entry:
        _chat_message(entry, sink, state)
    elif "source" in entry and ("action" in entry or "observation" in entry):
        _openhands_event(entry, sink)
    elif "action" in entry or "observation" in entry:
        _swe_agent_step(entry, sink)
    else:
        return False
    return True


def _split_code(text: str) -> tuple[str, list[str]]:
    """Prose outside ``` fences, and the shell commands inside them (split, not regex:
    linear even with unbalanced fences)."""
    parts = text.split("```")
    prose = "\n".join(parts[0::2]).strip()
    commands: list[str] = []
    for index in range(1, len(parts) - 1, 2):  # an unclosed last fence is not a command
        language, _, body = parts[index].partition("\n")
        if language.strip().lower() in _SHELLS and body.strip():
            commands.append(body.strip())
    return prose, commands


def _chat_message(entry: dict[str, Any], sink: Collector, state: _State) -> None:
    role = entry.get("role")
    text = flatten(entry.get("content"))
    if role == "user":
        stripped = text.lstrip().lower()
        if state.first_user_seen and stripped.startswith(_OBSERVATION_START):
            code = _RETURNCODE.search(text[:200])
            failed = code is not None and code.group(1) != "0"
            sink.emit("tool", "tool_result", text, tool="bash", is_error=failed)
        else:
            state.first_user_seen = state.first_user_seen or bool(text.strip())
            sink.emit("user", "text", text)
    elif role == "assistant":
        prose, commands = _split_code(text)
        sink.emit("assistant", "text", prose)
        for command in commands:
            sink.emit("assistant", "tool_call", command, tool="bash")
        calls = entry.get("tool_calls")
        for call in calls if isinstance(calls, list) else []:
            name = _get(call, "function", "name")
            arguments = _get(call, "function", "arguments")
            tool = name if isinstance(name, str) else "tool"
            sink.emit("assistant", "tool_call", describe_call(arguments), tool=tool)
    elif role in ("tool", "function", "ipython"):
        name = entry.get("name")
        sink.emit("tool", "tool_result", text, tool=name if isinstance(name, str) else None)
    # system and developer prompts are boilerplate; other roles (mini's "exit") add nothing


def _openhands_event(entry: dict[str, Any], sink: Collector) -> None:
    raw_args = entry.get("args")
    args: dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
    function = _get(entry, "tool_call_metadata", "function_name")
    sink.meta(model=_get(entry, "tool_call_metadata", "model_response", "model"))
    action = entry.get("action")
    message = entry.get("message")
    if action is not None:
        if str(action) in _OPENHANDS_IGNORED:
            return
        if action == "message":
            role: Role = "user" if entry.get("source") == "user" else "assistant"
            sink.emit(role, "text", flatten(args.get("content") or message))
        elif action == "finish":
            final = args.get("final_thought") or args.get("thought") or message
            sink.emit("assistant", "text", flatten(final))
        else:
            sink.emit("assistant", "text", flatten(args.get("thought")))
            tool = function if isinstance(function, str) else str(action)
            sink.emit("assistant", "tool_call", describe_call(args), tool=tool)
        return
    observation = entry.get("observation")
    if str(observation) in _OPENHANDS_IGNORED:
        return
    exit_code = _get(entry, "extras", "metadata", "exit_code")
    failed = (
        observation == "error"
        or entry.get("success") is False
        or (isinstance(exit_code, int) and exit_code != 0)
    )
    text = flatten(entry.get("content") or message)
    tool = function if isinstance(function, str) else str(observation)
    sink.emit("tool", "tool_result", text, tool=tool, is_error=failed)


def _swe_agent_step(entry: dict[str, Any], sink: Collector) -> None:
    sink.emit("assistant", "text", flatten(entry.get("thought")))
    action = flatten(entry.get("action"))
    if action.strip():
        sink.emit("assistant", "tool_call", action, tool="bash")
    if "observation" in entry:
        sink.emit("tool", "tool_result", flatten(entry.get("observation")), tool="bash")
