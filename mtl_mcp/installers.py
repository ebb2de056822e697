"""Register mtl-mcp's MCP server and session hooks in each client's config files.

`plan_install` / `plan_uninstall` only read files and return a `Plan` of `FileChange`s
(before/after text, with a unified diff for dry runs); `apply` writes it. Rules:

* Only our own entries are touched: the `mtl-mcp` key under `mcpServers` (JSON clients),
  the `[mcp_servers.mtl-mcp]` tables (Codex), and hook handlers whose command runs an
  `mtl-mcp` executable (or `-m mtl_mcp`) with `hook session-end` / `hook session-start`.
  Every other key keeps its value and order. JSON is rewritten with indent=2 and a trailing
  newline, and only when something changed semantically (a no-op keeps the file's bytes).
* Codex's TOML is edited as text: our tables are cut out, our block is appended, the rest
  stays byte for byte. The result must parse to exactly the old settings plus our server,
  otherwise nothing is written.
* A file we cannot parse (JSON or TOML) is never overwritten: `ConfigError` names it.
* Installing is idempotent. `hooks=False` leaves any existing hooks as they are.
* Uninstall removes only our entries and the containers that became empty because of
  that. A file left with nothing in it (`{}`, `{"version": 1}` for Cursor hooks, blank
  TOML) is deleted rather than kept as an empty stub; `apply` backs it up first.
* Hook commands are `shlex.join`ed absolute argv; a non-empty `Launch.env` is passed
  through `env K=V ...`, since hooks don't get the MCP server's `env` block.
* `apply` backs up each existing file to `<file>.mtl-mcp-backup-YYYYmmddHHMMSS`, refuses a
  file that changed since it was planned, writes through symlinks atomically (temp file +
  `os.replace`), keeps the file's permission bits, and creates missing parent directories.
"""

from __future__ import annotations

import copy
import difflib
import json
import os
import re
import secrets
import shlex
import stat
import sys
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path, PureWindowsPath
from typing import Any, Literal, get_args

from mtl_mcp.errors import ConfigError, InputError

Client = Literal["claude-code", "cursor", "codex", "claude-desktop"]
InstallScope = Literal["user", "project"]
CLIENTS: tuple[Client, ...] = get_args(Client)
SCOPES: tuple[InstallScope, ...] = get_args(InstallScope)
SERVER_NAME = "mtl-mcp"
CLAUDE_START_MATCHER = "startup|resume|clear|compact"
DISTILL_HINT = "`mtl-mcp distill --since 7d`"

JsonDoc = dict[str, Any]


@dataclass(frozen=True)
class Launch:
    """How a client should start mtl-mcp: `command *args_prefix serve`, with `env` set."""

    command: str
    args_prefix: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.command:
            raise InputError("the launch command is empty: pass the path of the mtl-mcp executable")
        for key in self.env:
            if not key or "=" in key or "\0" in key:
                raise InputError(
                    f"environment variable name {key!r} is invalid: use e.g. MTL_MCP_HOME"
                )

    def server_args(self) -> list[str]:
        return [*self.args_prefix, "serve"]

    def hook_command(self, event: str) -> str:
        """Shell-quoted command line for `mtl-mcp hook <event>`."""
        argv = [self.command, *self.args_prefix, "hook", event]
        if self.env:
            argv = ["env", *(f"{k}={v}" for k, v in self.env.items()), *argv]
        return shlex.join(argv)


def detect_launch(env: Mapping[str, str] | None = None) -> Launch:
    """The `mtl-mcp` script next to the running interpreter, else `<python> -m mtl_mcp`."""
    bindir = Path(sys.executable).parent
    for name in ("mtl-mcp", "mtl-mcp.exe"):
        if (bindir / name).is_file():
            return Launch(str((bindir / name).absolute()), env=dict(env or {}))
    return Launch(str(Path(sys.executable).absolute()), ("-m", "mtl_mcp"), dict(env or {}))


@dataclass(frozen=True)
class FileChange:
    path: Path
    before: str | None  # None: the file does not exist
    after: str | None  # None: the file is removed

    def diff(self) -> str:
        """Unified diff labelled with the path (/dev/null for a missing side)."""
        old = (self.before or "").splitlines(keepends=True)
        new = (self.after or "").splitlines(keepends=True)
        lines = difflib.unified_diff(
            old,
            new,
            fromfile=str(self.path) if self.before is not None else "/dev/null",
            tofile=str(self.path) if self.after is not None else "/dev/null",
        )
        return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


@dataclass(frozen=True)
class Plan:
    client: Client
    scope: InstallScope
    changes: list[FileChange]  # only files whose content changes
    notes: list[str]  # what the user should do next, e.g. restart the client


@dataclass(frozen=True)
class ConfigPaths:
    mcp: Path  # where the MCP server is registered
    hooks: Path | None  # where session hooks go; None when the client has none


