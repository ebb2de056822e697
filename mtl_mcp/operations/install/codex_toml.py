"""Edits to Codex's `config.toml`, as text: our tables are cut out, our block is appended,
the rest stays byte for byte. The result must parse to exactly the old settings plus our
server, otherwise nothing is written.
"""

from __future__ import annotations

import json
import re
import tomllib
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


def _strip_codex(text: str, *, drop_blank_before: bool) -> str:
    """`text` without our `[mcp_servers.mtl-mcp]` and `[mcp_servers.mtl-mcp.*]` tables.

    A table runs to the next header, minus the blank and comment lines that lead into that
    header (they belong to the next table) unless it is one of ours too.
    """
    lines = text.splitlines(keepends=True)
    keys = [_header_keys(line) for line in lines]

    def ours(k: list[str] | None) -> bool:
        return k is not None and k[:2] == ["mcp_servers", SERVER_NAME]

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


def codex_change(path: Path, launch: Launch | None) -> FileChange | None:
    before = read_text(path)
    text = before or ""
    try:
        expected = tomllib.loads(text.removeprefix("\ufeff"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"{path} is not valid TOML ({exc}); fix it and run the command again. "
            "It was not changed."
        ) from exc
    servers = expected.get("mcp_servers")
    if launch is None:
        if not (isinstance(servers, dict) and SERVER_NAME in servers):
            return None
        del servers[SERVER_NAME]
        after = _strip_codex(text, drop_blank_before=True)
    else:
        if isinstance(servers, dict):
            servers[SERVER_NAME] = _codex_server(launch)
        else:
            expected["mcp_servers"] = {SERVER_NAME: _codex_server(launch)}
        nl = "\r\n" if "\r\n" in text else "\n"
        after = _strip_codex(text, drop_blank_before=False)
        if after and not after.endswith("\n"):
            after += nl
        if after and not after.endswith(nl * 2):
            after += nl
        after += _codex_block(launch, nl)
    try:
        got: JsonDoc | None = tomllib.loads(after.removeprefix("\ufeff"))
    except tomllib.TOMLDecodeError:
        got = None
    if got is None or _drop_empty_servers(got) != _drop_empty_servers(expected):
        raise ConfigError(
            f"cannot safely edit {path}: mcp_servers.{SERVER_NAME} is written in a form this "
            "installer does not rewrite (an inline table or dotted keys?), or mcp_servers is not "
            "a table. Edit that entry by hand, then run the command again. It was not changed."
        )
    if after == text:
        return None
    return FileChange(path, before, after if after.strip() else None)


def _drop_empty_servers(doc: JsonDoc) -> JsonDoc:
    return {k: v for k, v in doc.items() if not (k == "mcp_servers" and v == {})}
