"""Register mtl-mcp's MCP server and session hooks in each client's config files.

`plan_install` / `plan_uninstall` only read files and return a `Plan` of `FileChange`s
(before/after text, with a unified diff for dry runs); `apply` writes it. Rules:

* Only our own entries are touched: the `mtl-mcp` key under `mcpServers` (JSON clients),
  the `[mcp_servers.mtl-mcp]` tables (Codex), hook handlers whose command runs an
  `mtl-mcp` executable (or `-m mtl_mcp`) with `hook session-end` / `session-start` /
  `tool-use`, Codex's trust in those (`[hooks.state."<key>"]`), and Claude Code permission
  rules for the read-only tools. Every other key keeps its value and order. A JSON file is
  edited as text (`json_text`): only the spans that change, in the file's own indentation,
  so its comments (where the client allows JSONC) and layout stay, and uninstall after
  install gives back the same bytes. A new file is written with indent=2; a no-op keeps
  the file's bytes.
* Files install writes whole (Gemini CLI's policy, opencode's plugin) carry a marker line
  (`owned_files`): install replaces only such a file, uninstall removes only such a file.
* Codex's TOML is edited as text: our tables are cut out, our block is appended, the rest
  stays byte for byte. The result must parse to exactly the old settings plus our server,
  otherwise nothing is written.
* Codex runs a hook only once the user trusted it (`codex_trust`). Install never records
  that trust unless asked (`trust_hooks`, the CLI's `--trust-hooks`): trusting is the
  review Codex asks of the user for every command a hook runs, and `install` may well be
  run by an assistant on the user's behalf. Asked, it records it, in the user's
  config.toml, for exactly the handlers it wrote; otherwise a note says how to (`/hooks`).
  Uninstall removes the trust recorded for the handlers it removes, whoever recorded it.
* A permission rule is a bare string, so nothing in it says who wrote it: install records
  the rules it added in `.claude/mtl-mcp-install.json` beside the settings file, and
  uninstall removes exactly those. A rule the user had before install is never recorded,
  so it stays; without a record (removed by hand) uninstall removes no rule and says so.
* A file we cannot parse (JSON or TOML) is never overwritten: `ConfigError` names it.
* Installing is idempotent. `hooks=False` leaves any existing hooks as they are.
* Uninstall removes only our entries and the containers that became empty because of
  that, unless the backup install made of the file shows they were there before (VS
  Code's `"servers": {}`): those stay, as does a file that existed before install. A file
  install created, left with nothing in it (`{}`, `{"version": 1}` for Cursor hooks,
  blank TOML), is deleted rather than kept as an empty stub; `apply` backs it up first.
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

from mtl_mcp.errors import ConfigError, InputError
from mtl_mcp.operations.install.codex_toml import codex_change
from mtl_mcp.operations.install.codex_trust import hook_states, our_hooks, trust_status
from mtl_mcp.operations.install.files import backup_copy, read_text, write_atomic
from mtl_mcp.operations.install.json_configs import (
    ALLOW_RULES,
    COMMENTS_ALLOWED,
    add_allow_rules,
    add_hooks,
    allowed_rules,
    chain,
    del_allow_rules,
    del_hooks,
    del_server,
    json_change,
    load_json,
    owned_rules,
    recorded_rules,
    server_entry,
    set_record,
    set_server,
)
from mtl_mcp.operations.install.owned_files import (
    gemini_policy,
    opencode_plugin,
    owned_change,
    owned_removal,
)
from mtl_mcp.operations.install.targets import (
    DISTILL_HINT,
    SERVER_NAME,
    Client,
    ConfigPaths,
    FileChange,
    InstallScope,
    Launch,
    Plan,
    config_paths,
    gemini_user_home,
)

_RESTART = {
    "claude-code": "Start a new Claude Code session (or run /mcp) to load the change.",
    "cursor": "Restart Cursor (or reload the server under Settings → MCP) to load the change.",
    "codex": "Start a new Codex session to load the change.",
    "claude-desktop": "Quit and restart Claude Desktop to load the change.",
    "gemini-cli": "Start a new Gemini CLI session to load the change (check: gemini mcp list).",
    "opencode": "Start a new opencode session to load the change (check: opencode mcp list).",
    "copilot-cli": "Start a new Copilot CLI session to load the change (check: copilot mcp list).",
    "vscode": "In VS Code, run 'MCP: List Servers' and start mtl-mcp (or reload the window).",
    "windsurf": "In Windsurf, refresh the MCP servers (Cascade → MCP servers) to load the change.",
    "zed": "Zed reloads its settings by itself: mtl-mcp shows in the Agent Panel's settings.",
}
# What a client without usable session hooks gets instead; how to capture its sessions.
_NO_HOOKS = {
    "claude-desktop": "Claude Desktop has no session hooks",
    "vscode": "VS Code's agent hooks are a preview this install does not write",
    "windsurf": "Windsurf's Cascade hooks cannot add context, and its transcripts are not read",
    "zed": "Zed's agent has no hooks",
}
_FALLBACK = (
    "{what}: no session-start context, no recall on the plan and no capture at session end. "
    "The tools work: ask the assistant to call recall_insights with its plan, and "
    "record_session at the end of a session worth keeping."
)


def plan_install(
    client: Client,
    scope: InstallScope,
    launch: Launch,
    *,
    user_home: Path,
    project_dir: Path,
    platform: str = sys.platform,
    hooks: bool = True,
    trust_hooks: bool = False,
) -> Plan:
    """What registering mtl-mcp (and, where the client has them, its session hooks) changes.
    `trust_hooks` (Codex only) also records Codex's trust in the hooks it writes."""
    paths = config_paths(
        client, scope, user_home=user_home, project_dir=project_dir, platform=platform
    )
    if trust_hooks and client != "codex":
        raise InputError("--trust-hooks is for codex: the other clients run hooks untrusted")
    notes = [_RESTART[client]]
    if client == "codex":
        changes = _codex_install(paths, launch, hooks, trust_hooks, notes)
        if scope == "project":
            notes.append(
                "Codex reads <project>/.codex/config.toml and hooks.json only for trusted projects."
            )
    elif client == "claude-code":
        changes = [json_change(paths.mcp, set_server(client, server_entry(client, launch)))]
        changes += _claude_settings(paths, launch if hooks else None)
        notes.append(_PERMISSIONS_NOTE)
    else:
        server = set_server(client, server_entry(client, launch))
        jsonc = client in COMMENTS_ALLOWED
        if paths.hooks == paths.mcp and hooks:  # Gemini CLI: one settings.json
            edit = chain(server, add_hooks(client, launch))
            changes = [json_change(paths.mcp, edit, comments=jsonc)]
        else:
            changes = [json_change(paths.mcp, server, comments=jsonc)]
            if paths.hooks is not None and hooks:
                changes.append(json_change(paths.hooks, add_hooks(client, launch)))
        if paths.plugin is not None and hooks:
            changes.append(owned_change(paths.plugin, opencode_plugin(launch)))
        if paths.policy is not None:
            changes.append(owned_change(paths.policy, gemini_policy()))
        notes += _client_notes(client, scope, paths, hooks, project_dir, user_home)
    if (paths.hooks is not None or paths.plugin is not None) and not hooks:
        notes.append(f"Session hooks were not installed; run {DISTILL_HINT} to backfill.")
    if client in _NO_HOOKS:
        notes.append(_FALLBACK.format(what=_NO_HOOKS[client]))
    if client == "claude-code":
        notes += _local_scope_note(user_home / ".claude.json", project_dir)
    if scope == "project" and client in ("claude-code", "cursor", "vscode", "zed", "opencode"):
        notes.append(
            "Project config files are often committed: they now hold this machine's paths."
        )
    return Plan(client, scope, [c for c in changes if c is not None], notes)


