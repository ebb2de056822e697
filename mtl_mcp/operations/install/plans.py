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

import stat
import sys
from datetime import datetime
from pathlib import Path

from mtl_mcp.errors import ConfigError
from mtl_mcp.operations.install.codex_toml import codex_change
from mtl_mcp.operations.install.files import backup_copy, read_text, write_atomic
from mtl_mcp.operations.install.json_configs import (
    add_hooks,
    del_hooks,
    del_server,
    json_change,
    load_json,
    server_entry,
    set_server,
)
from mtl_mcp.operations.install.targets import (
    DISTILL_HINT,
    SERVER_NAME,
    Client,
    InstallScope,
    Launch,
    Plan,
    config_paths,
)

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
        changes = [codex_change(paths.mcp, launch)]
        notes.append(
            f"Codex has no session hooks: distillation for Codex runs via {DISTILL_HINT} "
            "(backfill), not a hook."
        )
        if scope == "project":
            notes.append("Codex reads <project>/.codex/config.toml only for trusted projects.")
    else:
        changes = [json_change(paths.mcp, set_server(server_entry(client, launch)))]
        if paths.hooks is not None and hooks:
            changes.append(json_change(paths.hooks, add_hooks(client, launch)))
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
        projects = load_json(claude_json, read_text(claude_json)).get("projects")
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
        changes = [codex_change(paths.mcp, None)]
    else:
        changes = [json_change(paths.mcp, del_server)]
        if paths.hooks is not None:
            changes.append(json_change(paths.hooks, del_hooks(client)))
    return Plan(client, scope, [c for c in changes if c is not None], [_RESTART[client]])


def apply(plan: Plan) -> list[Path]:
    """Write `plan` to disk; return the backups made of the files that existed."""
    todo = [c for c in plan.changes if c.before != c.after]
    targets = [c.path.resolve() if c.path.is_symlink() else c.path for c in todo]
    for change, path in zip(todo, targets, strict=True):  # check every file before writing any
        if read_text(path) != change.before:
            raise ConfigError(f"{path} changed since the plan was made; run the command again")
    backups: list[Path] = []
    stamp = datetime.now().strftime("%Y%m%d%H%M%S")
    for change, path in zip(todo, targets, strict=True):
        try:
            mode = None
            if change.before is not None:
                mode = stat.S_IMODE(path.stat().st_mode)
                backups.append(backup_copy(path, stamp))
            if change.after is None:
                path.unlink()
            else:
                write_atomic(path, change.after, mode)
        except OSError as exc:
            raise ConfigError(f"cannot write {path}: {exc}; check its permissions") from exc
    return backups
