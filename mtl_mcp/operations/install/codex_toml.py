"""Edits to Codex's `config.toml`, as text: our tables are cut out, our blocks are appended,
the rest stays byte for byte. Our tables are `[mcp_servers.mtl-mcp]` (and its `.env`) and,
when asked, the `[hooks.state."<key>"]` tables that record Codex's trust in our hooks. The
result must parse to exactly the old settings plus (or minus) ours, otherwise nothing is
written.
"""

from __future__ import annotations

import copy
import json
import re
import tomllib
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

from mtl_mcp.errors import ConfigError
from mtl_mcp.operations.install.files import read_text
from mtl_mcp.operations.install.targets import SERVER_NAME, FileChange, JsonDoc, Launch

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _toml_str(value: str) -> str:
    # a JSON string is a valid TOML basic string, except that TOML also forbids a raw DEL
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else _toml_str(key)


def _codex_server(launch: Launch) -> JsonDoc:
    server: JsonDoc = {"command": launch.command, "args": launch.server_args()}
    server |= {"startup_timeout_sec": 30}
    if launch.env:
        server["env"] = dict(launch.env)
    return server


def _codex_block(launch: Launch, nl: str) -> str:
    args = ", ".join(_toml_str(a) for a in launch.server_args())
    lines = [
        f"[mcp_servers.{SERVER_NAME}]",
        f"command = {_toml_str(launch.command)}",
        f"args = [{args}]",
        "startup_timeout_sec = 30",
    ]
    if launch.env:
        lines.append(f"[mcp_servers.{SERVER_NAME}.env]")
        lines += [f"{_toml_key(k)} = {_toml_str(v)}" for k, v in launch.env.items()]
    return nl.join(lines) + nl


def _header_keys(line: str) -> list[str] | None:
    """The dotted key of a `[table]` / `[[array]]` header line, or None for any other line."""
    if not line.lstrip(" \t").startswith("["):
        return None
    try:
        node: Any = tomllib.loads(line.strip())
    except tomllib.TOMLDecodeError:
        return None
    keys: list[str] = []
    while True:
        if isinstance(node, list) and node:
            node = node[-1]
        if not (isinstance(node, dict) and len(node) == 1):
            return keys or None
        key, node = next(iter(node.items()))
        keys.append(key)


def _strip_codex(
    text: str, ours: Callable[[list[str] | None], bool], *, drop_blank_before: bool
) -> str:
    """`text` without the tables `ours` names (our `[mcp_servers.mtl-mcp]` and its
    subtables, the `[hooks.state."<key>"]` tables of our hooks).

    A table runs to the next header, minus the blank and comment lines that lead into that
    header (they belong to the next table) unless it is one of ours too.
    """
    lines = text.splitlines(keepends=True)
    keys = [_header_keys(line) for line in lines]
    drop = [False] * len(lines)
    for start, k in enumerate(keys):
        if not ours(k):
            continue
        end = next((j for j in range(start + 1, len(lines)) if keys[j] is not None), len(lines))
        if end == len(lines) or not ours(keys[end]):
            while end > start + 1 and lines[end - 1].strip()[:1] in ("", "#"):
                end -= 1
        drop[start:end] = [True] * (end - start)
        if drop_blank_before and start and not drop[start - 1] and not lines[start - 1].strip():
            drop[start - 1] = True
    return "".join(line for line, dropped in zip(lines, drop, strict=True) if not dropped)


def _state_block(key: str, state: JsonDoc, nl: str) -> str:
    lines = [f"[hooks.state.{_toml_str(key)}]"]
    for name, value in state.items():
        if isinstance(value, bool):
            lines.append(f"{_toml_key(name)} = {'true' if value else 'false'}")
        elif isinstance(value, str):
            lines.append(f"{_toml_key(name)} = {_toml_str(value)}")
        else:
            raise ConfigError(f"hooks.state.{key!r}.{name} is neither text nor true/false")
    return nl.join(lines) + nl