def _client_notes(
    client: Client,
    scope: InstallScope,
    paths: ConfigPaths,
    hooks: bool,
    project_dir: Path,
    user_home: Path,
) -> list[str]:
    """What the user of a newer client should know: trust, permissions, capture."""
    if client == "gemini-cli":
        notes = [gemini_trust_note(user_home, project_dir, scope)]
        if paths.policy is not None:
            notes.append(
                f"Gemini CLI may now call recall_insights and list_memories without asking "
                f"({paths.policy}); the tools that change your memory still ask."
            )
        else:
            notes.append(
                "Gemini CLI reads no project policies: rerun with --scope user to let the "
                "read-only tools run without asking."
            )
        return notes
    if client == "opencode":
        plugin_root = paths.plugin.parent.parent if paths.plugin else None
        notes = [
            "opencode runs MCP tools without asking unless your `permission` settings say "
            "otherwise: install adds no rule."
        ]
        if hooks:
            notes.append(
                f"The session hooks are the plugin {paths.plugin}. On its next start opencode "
                f"installs its plugin SDK (package.json, node_modules) in {plugin_root} from "
                "npm, once: it needs the network then. A session is captured each time it "
                "goes idle; the plugin writes the transcript mtl-mcp distils to opencode's "
                "data folder (mtl-mcp-transcripts/)."
            )
        return notes
    if client == "copilot-cli":
        notes = [
            "Copilot CLI runs the read-only tools (recall_insights, list_memories) without "
            "asking, `copilot -p` included: their annotations say they only read. It asks "
            "before the others (or `--allow-tool 'mtl-mcp(record_session)'` allows one)."
        ]
        if scope == "project":
            notes.append(
                "Copilot CLI loads a repository's hooks (.github/hooks/) only in folders you "
                "trusted; `copilot -p` skips them otherwise."
            )
        return notes
    if client == "vscode" and scope == "user":
        return ["VS Code Insiders, VSCodium and Cursor read other files: this is VS Code's."]
    return []


