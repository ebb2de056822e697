"""Edits to the JSON config files of Claude Code, Cursor, Claude Desktop and Codex's hooks.json.

Only our own entries are touched: the `mtl-mcp` key under `mcpServers`, hook handlers
whose command runs an `mtl-mcp` executable (or `-m mtl_mcp`) with `hook session-end`,
`hook session-start` or `hook tool-use`, and the permission rules a record says install
added. Every other key
keeps its value and order.
"""

from __future__ import annotations

import copy
import json
import shlex
from collections.abc import Callable
from pathlib import Path, PureWindowsPath
from typing import Any

from mtl_mcp.errors import ConfigError
from mtl_mcp.operations.install.files import read_text
from mtl_mcp.operations.install.targets import SERVER_NAME, Client, FileChange, JsonDoc, Launch

CLAUDE_START_MATCHER = "startup|resume|clear|compact"
# Claude Code asks before every MCP tool call, and refuses it in `claude -p`, unless a rule
# allows it. Install allows the read-only tools; writing and deleting stay the user's call.
READ_ONLY_TOOLS = ("recall_insights", "list_memories")
ALLOW_RULES = tuple(f"mcp__{SERVER_NAME}__{tool}" for tool in READ_ONLY_TOOLS)
_RECORD_NOTE = (
    "Written by `mtl-mcp install claude-code`: the permissions.allow rules it added to "
    "settings.json beside this file, which `mtl-mcp uninstall claude-code` removes."
)


def load_json(path: Path, text: str | None) -> JsonDoc:
    if text is None or not text.strip():
        return {}
    try:
        doc = json.loads(text.removeprefix("\ufeff"))
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); "
            "fix it (or move it away) and run the command again. It was not changed."
        ) from exc
    if not isinstance(doc, dict):
        raise ConfigError(f"{path} must hold a JSON object at the top level; fix it and retry")
    return doc


def _child(parent: JsonDoc, key: str, kind: type, path: Path) -> Any:
    """parent[key], created empty if missing; ConfigError if it has the wrong type."""
    value = parent.setdefault(key, kind())
    if not isinstance(value, kind):
        expected = "an object" if kind is dict else "a list"
        raise ConfigError(f'"{key}" in {path} should be {expected}; fix it and retry')
    return value


def _is_empty(doc: JsonDoc) -> bool:
    return set(doc) <= {"version"}  # {"version": 1} alone is an empty Cursor hooks.json


def json_change(path: Path, edit: Callable[[JsonDoc, Path], None]) -> FileChange | None:
    before = read_text(path)
    doc = load_json(path, before)
    new = copy.deepcopy(doc)
    edit(new, path)
    if new == doc:
        return None
    after = None if _is_empty(new) else json.dumps(new, indent=2, ensure_ascii=False) + "\n"
    return FileChange(path, before, after)


def server_entry(client: Client, launch: Launch) -> JsonDoc:
    entry: JsonDoc = {"type": "stdio"} if client == "claude-code" else {}
    entry |= {"command": launch.command, "args": launch.server_args(), "env": dict(launch.env)}
    return entry


def set_server(entry: JsonDoc) -> Callable[[JsonDoc, Path], None]:
    def edit(doc: JsonDoc, path: Path) -> None:
        _child(doc, "mcpServers", dict, path)[SERVER_NAME] = entry

    return edit


def del_server(doc: JsonDoc, path: Path) -> None:
    servers = doc.get("mcpServers")
    if isinstance(servers, dict) and SERVER_NAME in servers:
        del servers[SERVER_NAME]
        if not servers:
            del doc["mcpServers"]


def is_our_hook(command: object, event: str) -> bool:
    """True for a command line that runs `mtl-mcp ... hook <event>`, however it was launched."""
    if not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    for i in range(len(words) - 1):
        if words[i : i + 2] == ["hook", event]:
            head = words[:i]
            names = {PureWindowsPath(word).name.lower() for word in head}
            return bool(names & {"mtl-mcp", "mtl-mcp.exe"}) or "mtl_mcp" in head
    return False


# Claude Code and Codex: event -> (hook argument, matcher, timeout); Cursor: event -> hook
# argument. The tool-use hook (plan-triggered recall) keeps to its own budget (0.8 s by
# default); the client's timeout is only a backstop.
_CLAUDE_EVENTS: dict[str, tuple[str, str | None, int]] = {
    "SessionEnd": ("session-end", None, 5),
    "SessionStart": ("session-start", CLAUDE_START_MATCHER, 10),
    "PostToolUse": ("tool-use", "*", 5),
    "PostToolUseFailure": ("tool-use", "*", 5),
}
# Codex (0.169+) reads the same shape from hooks.json. No matcher: every session source
# (startup, resume, clear, compact, fork) and every tool. It has no PostToolUseFailure, and
# clamps SessionEnd to 3 s (saying so on every run for a longer timeout).
CODEX_EVENTS: dict[str, tuple[str, str | None, int]] = {
    "SessionEnd": ("session-end", None, 3),
    "SessionStart": ("session-start", None, 10),
    "PostToolUse": ("tool-use", None, 5),
}
_CURSOR_EVENTS = {
    "sessionEnd": "session-end",
    "sessionStart": "session-start",
    "postToolUse": "tool-use",
}


