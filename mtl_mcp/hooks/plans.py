"""What counts as the plan of a task, read from a tool call or the transcript's tail. Pure:
the standard library only, so the tool-use hook stays lean.

A plan is any of:
- a plan-mode plan (Claude Code's ExitPlanMode, `tool_input.plan`);
- a task or todo list (TodoWrite, TaskCreate, Codex's update_plan, Gemini's write_todos);
- else the assistant's text just before the tool call that fires the hook (since the
  prompt, or since the tool call before): what it said it would do before doing it.
  Earlier words ("Let me look." before a first Read) would only blur it.

A task starts with a user prompt. A prompt of a few words ("yes", "go on", "thanks")
continues the task before it, and a text of fewer than PLAN_MIN_WORDS words is no plan
yet ("Let me look."): recall waits for one.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from mtl_mcp.untrusted import json_loads, open_regular

PLAN_MIN_WORDS = 12  # fewer: "Let me read the file." is not yet a plan
TRIVIAL_PROMPT_WORDS = 3  # at most: "yes", "go on", "thanks!" continue the task before
PLAN_MAX_CHARS = 4000  # what recall takes (the plan limit of every door)
TAIL_BYTES = 512 * 1024  # of the transcript read to find the task's start
_WORD = re.compile(r"\w+")
# Codex, Claude Code and Gemini CLI wrap context they inject in the user's turn in tags
# like these; Gemini puts a hook's session-start context in front of the first prompt.
_INJECTED = re.compile(
    r"^\s*<(environment_context|user_instructions|system-reminder|command-|session_context)"
)
_HOOK_CONTEXT = re.compile(r"<hook_context>.*?</hook_context>\s*", re.S)


def signature(tool: str, arguments: Any) -> str:
    """A tool call's name and arguments as one key: how a transcript is matched to a hook
    payload that carries no call id (Gemini CLI's, Copilot CLI's)."""
    try:
        return json.dumps([tool, arguments], sort_keys=True, default=str)
    except (RecursionError, ValueError):  # hostile nesting: matches no call in a transcript
        return json.dumps([tool, None])


def words(text: str) -> int:
    return len(_WORD.findall(text))


def is_plan(text: str | None) -> bool:
    return bool(text) and words(text or "") >= PLAN_MIN_WORDS


def is_trivial_prompt(prompt: str | None) -> bool:
    """A prompt that continues the task before it rather than starting one."""
    return prompt is not None and words(prompt) <= TRIVIAL_PROMPT_WORDS


PLAN_FILE_MAX = 64 * 1024  # of a plan-mode plan file read


def plan_from_tool(tool: str, arguments: Any, response: Any = None) -> str | None:
    """The plan a planning tool states, or None for any other tool. Interactive Claude
    Code hands the hook ExitPlanMode's plan in the tool's response (or its file), not in
    its input."""
    if not isinstance(arguments, dict):
        return None
    name = tool.rsplit("__", 1)[-1].lower()
    if name in ("exitplanmode", "exit_plan_mode"):
        for source in (arguments, response if isinstance(response, dict) else {}):
            if isinstance(source.get("plan"), str) and source["plan"].strip():
                return str(source["plan"])
        path = response.get("filePath") if isinstance(response, dict) else None
        plan_file = arguments.get("plan_filename")  # Gemini CLI's, in its plans folder
        if isinstance(plan_file, str) and plan_file and os.environ.get("GEMINI_PLANS_DIR"):
            path = os.path.join(os.environ["GEMINI_PLANS_DIR"], os.path.basename(plan_file))
        return _read_plan_file(path) if isinstance(path, str) else None
    if name in ("todowrite", "write_todos", "update_plan", "todo_write"):
        items = arguments.get("todos") or arguments.get("plan") or []
        steps = [_step_text(item) for item in items if isinstance(item, dict | str)]
        text = "\n".join(f"- {s}" for s in steps if s)
        explanation = arguments.get("explanation")
        return f"{explanation}\n{text}" if isinstance(explanation, str) and explanation else text
    if name == "taskcreate":
        parts = [arguments.get("subject"), arguments.get("description")]
        return ". ".join(p for p in parts if isinstance(p, str) and p) or None
    return None


def _read_plan_file(path: str) -> str | None:
    try:
        with open_regular(path) as handle:  # never a FIFO: it would block the hook
            return handle.read(PLAN_FILE_MAX).decode("utf-8", errors="replace") or None
    except OSError:
        return None


def _step_text(item: dict[str, Any] | str) -> str:
    if isinstance(item, str):
        return item
    for key in ("content", "step", "description", "activeForm"):
        if isinstance(item.get(key), str):
            return str(item[key])
    return ""


@dataclass(frozen=True)
class TaskText:
    """The current task as a transcript's tail shows it."""

    prompt: str | None  # the user prompt that started it (None: not found in the tail)
    prompt_key: str | None  # a stable key of that prompt (its uuid or position)
    said: str  # the assistant's text just before the tool call (since the one before)
    tool_calls: int  # tool calls since the prompt, the current one included if seen
    seen: bool  # whether the tool call itself is in the file yet


