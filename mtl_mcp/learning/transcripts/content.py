"""Turning provider-specific message content and tool inputs into plain event text."""

from __future__ import annotations

import json
import shlex
from typing import Any

# Keys whose value says what a tool call did, most telling first.
_COMMAND_KEYS = ("command", "cmd", "code", "script")
_PATH_KEYS = ("file_path", "path", "notebook_path", "filename", "file")
_OTHER_KEYS = ("pattern", "query", "url", "prompt", "description", "message", "subject")
# str_replace_editor-style tools name their operation in "command".
_EDITOR_COMMANDS = frozenset({"view", "create", "str_replace", "insert", "undo_edit", "write"})
_DUMP_MAX = 600


def flatten(content: object) -> str:
    """The text of a string or of a list of content blocks (text parts joined by newlines)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict):
                text = block.get("text", block.get("content"))
                if isinstance(text, (str, list)):
                    parts.append(flatten(text))
                elif block.get("type") in ("image", "input_image", "image_url"):
                    parts.append("[image]")
        return "\n".join(p for p in parts if p)
    if isinstance(content, dict):
        return flatten([content])
    return ""


def _command_text(value: object) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        # ["bash", "-lc", "pytest -q"] is the shell command "pytest -q".
        if len(value) == 3 and value[1] in ("-c", "-lc") and value[0].endswith("sh"):
            return str(value[2])
        return shlex.join(value)
    return None


def parse_arguments(arguments: object) -> object:
    """Function-call arguments as a JSON value when they are a JSON string, else unchanged."""
    if isinstance(arguments, str):
        try:
            parsed: object = json.loads(arguments)
        except (ValueError, RecursionError):  # RecursionError: hostile nesting depth
            return arguments
        return parsed
    return arguments


def describe_call(arguments: object) -> str:
    """A short description of a tool call's input: its command, else its path, else JSON."""
    args = parse_arguments(arguments)
    if isinstance(args, str):
        return args
    if not isinstance(args, dict):
        return _dump(args)
    path = next((args[k] for k in _PATH_KEYS if isinstance(args.get(k), str)), None)
    operation = args.get("command")
    if isinstance(operation, str) and operation in _EDITOR_COMMANDS and path:
        return f"{operation} {path}"
    for key in _COMMAND_KEYS:
        command = _command_text(args.get(key))
        if command:
            return command
    if path:
        return str(path)
    for key in _OTHER_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value:
            return value
    return _dump(args)


def _dump(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    except (ValueError, RecursionError):  # too deep (or circular): stay total
        text = f"<{type(value).__name__} nested too deeply to show>"
    return text[:_DUMP_MAX]