def _states(doc: JsonDoc, path: Path) -> JsonDoc:
    """doc["hooks"]["state"], created empty if missing."""
    hooks = doc.setdefault("hooks", {})
    states = hooks.setdefault("state", {}) if isinstance(hooks, dict) else None
    if not isinstance(states, dict):
        raise ConfigError(f"hooks.state in {path} is not a table; fix it and retry")
    return states


def codex_change(
    path: Path,
    launch: Launch | None,
    *,
    server: bool = True,
    trust: Mapping[str, str] | None = None,
    untrust: Collection[str] = (),
) -> FileChange | None:
    """The edit of a Codex config.toml: our server set (`launch`) or removed (None) unless
    `server` is False; Codex's trust recorded for the hook keys in `trust` (key -> hash,
    keeping an `enabled` the user set) and removed for those in `untrust`."""
    before = read_text(path)
    text = before or ""
    try:
        old = tomllib.loads(text.removeprefix("\ufeff"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"{path} is not valid TOML ({exc}); fix it and run the command again. "
            "It was not changed."
        ) from exc
    expected = copy.deepcopy(old)
    trust = dict(trust or {})
    touched = set(trust) | set(untrust)
    blocks: list[str] = []
    nl = "\r\n" if "\r\n" in text else "\n"
    if server:
        servers = expected.get("mcp_servers")
        if launch is None:
            if isinstance(servers, dict):
                servers.pop(SERVER_NAME, None)
        else:
            if isinstance(servers, dict):
                servers[SERVER_NAME] = _codex_server(launch)
            else:  # missing; or not a table, which the check below refuses
                expected["mcp_servers"] = {SERVER_NAME: _codex_server(launch)}
            blocks.append(_codex_block(launch, nl))
    if touched:
        states = _states(expected, path)
        for key in untrust:
            states.pop(key, None)
        for key, digest in trust.items():
            state = states.get(key)
            states[key] = {**(state if isinstance(state, dict) else {}), "trusted_hash": digest}
            blocks.append(_state_block(key, states[key], nl))
    if _normalized(expected) == _normalized(old):
        return None  # nothing changes, whatever the layout

    def ours(k: list[str] | None) -> bool:
        if k is None:
            return False
        if server and k[:2] == ["mcp_servers", SERVER_NAME]:
            return True
        return len(k) == 3 and k[:2] == ["hooks", "state"] and k[2] in touched

    after = _strip_codex(text, ours, drop_blank_before=not blocks)
    if text[:1] not in ("\r", "\n"):
        after = after.lstrip("\r\n")  # a first table cut out leaves no blank line on top
    if blocks:
        if after and not after.endswith("\n"):
            after += nl
        if after and not after.endswith(nl * 2):
            after += nl
        after += nl.join(blocks)
    try:
        got: JsonDoc | None = tomllib.loads(after.removeprefix("\ufeff"))
    except tomllib.TOMLDecodeError:
        got = None
    if got is None or _normalized(got) != _normalized(expected):
        what = f"mcp_servers.{SERVER_NAME}" if server else "hooks.state"
        raise ConfigError(
            f"cannot safely edit {path}: {what} is written in a form this installer does not "
            "rewrite (an inline table or dotted keys?), or is not a table. Edit that entry by "
            "hand, then run the command again. It was not changed."
        )
    if after == text:
        return None
    return FileChange(path, before, after if after.strip() else None)


def _normalized(doc: JsonDoc) -> JsonDoc:
    """`doc` without the empty containers our edits may leave (or not leave) behind."""
    doc = copy.deepcopy(doc)
    hooks = doc.get("hooks")
    if isinstance(hooks, dict) and hooks.get("state") == {}:
        del hooks["state"]
    for key in ("mcp_servers", "hooks"):
        if doc.get(key) == {}:
            del doc[key]
    return doc