def task_text(path: str | None, tool_use_id: str | None) -> TaskText:
    """The task in a Claude Code or Codex transcript: its prompt, and what the assistant
    said just before the tool call `tool_use_id` (after the last tool call in the file,
    when that one is not in it yet)."""
    events = list(_events(_tail_lines(path))) if path else []
    start = max((n for n, e in enumerate(events) if e.kind == "prompt"), default=-1)
    said: list[str] = []
    calls = 0
    seen = False
    for event in events[start + 1 :]:
        if event.kind == "text":
            if not said or said[-1] != event.text:  # Gemini writes a message again with its calls
                said.append(event.text)
        elif event.kind == "call":
            calls += 1
            if tool_use_id and event.key == tool_use_id:
                seen = True
                break
            said = []  # what came before another tool call is not this call's plan
    prompt = events[start] if start >= 0 else None
    return TaskText(
        prompt=prompt.text if prompt else None,
        prompt_key=prompt.key if prompt else None,
        said="\n".join(s for s in said if s.strip()),
        tool_calls=calls,
        seen=seen,
    )


@dataclass(frozen=True)
class _Event:
    kind: str  # "prompt", "text" (the assistant's), "call" (a tool call)
    text: str = ""
    key: str | None = None


def _tail_lines(path: str) -> Iterator[str]:
    """The complete lines of the last TAIL_BYTES of a file (none if it cannot be read)."""
    try:
        with open_regular(path) as handle:  # never a FIFO: it would block the hook
            size = os.fstat(handle.fileno()).st_size
            handle.seek(max(0, size - TAIL_BYTES))
            data = handle.read(TAIL_BYTES)
    except OSError:
        return
    lines = data.split(b"\n")
    if size > TAIL_BYTES:
        lines = lines[1:]  # the first one is cut
    for line in lines:
        if line.strip():
            yield line.decode("utf-8", errors="replace")


def _events(lines: Iterable[str]) -> Iterator[_Event]:
    for number, line in enumerate(lines):
        try:
            entry = json_loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            yield from _claude_events(entry, number)
            yield from _codex_events(entry, number)
            yield from _gemini_events(entry, number)
            yield from _copilot_events(entry, number)


def _claude_events(entry: dict[str, Any], number: int) -> Iterator[_Event]:
    """A Claude Code transcript line: {"type": "user"|"assistant", "message": {...}}."""
    kind, message = entry.get("type"), entry.get("message")
    if kind not in ("user", "assistant") or not isinstance(message, dict):
        return
    if entry.get("isSidechain") or entry.get("isMeta"):
        return
    content = message.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    if not isinstance(blocks, list):
        return
    if kind == "user":
        texts = [
            b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text"
        ]
        prompt = "\n".join(t for t in texts if isinstance(t, str) and not _INJECTED.match(t))
        if prompt.strip():
            yield _Event("prompt", prompt, str(entry.get("uuid") or number))
        return
    for block in blocks:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            yield _Event("text", block["text"])
        elif block.get("type") == "tool_use":
            yield _Event("call", key=str(block.get("id")))


def _codex_events(entry: dict[str, Any], number: int) -> Iterator[_Event]:
    """A Codex rollout line: {"type": "response_item", "payload": {...}}."""
    payload = entry.get("payload")
    if entry.get("type") != "response_item" or not isinstance(payload, dict):
        return
    kind = payload.get("type")
    if kind in ("function_call", "custom_tool_call", "local_shell_call"):
        yield _Event("call", key=str(payload.get("call_id")))
        return
    if kind != "message" or not isinstance(payload.get("content"), list):
        return
    texts = [
        b["text"]
        for b in payload["content"]
        if isinstance(b, dict) and isinstance(b.get("text"), str)
    ]
    text = "\n".join(texts)
    if payload.get("role") == "user" and text.strip() and not _INJECTED.match(text):
        yield _Event("prompt", text, str(number))
    elif payload.get("role") == "assistant" and text.strip():
        yield _Event("text", text)


def _gemini_events(entry: dict[str, Any], number: int) -> Iterator[_Event]:
    """A Gemini CLI chat line: {"type": "user"|"gemini", "content": ..., "toolCalls": [...]}."""
    kind, content = entry.get("type"), entry.get("content")
    if kind not in ("user", "gemini") or "message" in entry:
        return  # ("message" is Claude Code's)
    parts = [{"text": content}] if isinstance(content, str) else content
    texts = [
        p["text"] for p in parts or [] if isinstance(p, dict) and isinstance(p.get("text"), str)
    ]
    text = "\n".join(texts)
    if kind == "user":
        prompt = _HOOK_CONTEXT.sub("", text)
        if prompt.strip() and not _INJECTED.match(prompt):
            yield _Event("prompt", prompt, str(entry.get("id") or number))
        return
    if text.strip():
        yield _Event("text", text)
    for call in entry.get("toolCalls") or []:
        if isinstance(call, dict) and isinstance(call.get("name"), str):
            yield _Event("call", key=signature(call["name"], call.get("args")))


def _copilot_events(entry: dict[str, Any], number: int) -> Iterator[_Event]:
    """A Copilot CLI events.jsonl line: {"type": "user.message"|"assistant.message", "data"}."""
    kind, data = entry.get("type"), entry.get("data")
    if kind not in ("user.message", "assistant.message") or not isinstance(data, dict):
        return
    content = data.get("content")
    text = content if isinstance(content, str) else ""
    if kind == "user.message":
        if text.strip():
            yield _Event("prompt", text, str(data.get("messageId") or number))
        return
    if text.strip():
        yield _Event("text", text)
    for call in data.get("toolRequests") or []:
        if isinstance(call, dict) and isinstance(call.get("name"), str):
            yield _Event("call", key=signature(call["name"], call.get("arguments")))