def config_paths(
    client: Client,
    scope: InstallScope,
    *,
    user_home: Path,
    project_dir: Path,
    platform: str = sys.platform,
) -> ConfigPaths:
    """The files `client` reads for `scope`."""
    if client not in CLIENTS:
        raise InputError(f"unknown client {client!r}: choose one of {', '.join(CLIENTS)}")
    if scope not in SCOPES:
        raise InputError(f"unknown scope {scope!r}: choose 'user' or 'project'")
    user = scope == "user"
    if client == "claude-code":
        mcp = user_home / ".claude.json" if user else project_dir / ".mcp.json"
        return ConfigPaths(mcp, (user_home if user else project_dir) / ".claude" / "settings.json")
    if client == "cursor":
        base = (user_home if user else project_dir) / ".cursor"
        return ConfigPaths(base / "mcp.json", base / "hooks.json")
    if client == "codex":
        return ConfigPaths((user_home if user else project_dir) / ".codex" / "config.toml", None)
    if not user:
        raise InputError(
            "Claude Desktop has no project-level configuration: install it with the 'user' scope"
        )
    if platform == "darwin":
        base = user_home / "Library" / "Application Support"
    elif platform.startswith("win"):
        appdata = os.environ.get("APPDATA")
        base = Path(appdata) if appdata else user_home / "AppData" / "Roaming"
    else:
        base = user_home / ".config"
    return ConfigPaths(base / "Claude" / "claude_desktop_config.json", None)


# ---------------------------------------------------------------- reading and JSON edits


def _read(path: Path) -> str | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(
            f"cannot read {path}: {exc.strerror}; check it is a readable file"
        ) from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not UTF-8 text; fix or move it, then retry") from exc


def _load_json(path: Path, text: str | None) -> JsonDoc:
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


def _json_change(path: Path, edit: Callable[[JsonDoc, Path], None]) -> FileChange | None:
    before = _read(path)
    doc = _load_json(path, before)
    new = copy.deepcopy(doc)
    edit(new, path)
    if new == doc:
        return None
    after = None if _is_empty(new) else json.dumps(new, indent=2, ensure_ascii=False) + "\n"
    return FileChange(path, before, after)


def _server_entry(client: Client, launch: Launch) -> JsonDoc:
    entry: JsonDoc = {"type": "stdio"} if client == "claude-code" else {}
    entry |= {"command": launch.command, "args": launch.server_args(), "env": dict(launch.env)}
    return entry


def _set_server(entry: JsonDoc) -> Callable[[JsonDoc, Path], None]:
    def edit(doc: JsonDoc, path: Path) -> None:
        _child(doc, "mcpServers", dict, path)[SERVER_NAME] = entry

    return edit


def _del_server(doc: JsonDoc, path: Path) -> None:
    servers = doc.get("mcpServers")
    if isinstance(servers, dict) and SERVER_NAME in servers:
        del servers[SERVER_NAME]
        if not servers:
            del doc["mcpServers"]


def _is_our_hook(command: object, event: str) -> bool:
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


# Claude Code: event -> (hook argument, matcher, timeout); Cursor: event -> hook argument
_CLAUDE_EVENTS = {
    "SessionEnd": ("session-end", None, 5),
    "SessionStart": ("session-start", CLAUDE_START_MATCHER, 10),
}
_CURSOR_EVENTS = {"sessionEnd": "session-end", "sessionStart": "session-start"}


def _strip_claude(groups: list[Any], arg: str) -> list[Any]:
    """Matcher groups without our handlers; groups we emptied are dropped."""
    kept_groups = []
    for group in groups:
        handlers = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(handlers, list):
            kept_groups.append(group)
            continue
        kept = [
            h for h in handlers if not (isinstance(h, dict) and _is_our_hook(h.get("command"), arg))
        ]
        if len(kept) == len(handlers):
            kept_groups.append(group)
        elif kept:
            kept_groups.append({**group, "hooks": kept})
    return kept_groups


def _strip_cursor(entries: list[Any], arg: str) -> list[Any]:
    return [e for e in entries if not (isinstance(e, dict) and _is_our_hook(e.get("command"), arg))]


def _add_hooks(client: Client, launch: Launch) -> Callable[[JsonDoc, Path], None]:
    def edit(doc: JsonDoc, path: Path) -> None:
        if client == "cursor":
            doc.setdefault("version", 1)
        hooks = _child(doc, "hooks", dict, path)
        if client == "claude-code":
            for event, (arg, matcher, timeout) in _CLAUDE_EVENTS.items():
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


def _put(items: list[Any], want: JsonDoc, without_ours: list[Any]) -> None:
    """Make `want` our only entry in `items`, appended last unless it already is in place."""
    if want in items:
        rest = list(items)
        rest.remove(want)
        if rest == without_ours:
            return
    items[:] = [*without_ours, want]


