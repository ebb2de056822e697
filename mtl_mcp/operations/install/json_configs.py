"""Edits to the JSON config files of every client (Codex's config.toml aside).

Only our own entries are touched: the `mtl-mcp` key under the client's servers object
(`mcpServers`; VS Code's `servers`, opencode's `mcp`, Zed's `context_servers`), hook handlers
whose command runs an `mtl-mcp` executable (or `-m mtl_mcp`) with `hook session-end`,
`hook session-start` or `hook tool-use`, and the permission rules a record says install
added. Every other key
keeps its value and order.
"""

from __future__ import annotations

import copy
import glob
import json
import shlex
from collections.abc import Callable
from pathlib import Path, PureWindowsPath
from typing import Any

from mtl_mcp.errors import ConfigError
from mtl_mcp.operations.install import json_text
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


# Clients whose JSON config files may hold comments and trailing commas (JSONC).
COMMENTS_ALLOWED: frozenset[Client] = frozenset({"gemini-cli", "opencode", "vscode", "zed"})


def load_json(path: Path, text: str | None, *, comments: bool = False) -> JsonDoc:
    """The object in a JSON file (JSONC where `comments` says the client reads that)."""
    if text is None or not text.strip():
        return {}
    try:
        doc = json.loads(text.removeprefix("\ufeff"))
    except json.JSONDecodeError as exc:
        try:
            doc = json_text.parse(text.removeprefix("\ufeff")) if comments else None
        except (json_text.JsoncError, ValueError):
            doc = None
        if doc is None:
            raise ConfigError(
                f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}, column "
                f"{exc.colno}); fix it (or move it away) and run the command again. "
                "It was not changed."
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


def json_change(
    path: Path, edit: Callable[[JsonDoc, Path], None], *, comments: bool = False
) -> FileChange | None:
    """The change `edit` makes to the JSON file at `path`: the file's own text with only
    what differs edited (its layout and comments kept), a new file in indent=2, or None.

    An edit that takes our entries out leaves what the file held before install: the
    backup install made of it (`_before_install`) says which containers were there,
    empty ones included (VS Code's `"servers": {}`), and that the file existed at all."""
    before = read_text(path)
    doc = load_json(path, before, comments=comments)
    new = copy.deepcopy(doc)
    edit(new, path)
    if new == doc:
        return None
    prior = _before_install(path, new, comments)
    if prior is not None:
        new = _as_before(new, prior)
        _restore_containers(new, doc, prior)
    elif _is_empty(new):
        return FileChange(path, before, None)
    fresh = json.dumps(new, indent=2, ensure_ascii=False) + "\n"
    if before is None or not before.strip():
        return FileChange(path, before, fresh)
    return FileChange(path, before, _edited(path, before, doc, new, fresh))


BACKUPS_LOOKED_AT = 20


def _before_install(path: Path, new: JsonDoc, comments: bool) -> JsonDoc | None:
    """The newest backup of `path` that holds what `new` holds, up to empty containers: the
    file as it was before install put our entries in (None if there is none)."""

    def stamp(backup: Path) -> tuple[str, int]:
        _, _, rest = backup.name.rpartition(".mtl-mcp-backup-")
        when, _, n = rest.partition("-")
        return when, int(n) if n.isdigit() else 0

    pattern = glob.escape(path.name) + ".mtl-mcp-backup-*"
    backups = sorted(path.parent.glob(pattern), key=stamp, reverse=True)[:BACKUPS_LOOKED_AT]
    for backup in backups:
        try:
            doc = load_json(backup, read_text(backup), comments=comments)
        except ConfigError:
            continue
        if _without_empty(doc) == _without_empty(_as_before(new, doc)):
            return doc
    return None


def _as_before(new: JsonDoc, prior: JsonDoc) -> JsonDoc:
    """`new` without the `"version": 1` install gives a hooks file (Cursor's, Copilot
    CLI's) that had none before."""
    if "version" in prior or new.get("version") != 1:
        return new
    return {k: v for k, v in new.items() if k != "version"}


def _without_empty(value: Any) -> Any:
    """`value` without the empty objects and arrays in its objects, at any depth."""
    if not isinstance(value, dict):
        return value
    pruned = {k: _without_empty(v) for k, v in value.items()}
    return {k: v for k, v in pruned.items() if v not in ({}, [])}


def _restore_containers(new: JsonDoc, current: JsonDoc, prior: JsonDoc) -> None:
    """Put back in `new` the empty containers `prior` held (and the file still does)."""
    for key, value in prior.items():
        if not isinstance(value, dict | list) or key not in current:
            continue
        if key not in new and _without_empty(value) in ({}, []):
            new[key] = copy.deepcopy(value)
        elif all(isinstance(d.get(key), dict) for d in (new, current)) and isinstance(value, dict):
            _restore_containers(new[key], current[key], value)


def _edited(path: Path, before: str, doc: JsonDoc, new: JsonDoc, fresh: str) -> str:
    """`before` edited to hold `new`; checked to parse to exactly that. Should the edit go
    wrong, a file without comments is rewritten whole, and one with them left alone."""
    bom = "\ufeff" if before.startswith("\ufeff") else ""
    try:
        after = bom + json_text.edited_text(before.removeprefix(bom), doc, new)
        if json_text.parse(after.removeprefix(bom)) == new:
            return after
    except (json_text.JsoncError, ValueError):
        pass
    try:
        json.loads(before.removeprefix(bom))
    except ValueError:
        raise ConfigError(
            f"{path} has comments this edit could not keep; add the mtl-mcp entry by hand "
            "(see `mtl-mcp install --dry-run` on a copy without comments)"
        ) from None
    return fresh