def gemini_trust_note(user_home: Path, project_dir: Path, scope: InstallScope) -> str:
    """What Gemini CLI's folder trust means for mtl-mcp here, and what the user must do. Install
    never trusts a folder: that is the user's review of what the folder may run."""
    where = "this folder" if scope == "project" else "a folder"
    status = gemini_trust(user_home, project_dir)
    if status == "trusted":
        return f"Gemini CLI trusts {project_dir}: it starts mtl-mcp and runs its hooks there."
    state = "does not trust" if status == "untrusted" else "has not been told whether to trust"
    return (
        f"Gemini CLI {state} {project_dir}. With folder trust on, it starts MCP servers "
        "(user-level ones too) and runs hooks only in trusted folders, and `gemini -p` stops "
        f"in an untrusted one. Install does not trust {where} for you: start `gemini` there and "
        "choose 'Trust folder' (or 'Trust parent folder'), or use /permissions. "
        "`mtl-mcp doctor` reports it."
    )


def gemini_installed(user_home: Path, project_dir: Path) -> bool:
    """Whether Gemini CLI's user or project settings register mtl-mcp."""
    for scope in ("user", "project"):
        path = config_paths("gemini-cli", scope, user_home=user_home, project_dir=project_dir).mcp
        try:
            servers = load_json(path, read_text(path), comments=True).get("mcpServers")
        except ConfigError:
            continue
        if isinstance(servers, dict) and SERVER_NAME in servers:
            return True
    return False


def gemini_trust(user_home: Path, folder: Path) -> str:
    """ "trusted", "untrusted" or "unknown": `folder` in ~/.gemini/trustedFolders.json, as Gemini
    CLI reads it (a TRUST_PARENT entry trusts the folders below its parent)."""
    path = gemini_user_home(user_home) / ".gemini" / "trustedFolders.json"
    try:
        rules = load_json(path, read_text(path), comments=True)
    except ConfigError:
        return "unknown"
    folder = folder.resolve()
    best: tuple[int, str] = (-1, "unknown")
    for name, level in rules.items():
        root = Path(name).expanduser().resolve()
        if level == "TRUST_PARENT":
            root = root.parent
        if folder == root or folder.is_relative_to(root):
            depth = len(root.parts)
            status = "untrusted" if level == "DO_NOT_TRUST" else "trusted"
            if depth > best[0]:
                best = (depth, status)
    return best[1]


def _codex_install(
    paths: ConfigPaths, launch: Launch, hooks: bool, trust_hooks: bool, notes: list[str]
) -> list[FileChange | None]:
    """config.toml gains the server, hooks.json the hooks; with `trust_hooks`, the user's
    config.toml records Codex's trust in exactly those. `notes` says whether Codex will run
    them, and what to do if not."""
    assert paths.hooks is not None and paths.trust is not None
    if not hooks:
        return [codex_change(paths.mcp, launch)]
    hooks_change = json_change(paths.hooks, add_hooks("codex", launch))
    text = hooks_change.after if hooks_change else read_text(paths.hooks)
    ours = our_hooks(paths.hooks, load_json(paths.hooks, text))
    if trust_hooks:
        try:
            changes = _codex_toml(paths, launch, trust={hook.key: hook.hash for hook in ours})
        except ConfigError as exc:
            notes.append(f"Codex's trust in the hooks was not recorded: {exc}")
        else:
            notes.append(_TRUSTED_NOTE.format(n=len(ours), file=paths.trust))
            return [*changes, hooks_change]
    states = hook_states(paths.trust)
    if all(trust_status(hook, states) == "trusted" for hook in ours):
        notes.append(f"Codex trusts the {len(ours)} mtl-mcp hooks already ({paths.trust}).")
    else:
        notes.append(_UNTRUSTED_NOTE.format(n=len(ours)))
    return [codex_change(paths.mcp, launch), hooks_change]


_TRUSTED_NOTE = (
    "Recorded Codex's trust in the {n} mtl-mcp hooks in {file}, as /hooks in Codex would "
    "(review them there at any time); editing them in hooks.json untrusts them."
)
_UNTRUSTED_NOTE = (
    "Codex runs hooks only once you trust them, and `codex exec` skips untrusted ones "
    "silently: until you do, Codex gets no session-start context, no recall on the plan and "
    "no capture at session end. Start `codex`, type /hooks and trust the {n} mtl-mcp hooks "
    "(or rerun this command with --trust-hooks, which records the same trust for exactly "
    "these hooks)."
)