def _del_hooks(client: Client) -> Callable[[JsonDoc, Path], None]:
    def edit(doc: JsonDoc, path: Path) -> None:
        hooks = doc.get("hooks")
        if not isinstance(hooks, dict):
            return
        events = (
            _CURSOR_EVENTS
            if client == "cursor"
            else {e: a for e, (a, _, _) in _CLAUDE_EVENTS.items()}
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


# ---------------------------------------------------------------- Codex TOML, edited as text

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


def _codex_change(path: Path, launch: Launch | None) -> FileChange | None:
    before = _read(path)
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


# ---------------------------------------------------------------- plans


_RESTART = {
    "claude-code": "Start a new Claude Code session (or run /mcp) to load the change.",
    "cursor": "Restart Cursor (or reload the server under Settings → MCP) to load the change.",
    "codex": "Start a new Codex session to load the change.",
    "claude-desktop": "Quit and restart Claude Desktop to load the change.",
}


def plan_install(
    client: Client,
    scope: InstallScope,
    launch: Launch,
    *,
    user_home: Path,
    project_dir: Path,
    platform: str = sys.platform,
    hooks: bool = True,
) -> Plan:
    """What registering mtl-mcp (and, where the client has them, its session hooks) changes."""
    paths = config_paths(
        client, scope, user_home=user_home, project_dir=project_dir, platform=platform
    )
    notes = [_RESTART[client]]
    if client == "codex":
        changes = [_codex_change(paths.mcp, launch)]
        notes.append(
            f"Codex has no session hooks: distillation for Codex runs via {DISTILL_HINT} "
            "(backfill), not a hook."
        )
        if scope == "project":
            notes.append("Codex reads <project>/.codex/config.toml only for trusted projects.")
    else:
        changes = [_json_change(paths.mcp, _set_server(_server_entry(client, launch)))]
        if paths.hooks is not None and hooks:
            changes.append(_json_change(paths.hooks, _add_hooks(client, launch)))
        elif paths.hooks is not None:
            notes.append(f"Session hooks were not installed; run {DISTILL_HINT} to backfill.")
    if client == "claude-desktop":
        notes.append(
            "Claude Desktop has no session hooks: ask the assistant to call record_session, "
            "or run `mtl-mcp distill`."
        )
    if client == "claude-code":
        notes += _local_scope_note(user_home / ".claude.json", project_dir)
    if scope == "project" and client in ("claude-code", "cursor"):
        notes.append(
            "Project config files are often committed: they now hold this machine's paths."
        )
    return Plan(client, scope, [c for c in changes if c is not None], notes)


def _local_scope_note(claude_json: Path, project_dir: Path) -> list[str]:
    """Warn when a local-scope entry (projects[dir].mcpServers) would shadow ours."""
    try:
        projects = _load_json(claude_json, _read(claude_json)).get("projects")
    except ConfigError:
        return []
    entry = projects.get(str(project_dir)) if isinstance(projects, dict) else None
    servers = entry.get("mcpServers") if isinstance(entry, dict) else None
    if not (isinstance(servers, dict) and SERVER_NAME in servers):
        return []
    return [
        f"Claude Code has a local-scope {SERVER_NAME} server for {project_dir}, which takes "
        f"precedence; remove it with `claude mcp remove {SERVER_NAME} --scope local`."
    ]


def plan_uninstall(
    client: Client,
    scope: InstallScope,
    *,
    user_home: Path,
    project_dir: Path,
    platform: str = sys.platform,
) -> Plan:
    """What removing mtl-mcp's server entry and hooks from `client`'s config changes."""
    paths = config_paths(
        client, scope, user_home=user_home, project_dir=project_dir, platform=platform
    )
    if client == "codex":
        changes = [_codex_change(paths.mcp, None)]
    else:
        changes = [_json_change(paths.mcp, _del_server)]
        if paths.hooks is not None:
            changes.append(_json_change(paths.hooks, _del_hooks(client)))
    return Plan(client, scope, [c for c in changes if c is not None], [_RESTART[client]])


# ---------------------------------------------------------------- applying


def apply(plan: Plan) -> list[Path]:
    """Write `plan` to disk; return the backups made of the files that existed."""
    todo = [c for c in plan.changes if c.before != c.after]
    targets = [c.path.resolve() if c.path.is_symlink() else c.path for c in todo]
    for change, path in zip(todo, targets, strict=True):  # check every file before writing any
        if _read(path) != change.before:
            raise ConfigError(f"{path} changed since the plan was made; run the command again")
    backups: list[Path] = []
    stamp = datetime.now().strftime("%Y%m%d%H%M%S")
    for change, path in zip(todo, targets, strict=True):
        try:
            mode = None
            if change.before is not None:
                mode = stat.S_IMODE(path.stat().st_mode)
                backups.append(_backup(path, stamp))
            if change.after is None:
                path.unlink()
            else:
                _write_atomic(path, change.after, mode)
        except OSError as exc:
            raise ConfigError(f"cannot write {path}: {exc}; check its permissions") from exc
    return backups


def _backup(path: Path, stamp: str) -> Path:
    backup = path.with_name(f"{path.name}.mtl-mcp-backup-{stamp}")
    n = 0
    while backup.exists():
        n += 1
        backup = path.with_name(f"{path.name}.mtl-mcp-backup-{stamp}-{n}")
    _write_atomic(backup, path.read_bytes(), stat.S_IMODE(path.stat().st_mode))
    return backup


def _write_atomic(path: Path, content: str | bytes, mode: int | None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = content.encode("utf-8") if isinstance(content, str) else content
    tmp = path.with_name(f".{path.name}.mtl-mcp-tmp-{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # umask applies
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