# The key of the servers object, where a client does not use `mcpServers`.
_SERVERS_KEY: dict[str, str] = {"vscode": "servers", "opencode": "mcp", "zed": "context_servers"}


def servers_key(client: Client) -> str:
    return _SERVERS_KEY.get(client, "mcpServers")


def server_entry(client: Client, launch: Launch) -> JsonDoc:
    """Our server's entry, in the shape `client` reads."""
    env = dict(launch.env)
    if client == "opencode":  # one argv, and its own names for the rest
        command = [launch.command, *launch.server_args()]
        return {"type": "local", "command": command, "environment": env, "enabled": True}
    entry: JsonDoc = {"type": "stdio"} if client in ("claude-code", "vscode") else {}
    if client == "copilot-cli":
        entry = {"type": "local"}
    entry |= {"command": launch.command, "args": launch.server_args(), "env": env}
    if client == "copilot-cli":
        entry["tools"] = ["*"]  # Copilot CLI offers the model only the tools listed here
    return entry


def set_server(client: Client, entry: JsonDoc) -> Callable[[JsonDoc, Path], None]:
    def edit(doc: JsonDoc, path: Path) -> None:
        _child(doc, servers_key(client), dict, path)[SERVER_NAME] = entry

    return edit


def del_server(client: Client) -> Callable[[JsonDoc, Path], None]:
    key = servers_key(client)

    def edit(doc: JsonDoc, path: Path) -> None:
        servers = doc.get(key)
        if isinstance(servers, dict) and SERVER_NAME in servers:
            del servers[SERVER_NAME]
            if not servers:
                del doc[key]

    return edit


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


# Claude Code, Codex and Gemini CLI: event -> (hook argument, matcher, timeout); Cursor and
# Copilot CLI: event -> (hook argument, timeout). The tool-use hook (plan-triggered recall)
# keeps to its own budget (0.8 s by default); the client's timeout is only a backstop.
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
# Gemini CLI (0.61) reads the same shape from settings.json; its timeouts are milliseconds.
# AfterTool also fires for a failed tool call.
_GEMINI_EVENTS: dict[str, tuple[str, str | None, int]] = {
    "SessionEnd": ("session-end", None, 5000),
    "SessionStart": ("session-start", None, 10000),
    "AfterTool": ("tool-use", None, 5000),
}
_CURSOR_EVENTS = {
    "sessionEnd": ("session-end", 0),
    "sessionStart": ("session-start", 0),
    "postToolUse": ("tool-use", 0),
}
# Copilot CLI's own hook file (version 1, camelCase events: the payloads it documents).
_COPILOT_EVENTS = {
    "sessionEnd": ("session-end", 5),
    "sessionStart": ("session-start", 10),
    "postToolUse": ("tool-use", 5),
}
# The key of a flat hook entry that holds its command line.
_FLAT_COMMAND = {"cursor": "command", "copilot-cli": "bash"}


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


def _strip_flat(entries: list[Any], arg: str, key: str) -> list[Any]:
    return [e for e in entries if not (isinstance(e, dict) and is_our_hook(e.get(key), arg))]


def add_hooks(client: Client, launch: Launch) -> Callable[[JsonDoc, Path], None]:
    def edit(doc: JsonDoc, path: Path) -> None:
        if client in _FLAT_COMMAND:
            doc.setdefault("version", 1)
        hooks = _child(doc, "hooks", dict, path)
        if client in _FLAT_COMMAND:
            key = _FLAT_COMMAND[client]
            for event, (arg, timeout) in _flat_events(client).items():
                want: JsonDoc = {key: launch.hook_command(arg)}
                if client == "copilot-cli":
                    want = {"type": "command", **want, "timeoutSec": timeout}
                _put(_child(hooks, event, list, path), want, _strip_flat(hooks[event], arg, key))
            return
        for event, (arg, matcher, timeout) in _claude_style_events(client).items():
            handler: JsonDoc = {"name": f"mtl-mcp {arg}"} if client == "gemini-cli" else {}
            handler |= {"type": "command", "command": launch.hook_command(arg), "timeout": timeout}
            want = ({"matcher": matcher} if matcher else {}) | {"hooks": [handler]}
            _put(_child(hooks, event, list, path), want, _strip_claude(hooks[event], arg))

    return edit


def _claude_style_events(client: Client) -> dict[str, tuple[str, str | None, int]]:
    return {"codex": CODEX_EVENTS, "gemini-cli": _GEMINI_EVENTS}.get(client, _CLAUDE_EVENTS)


def _flat_events(client: Client) -> dict[str, tuple[str, int]]:
    return _COPILOT_EVENTS if client == "copilot-cli" else _CURSOR_EVENTS


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
        flat = client in _FLAT_COMMAND
        events = (
            {e: a for e, (a, _) in _flat_events(client).items()}
            if flat
            else {e: a for e, (a, _, _) in _claude_style_events(client).items()}
        )
        for event, arg in events.items():
            items = hooks.get(event)
            if not isinstance(items, list):
                continue
            kept = (
                _strip_flat(items, arg, _FLAT_COMMAND[client])
                if flat
                else _strip_claude(items, arg)
            )
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