def _strip_claude(groups: list[Any], arg: str) -> list[Any]:
    """Matcher groups without our handlers; groups we emptied are dropped."""
    kept_groups = []
    for group in groups:
        handlers = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(handlers, list):
            kept_groups.append(group)
            continue
        kept = [
            h for h in handlers if not (isinstance(h, dict) and is_our_hook(h.get("command"), arg))
        ]
        if len(kept) == len(handlers):
            kept_groups.append(group)
        elif kept:
            kept_groups.append({**group, "hooks": kept})
    return kept_groups


def _strip_cursor(entries: list[Any], arg: str) -> list[Any]:
    return [e for e in entries if not (isinstance(e, dict) and is_our_hook(e.get("command"), arg))]


def add_hooks(client: Client, launch: Launch) -> Callable[[JsonDoc, Path], None]:
    def edit(doc: JsonDoc, path: Path) -> None:
        if client == "cursor":
            doc.setdefault("version", 1)
        hooks = _child(doc, "hooks", dict, path)
        if client in ("claude-code", "codex"):
            for event, (arg, matcher, timeout) in _claude_style_events(client).items():
                handler = {
                    "type": "command",
                    "command": launch.hook_command(arg),
                    "timeout": timeout,
                }
                want = ({"matcher": matcher} if matcher else {}) | {"hooks": [handler]}
                _put(_child(hooks, event, list, path), want, _strip_claude(hooks[event], arg))
        else:
            for event, arg in _CURSOR_EVENTS.items():
                want = {"command": launch.hook_command(arg)}
                _put(_child(hooks, event, list, path), want, _strip_cursor(hooks[event], arg))

    return edit


def _claude_style_events(client: Client) -> dict[str, tuple[str, str | None, int]]:
    return CODEX_EVENTS if client == "codex" else _CLAUDE_EVENTS


def _put(items: list[Any], want: JsonDoc, without_ours: list[Any]) -> None:
    """Make `want` our only entry in `items`, appended last unless it already is in place."""
    if want in items:
        rest = list(items)
        rest.remove(want)
        if rest == without_ours:
            return
    items[:] = [*without_ours, want]


def del_hooks(client: Client) -> Callable[[JsonDoc, Path], None]:
    def edit(doc: JsonDoc, path: Path) -> None:
        hooks = doc.get("hooks")
        if not isinstance(hooks, dict):
            return
        events = (
            _CURSOR_EVENTS
            if client == "cursor"
            else {e: a for e, (a, _, _) in _claude_style_events(client).items()}
        )
        for event, arg in events.items():
            items = hooks.get(event)
            if not isinstance(items, list):
                continue
            kept = _strip_cursor(items, arg) if client == "cursor" else _strip_claude(items, arg)
            if kept != items:
                if kept:
                    hooks[event] = kept
                else:
                    del hooks[event]
                if not hooks:
                    del doc["hooks"]
                    return

    return edit


def _strings(doc: JsonDoc, *keys: str) -> list[str]:
    """The strings of the list at doc[keys[0]][keys[1]]..., or [] if there is none."""
    node: Any = doc
    for key in keys:
        node = node.get(key) if isinstance(node, dict) else None
    return [item for item in node if isinstance(item, str)] if isinstance(node, list) else []


def allowed_rules(settings: JsonDoc) -> list[str]:
    """The rules in a Claude Code settings file's permissions.allow."""
    return _strings(settings, "permissions", "allow")


def recorded_rules(record: JsonDoc) -> list[str]:
    """The allow rules a permissions record says install added."""
    return _strings(record, "allow")


def owned_rules(settings: JsonDoc, record: JsonDoc) -> list[str]:
    """The read-only rules install owns once it has run: the ones missing from the settings
    now and the ones it added before. A rule the user wrote stays theirs."""
    allowed, recorded = allowed_rules(settings), recorded_rules(record)
    return [rule for rule in ALLOW_RULES if rule not in allowed or rule in recorded]


def add_allow_rules(rules: list[str]) -> Callable[[JsonDoc, Path], None]:
    def edit(doc: JsonDoc, path: Path) -> None:
        allow = _child(_child(doc, "permissions", dict, path), "allow", list, path)
        allow += [rule for rule in rules if rule not in allow]

    return edit


def del_allow_rules(rules: list[str]) -> Callable[[JsonDoc, Path], None]:
    """Remove `rules` from permissions.allow, and the containers that leaves empty."""

    def edit(doc: JsonDoc, path: Path) -> None:
        permissions = doc.get("permissions")
        if not (isinstance(permissions, dict) and isinstance(permissions.get("allow"), list)):
            return
        kept = [rule for rule in permissions["allow"] if rule not in rules]
        if kept == permissions["allow"]:
            return
        if kept:
            permissions["allow"] = kept
            return
        del permissions["allow"]
        if not permissions:
            del doc["permissions"]

    return edit


def set_record(rules: list[str]) -> Callable[[JsonDoc, Path], None]:
    """The permissions record holding `rules`; with none, no record (the file goes)."""

    def edit(doc: JsonDoc, path: Path) -> None:
        doc.clear()
        if rules:
            doc |= {"note": _RECORD_NOTE, "allow": rules}

    return edit


def chain(*edits: Callable[[JsonDoc, Path], None]) -> Callable[[JsonDoc, Path], None]:
    """One edit of a file made of several."""

    def edit(doc: JsonDoc, path: Path) -> None:
        for step in edits:
            step(doc, path)

    return edit