def _codex_toml(
    paths: ConfigPaths,
    launch: Launch | None,
    *,
    trust: dict[str, str] | None = None,
    untrust: list[str] | None = None,
) -> list[FileChange | None]:
    """The server edit of config.toml and the trust edit of the user's config.toml: one
    change when they are the same file (the user scope), two otherwise."""
    assert paths.trust is not None
    if paths.trust == paths.mcp:
        return [codex_change(paths.mcp, launch, trust=trust, untrust=untrust or ())]
    return [
        codex_change(paths.mcp, launch),
        codex_change(paths.trust, None, server=False, trust=trust, untrust=untrust or ()),
    ]


_PERMISSIONS_NOTE = (
    "Claude Code may now call recall_insights and list_memories without asking (they only "
    "read); record_session, rate_insight and forget_insight change your memory, so it still "
    "asks before each: allow them with /permissions if you want."
)


def _claude_settings(paths: ConfigPaths, hooks_launch: Launch | None) -> list[FileChange | None]:
    """settings.json gains the allow rules (and, given a launch, the hooks); the record
    beside it lists the rules install owns."""
    assert paths.hooks is not None and paths.permissions_record is not None
    settings = load_json(paths.hooks, read_text(paths.hooks))
    record = load_json(paths.permissions_record, read_text(paths.permissions_record))
    owned = owned_rules(settings, record)
    edits = [add_allow_rules(list(ALLOW_RULES))]
    if hooks_launch is not None:
        edits.insert(0, add_hooks("claude-code", hooks_launch))
    return [
        json_change(paths.hooks, chain(*edits)),
        json_change(paths.permissions_record, set_record(owned)),
    ]


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
    notes = [_RESTART[client]]
    if client == "codex":
        changes = _codex_uninstall(paths, notes)
    elif client == "claude-code":
        changes = [json_change(paths.mcp, del_server(client))]
        changes += _claude_settings_removal(paths, notes)
    elif paths.hooks == paths.mcp:
        edit = chain(del_server(client), del_hooks(client))
        changes = [json_change(paths.mcp, edit, comments=client in COMMENTS_ALLOWED)]
    else:
        changes = [json_change(paths.mcp, del_server(client), comments=client in COMMENTS_ALLOWED)]
        if paths.hooks is not None:
            changes.append(json_change(paths.hooks, del_hooks(client)))
    for owned in (paths.plugin, paths.policy):
        if owned is not None:
            changes.append(owned_removal(owned, notes))
    if paths.plugin is not None and (paths.plugin.parent.parent / "node_modules").is_dir():
        notes.append(
            f"opencode's own package.json and node_modules in {paths.plugin.parent.parent} "
            "stay: opencode installed them, and its other plugins may need them."
        )
    return Plan(client, scope, [c for c in changes if c is not None], notes)


def _claude_settings_removal(paths: ConfigPaths, notes: list[str]) -> list[FileChange | None]:
    """settings.json loses our hooks and the allow rules the record lists; the record goes.
    A read-only rule that stays (the user's own, or unrecorded) is pointed out in `notes`."""
    assert paths.hooks is not None and paths.permissions_record is not None
    record = load_json(paths.permissions_record, read_text(paths.permissions_record))
    added = recorded_rules(record)
    settings = load_json(paths.hooks, read_text(paths.hooks))
    if kept := [
        rule for rule in allowed_rules(settings) if rule in ALLOW_RULES and rule not in added
    ]:
        notes.append(
            f"Kept {', '.join(kept)} in {paths.hooks}: install did not record adding them. "
            "Remove them with /permissions if you no longer want them."
        )
    return [
        json_change(paths.hooks, chain(del_hooks("claude-code"), del_allow_rules(added))),
        json_change(paths.permissions_record, set_record([])),
    ]


def _codex_uninstall(paths: ConfigPaths, notes: list[str]) -> list[FileChange | None]:
    """config.toml loses the server, hooks.json our hooks, and the user's config.toml the
    trust recorded for exactly those hooks (by install or /hooks): left behind, it would
    trust the same command at the same place again without a review."""
    assert paths.hooks is not None and paths.trust is not None
    ours = our_hooks(paths.hooks, load_json(paths.hooks, read_text(paths.hooks)))
    states = hook_states(paths.trust)
    untrust = [hook.key for hook in ours if trust_status(hook, states) in ("trusted", "disabled")]
    changes = [json_change(paths.hooks, del_hooks("codex"))]
    try:
        return changes + _codex_toml(paths, None, untrust=untrust)
    except ConfigError as exc:
        if not untrust:
            raise
        notes.append(f"Codex's trust in the removed hooks stays in {paths.trust}: {exc}")
        return [*changes, codex_change(paths.mcp, None)]


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
