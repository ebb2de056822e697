"""Installers: real config files in tmp_path, for every client and scope."""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import sys
import tomllib
from pathlib import Path
from typing import Any, TypedDict

import pytest

from mtl_mcp.errors import ConfigError, InputError
from mtl_mcp.operations.install.json_configs import ALLOW_RULES
from mtl_mcp.operations.install.plans import apply, plan_install, plan_uninstall
from mtl_mcp.operations.install.targets import (
    Client,
    FileChange,
    InstallScope,
    Launch,
    Plan,
    config_paths,
    detect_launch,
)

EXE = "/opt/my tools/bin/mtl-mcp"  # a space, to prove the commands are shell-quoted
LAUNCH = Launch(EXE, env={"MTL_MCP_HOME": "/data/mtl home"})
COMBOS: list[tuple[Client, InstallScope]] = [
    ("claude-code", "user"),
    ("claude-code", "project"),
    ("cursor", "user"),
    ("cursor", "project"),
    ("codex", "user"),
    ("codex", "project"),
    ("claude-desktop", "user"),
]
BACKUP = re.compile(r"\.mtl-mcp-backup-\d{14}(-\d+)?$")


class Dirs(TypedDict):
    user_home: Path
    project_dir: Path


@pytest.fixture
def dirs(tmp_path: Path) -> Dirs:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    return {"user_home": home, "project_dir": project}


def install(
    client: Client, scope: InstallScope, dirs: Dirs, launch: Launch = LAUNCH, **kw: Any
) -> Plan:
    plan = plan_install(client, scope, launch, platform="linux", **dirs, **kw)
    apply(plan)
    return plan


def uninstall(client: Client, scope: InstallScope, dirs: Dirs) -> Plan:
    plan = plan_uninstall(client, scope, platform="linux", **dirs)
    apply(plan)
    return plan


def paths(client: Client, scope: InstallScope, dirs: Dirs) -> tuple[Path, Path | None]:
    p = config_paths(client, scope, platform="linux", **dirs)
    return p.mcp, p.hooks


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))
    return path


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def server_of(client: Client, mcp: Path) -> dict[str, Any]:
    if client == "codex":
        server: dict[str, Any] = tomllib.loads(mcp.read_text())["mcp_servers"]["mtl-mcp"]
        return server
    return dict(read_json(mcp)["mcpServers"]["mtl-mcp"])


def hook_commands(client: Client, hooks_file: Path) -> dict[str, list[str]]:
    doc = read_json(hooks_file)["hooks"]
    if client == "cursor":
        return {event: [e["command"] for e in doc[event]] for event in doc}
    return {event: [h["command"] for g in doc[event] for h in g["hooks"]] for event in doc}


# ------------------------------------------------------------------ paths


@pytest.mark.parametrize(
    ("client", "scope", "mcp", "hooks"),
    [
        ("claude-code", "user", "H/.claude.json", "H/.claude/settings.json"),
        ("claude-code", "project", "P/.mcp.json", "P/.claude/settings.json"),
        ("cursor", "user", "H/.cursor/mcp.json", "H/.cursor/hooks.json"),
        ("cursor", "project", "P/.cursor/mcp.json", "P/.cursor/hooks.json"),
        ("codex", "user", "H/.codex/config.toml", "H/.codex/hooks.json"),
        ("codex", "project", "P/.codex/config.toml", "P/.codex/hooks.json"),
    ],
)
def test_config_paths_per_client_and_scope(
    client: Client, scope: InstallScope, mcp: str, hooks: str | None, dirs: Dirs
) -> None:
    def where(spec: str) -> Path:
        root = dirs["user_home"] if spec[0] == "H" else dirs["project_dir"]
        return root / spec[2:]

    assert paths(client, scope, dirs) == (where(mcp), where(hooks) if hooks else None)


@pytest.mark.parametrize(
    ("platform", "expected"),
    [
        ("darwin", "Library/Application Support/Claude/claude_desktop_config.json"),
        ("win32", "AppData/Roaming/Claude/claude_desktop_config.json"),
        ("linux", ".config/Claude/claude_desktop_config.json"),
    ],
)
def test_claude_desktop_config_path_per_platform(
    dirs: Dirs, platform: str, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("APPDATA", raising=False)
    got = config_paths("claude-desktop", "user", platform=platform, **dirs)
    assert got.mcp == dirs["user_home"] / expected
    assert got.hooks is None


def test_claude_desktop_on_windows_follows_appdata(
    dirs: Dirs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("APPDATA", str(tmp_path / "Roaming"))
    got = config_paths("claude-desktop", "user", platform="win32", **dirs)
    assert got.mcp == tmp_path / "Roaming/Claude/claude_desktop_config.json"


def test_claude_desktop_project_scope_is_refused_with_an_explanation(dirs: Dirs) -> None:
    with pytest.raises(InputError, match=r"no project-level configuration.*'user' scope"):
        plan_install("claude-desktop", "project", LAUNCH, **dirs)


def test_unknown_client_is_an_input_error(dirs: Dirs) -> None:
    with pytest.raises(InputError, match="unknown client 'vim'"):
        config_paths("vim", "user", **dirs)  # type: ignore[arg-type]


# ------------------------------------------------------------------ install


@pytest.mark.parametrize(("client", "scope"), COMBOS)
def test_install_into_empty_dirs_registers_server_and_hooks(
    client: Client, scope: InstallScope, dirs: Dirs
) -> None:
    plan = install(client, scope, dirs)
    mcp, hooks = paths(client, scope, dirs)
    server = server_of(client, mcp)
    assert server["command"] == EXE
    assert server["args"] == ["serve"]
    assert server["env"] == {"MTL_MCP_HOME": "/data/mtl home"}
    assert plan.notes
    if client == "claude-code":
        assert server["type"] == "stdio"
    if client == "codex":
        assert server["startup_timeout_sec"] == 30
        [note] = [n for n in plan.notes if "/hooks" in n]  # they are not trusted
        assert "codex exec` skips untrusted ones silently" in note and "--trust-hooks" in note
    if client == "claude-desktop":
        assert any("restart Claude Desktop" in n for n in plan.notes)
    if hooks is None:
        assert [c.path for c in plan.changes] == [mcp]
        return
    events = hook_commands(client, hooks)
    expected = {
        "claude-code": {
            "SessionEnd": "session-end",
            "SessionStart": "session-start",
            "PostToolUse": "tool-use",
            "PostToolUseFailure": "tool-use",
        },
        "cursor": {
            "sessionEnd": "session-end",
            "sessionStart": "session-start",
            "postToolUse": "tool-use",
        },
        "codex": {
            "SessionEnd": "session-end",
            "SessionStart": "session-start",
            "PostToolUse": "tool-use",
        },
    }[client]
    assert set(events) == set(expected)
    for event, arg in expected.items():
        (command,) = events[event]
        assert shlex.split(command) == ["env", "MTL_MCP_HOME=/data/mtl home", EXE, "hook", arg]
    if client == "cursor":
        assert read_json(hooks)["version"] == 1


def test_claude_code_hook_groups_have_the_documented_shape(dirs: Dirs) -> None:
    install("claude-code", "user", dirs, Launch("/usr/bin/mtl-mcp"))
    doc = read_json(dirs["user_home"] / ".claude/settings.json")
    assert doc == {
        "hooks": {
            "SessionEnd": [
                {
                    "hooks": [
                        {
                            "type": "command",
                            "command": "/usr/bin/mtl-mcp hook session-end",
                            "timeout": 5,
                        }
                    ]
                }
            ],
            "SessionStart": [
                {
                    "matcher": "startup|resume|clear|compact",
                    "hooks": [
                        {
                            "type": "command",
                            "command": "/usr/bin/mtl-mcp hook session-start",
                            "timeout": 10,
                        }
                    ],
                }
            ],
            **{
                event: [
                    {
                        "matcher": "*",
                        "hooks": [
                            {
                                "type": "command",
                                "command": "/usr/bin/mtl-mcp hook tool-use",
                                "timeout": 5,
                            }
                        ],
                    }
                ]
                for event in ("PostToolUse", "PostToolUseFailure")
            },
        },
        "permissions": {"allow": ["mcp__mtl-mcp__recall_insights", "mcp__mtl-mcp__list_memories"]},
    }


def test_python_module_launch_is_used_for_server_and_hooks(dirs: Dirs) -> None:
    install("cursor", "project", dirs, Launch("/venv/bin/python", ("-m", "mtl_mcp")))
    mcp, hooks = paths("cursor", "project", dirs)
    assert read_json(mcp)["mcpServers"]["mtl-mcp"] == {
        "command": "/venv/bin/python",
        "args": ["-m", "mtl_mcp", "serve"],
        "env": {},
    }
    expected = "/venv/bin/python -m mtl_mcp hook session-end"
    assert hook_commands("cursor", hooks or mcp)["sessionEnd"] == [expected]


def test_a_shadowing_claude_code_local_scope_entry_is_pointed_out(dirs: Dirs) -> None:
    local: dict[str, Any] = {
        "projects": {str(dirs["project_dir"]): {"mcpServers": {"mtl-mcp": {}}}}
    }
    write(dirs["user_home"] / ".claude.json", json.dumps(local))
    plan = plan_install("claude-code", "user", LAUNCH, **dirs)
    assert any("claude mcp remove mtl-mcp --scope local" in note for note in plan.notes)


def test_hooks_false_registers_the_server_and_its_permissions_only(dirs: Dirs) -> None:
    plan = install("claude-code", "project", dirs, hooks=False)
    names = [c.path.name for c in plan.changes]
    assert names == [".mcp.json", "settings.json", "mtl-mcp-install.json"]
    assert set(read_json(dirs["project_dir"] / ".claude/settings.json")) == {"permissions"}
    assert any("distill --since 7d" in n for n in plan.notes)


CLAUDE_JSON = {
    "numStartups": 42,
    "theme": "dark",
    "mcpServers": {"other": {"type": "stdio", "command": "other-server", "args": [], "env": {}}},
    "projects": {"/x": {"mcpServers": {}, "allowedTools": ["Bash"]}},
    "userID": "abc",
}
CLAUDE_SETTINGS = {
    "model": "opus",
    "permissions": {"allow": ["Bash(ls:*)"]},
    "hooks": {
        "SessionEnd": [{"hooks": [{"type": "command", "command": "~/bin/log-end.sh"}]}],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "guard"}]}],
    },
    "env": {"FOO": "1"},
}
CURSOR_MCP = {"mcpServers": {"github": {"command": "gh-mcp", "args": ["x"], "env": {"T": "1"}}}}
CODEX_HOOKS = {
    "hooks": {
        "PostToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "lint"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done", "timeout": 9}]}],
    }
}
CURSOR_HOOKS = {
    "version": 1,
    "hooks": {"sessionEnd": [{"command": "./hooks/audit.sh"}], "stop": [{"command": "s"}]},
}


def seed(client: Client, scope: InstallScope, dirs: Dirs) -> dict[Path, Any]:
    """Pre-existing configs with other servers, hooks and settings; returns their content."""
    mcp, hooks = paths(client, scope, dirs)
    seeded: dict[Path, Any] = {}
    if client == "codex":
        write(mcp, CODEX_TOML)
        seeded[mcp] = tomllib.loads(CODEX_TOML)
    else:
        seeded[mcp] = CLAUDE_JSON if client == "claude-code" else CURSOR_MCP
    if hooks is not None:
        seeded[hooks] = {"claude-code": CLAUDE_SETTINGS, "codex": CODEX_HOOKS}.get(
            client, CURSOR_HOOKS
        )
    for path, doc in seeded.items():
        if path.suffix == ".toml":
            continue
        write(path, json.dumps(doc, indent=4))
    return seeded


def without_ours(doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` minus mtl-mcp's server, hooks and permission rules, asserting ours came last."""
    doc.get("mcpServers", {}).pop("mtl-mcp", None)
    if allow := doc.get("permissions", {}).get("allow"):
        assert allow[-len(ALLOW_RULES) :] == list(ALLOW_RULES)
        del allow[-len(ALLOW_RULES) :]
    hooks = doc.get("hooks", {})
    for event, items in list(hooks.items()):
        others = [i for i in items if "mtl-mcp" not in json.dumps(i)]
        assert items[: len(others)] == others
        hooks[event] = others
        if not hooks[event]:
            del hooks[event]
    return doc


@pytest.mark.parametrize(("client", "scope"), COMBOS)
def test_install_into_existing_configs_keeps_everything_else_in_order(
    client: Client, scope: InstallScope, dirs: Dirs
) -> None:
    seeded = seed(client, scope, dirs)
    install(client, scope, dirs)
    for path, original in seeded.items():
        if path.suffix == ".toml":
            doc = tomllib.loads(path.read_text())
            assert doc["mcp_servers"].pop("mtl-mcp")["command"] == EXE
            assert doc == original
        else:  # json.dumps compares key order too
            assert json.dumps(without_ours(read_json(path))) == json.dumps(original)


@pytest.mark.parametrize(("client", "scope"), COMBOS)
@pytest.mark.parametrize("seeded", [False, True])
def test_installing_twice_changes_nothing_the_second_time(
    client: Client, scope: InstallScope, dirs: Dirs, tmp_path: Path, seeded: bool
) -> None:
    if seeded:
        seed(client, scope, dirs)
    install(client, scope, dirs)
    first = snapshot(tmp_path)
    plan = install(client, scope, dirs)
    assert plan.changes == []
    assert snapshot(tmp_path) == first


def test_reinstall_with_a_moved_executable_replaces_our_entries(dirs: Dirs) -> None:
    install("claude-code", "user", dirs, Launch("/old/venv/bin/mtl-mcp"))
    install("cursor", "user", dirs, Launch("/old/venv/bin/mtl-mcp"))
    install("claude-code", "user", dirs, Launch("/new/bin/mtl-mcp"))
    install("cursor", "user", dirs, Launch("/new/bin/mtl-mcp"))
    home = dirs["user_home"]
    pairs: list[tuple[Client, str]] = [
        ("claude-code", ".claude/settings.json"),
        ("cursor", ".cursor/hooks.json"),
    ]
    for client, hooks in pairs:
        for commands in hook_commands(client, home / hooks).values():
            assert len(commands) == 1
            assert commands[0].startswith("/new/bin/mtl-mcp hook ")
    server = read_json(home / ".claude.json")["mcpServers"]["mtl-mcp"]
    assert server["command"] == "/new/bin/mtl-mcp"


def test_reinstall_leaves_our_hooks_where_the_user_moved_them(dirs: Dirs) -> None:
    install("claude-code", "project", dirs)
    install("cursor", "project", dirs)
    claude, cursor = paths("claude-code", "project", dirs)[1], paths("cursor", "project", dirs)[1]
    assert claude is not None and cursor is not None
    doc = read_json(claude)
    doc["hooks"]["SessionEnd"].append({"hooks": [{"type": "command", "command": "later"}]})
    write(claude, json.dumps(doc))
    doc = read_json(cursor)
    doc["hooks"]["sessionStart"].append({"command": "later"})
    write(cursor, json.dumps(doc))
    assert install("claude-code", "project", dirs).changes == []
    assert install("cursor", "project", dirs).changes == []


def test_our_handler_sharing_a_group_with_another_is_recognised(dirs: Dirs) -> None:
    settings = write(
        dirs["project_dir"] / ".claude/settings.json",
        json.dumps(
            {
                "hooks": {
                    "SessionEnd": [
                        {
                            "hooks": [
                                {"type": "command", "command": "notify-send bye"},
                                {"type": "command", "command": "uvx mtl-mcp hook session-end"},
                            ]
                        }
                    ]
                }
            }
        ),
    )
    install("claude-code", "project", dirs)
    groups = read_json(settings)["hooks"]["SessionEnd"]
    assert groups[0] == {"hooks": [{"type": "command", "command": "notify-send bye"}]}
    assert len(groups) == 2
    uninstall("claude-code", "project", dirs)
    assert read_json(settings) == {"hooks": {"SessionEnd": [groups[0]]}}


# ------------------------------------------------------------------ Claude Code permissions

READ_ONLY = ["mcp__mtl-mcp__recall_insights", "mcp__mtl-mcp__list_memories"]


def claude_settings(scope: InstallScope, dirs: Dirs) -> Path:
    hooks = paths("claude-code", scope, dirs)[1]
    assert hooks is not None
    return hooks


@pytest.mark.parametrize("scope", ["user", "project"])
def test_claude_code_may_call_the_read_only_tools_without_asking(
    scope: InstallScope, dirs: Dirs
) -> None:
    """Only recall_insights and list_memories are allowed; the note says who decides the rest."""
    plan = install("claude-code", scope, dirs)
    settings = claude_settings(scope, dirs)
    assert read_json(settings)["permissions"] == {"allow": READ_ONLY}
    assert read_json(settings.with_name("mtl-mcp-install.json"))["allow"] == READ_ONLY
    [note] = [n for n in plan.notes if "without asking" in n]
    assert all(tool in note for tool in ("record_session", "rate_insight", "forget_insight"))


def test_uninstall_keeps_a_permission_rule_the_user_had_before_install(dirs: Dirs) -> None:
    mine = {"permissions": {"allow": ["Bash(ls:*)", READ_ONLY[0]], "deny": ["WebFetch"]}}
    settings = write(dirs["user_home"] / ".claude/settings.json", json.dumps(mine))
    install("claude-code", "user", dirs)
    assert read_json(settings)["permissions"]["allow"] == ["Bash(ls:*)", *READ_ONLY]
    record = settings.with_name("mtl-mcp-install.json")
    assert read_json(record)["allow"] == READ_ONLY[1:]
    assert install("claude-code", "user", dirs).changes == []  # ownership survives a reinstall
    plan = uninstall("claude-code", "user", dirs)
    assert read_json(settings) == mine
    assert not record.exists()
    assert any(f"Kept {READ_ONLY[0]}" in note for note in plan.notes)


def test_uninstall_without_the_record_removes_no_rule_and_says_so(dirs: Dirs) -> None:
    install("claude-code", "project", dirs)
    settings = claude_settings("project", dirs)
    settings.with_name("mtl-mcp-install.json").unlink()
    plan = uninstall("claude-code", "project", dirs)
    assert read_json(settings) == {"permissions": {"allow": READ_ONLY}}
    assert any(", ".join(READ_ONLY) in note for note in plan.notes)


def test_a_rule_removed_by_the_user_is_added_again_by_a_reinstall(dirs: Dirs) -> None:
    install("claude-code", "user", dirs)
    settings = claude_settings("user", dirs)
    write(settings, json.dumps({**read_json(settings), "permissions": {"allow": READ_ONLY[:1]}}))
    install("claude-code", "user", dirs)
    assert read_json(settings)["permissions"]["allow"] == READ_ONLY
    uninstall("claude-code", "user", dirs)
    assert not settings.exists()


# ------------------------------------------------------------------ dry run, diff, backups


def test_a_plan_writes_nothing_and_its_diff_names_the_path_and_our_entry(
    dirs: Dirs, tmp_path: Path
) -> None:
    seed("claude-code", "user", dirs)
    before = snapshot(tmp_path)
    plan = plan_install("claude-code", "user", LAUNCH, **dirs)
    assert snapshot(tmp_path) == before
    diffs = {c.path.name: c.diff() for c in plan.changes}
    assert f"--- {dirs['user_home'] / '.claude.json'}" in diffs[".claude.json"]
    assert '+        "mtl-mcp": {' in diffs[".claude.json"]  # in the file's own indentation
    assert "hook session-end" in diffs["settings.json"]


def test_diff_of_a_new_or_removed_file_uses_dev_null(tmp_path: Path) -> None:
    created = FileChange(tmp_path / "a.json", None, "{}\n").diff()
    assert created.startswith(f"--- /dev/null\n+++ {tmp_path / 'a.json'}\n")
    removed = FileChange(tmp_path / "a.json", "x", None).diff()
    assert "+++ /dev/null" in removed and "-x\n" in removed


@pytest.mark.parametrize(("client", "scope"), COMBOS)
def test_apply_backs_up_each_existing_file_with_its_original_content(
    client: Client, scope: InstallScope, dirs: Dirs
) -> None:
    seeded = seed(client, scope, dirs)
    originals = {path: path.read_bytes() for path in seeded}
    backups = apply(plan_install(client, scope, LAUNCH, platform="linux", **dirs))
    assert len(backups) == len(seeded)
    for backup in backups:
        assert BACKUP.search(backup.name)
        original = backup.with_name(BACKUP.sub("", backup.name))
        assert backup.read_bytes() == originals[original]


def test_new_files_get_no_backup_and_parent_dirs_are_created(dirs: Dirs) -> None:
    plan = plan_install("cursor", "project", LAUNCH, **dirs)
    assert apply(plan) == []
    assert (dirs["project_dir"] / ".cursor/mcp.json").is_file()
    assert list(dirs["project_dir"].rglob("*backup*")) == []


def test_apply_refuses_a_file_changed_since_planning_and_writes_nothing(dirs: Dirs) -> None:
    plan = plan_install("claude-code", "project", LAUNCH, **dirs)
    settings = write(dirs["project_dir"] / ".claude/settings.json", '{"mine": true}')
    with pytest.raises(ConfigError, match=r"settings\.json changed since the plan"):
        apply(plan)
    assert settings.read_text() == '{"mine": true}'
    assert not (dirs["project_dir"] / ".mcp.json").exists()


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permission bits")
def test_apply_keeps_permissions_and_writes_through_symlinks(dirs: Dirs, tmp_path: Path) -> None:
    real = write(tmp_path / "dotfiles/claude.json", json.dumps(CLAUDE_JSON))
    real.chmod(0o600)
    link = dirs["user_home"] / ".claude.json"
    link.symlink_to(real)
    install("claude-code", "user", dirs, hooks=False)
    assert link.is_symlink()
    assert "mtl-mcp" in read_json(real)["mcpServers"]
    assert stat.S_IMODE(real.stat().st_mode) == 0o600


def test_json_is_written_with_two_space_indent_and_a_trailing_newline(dirs: Dirs) -> None:
    install("claude-desktop", "user", dirs, Launch("/b/mtl-mcp"))
    text = config_paths("claude-desktop", "user", platform="linux", **dirs).mcp.read_text()
    assert text.endswith("}\n")
    assert text.startswith('{\n  "mcpServers": {\n    "mtl-mcp": {\n')


# ------------------------------------------------------------------ uninstall


@pytest.mark.parametrize(("client", "scope"), COMBOS)
def test_uninstall_after_install_restores_the_other_content(
    client: Client, scope: InstallScope, dirs: Dirs
) -> None:
    seeded = seed(client, scope, dirs)
    originals = {path: path.read_text() for path in seeded}
    install(client, scope, dirs)
    uninstall(client, scope, dirs)
    for path, doc in seeded.items():
        if path.suffix == ".toml":
            assert path.read_text() == originals[path]  # byte for byte
        else:
            assert read_json(path) == doc
    assert plan_uninstall(client, scope, platform="linux", **dirs).changes == []


@pytest.mark.parametrize(("client", "scope"), COMBOS)
def test_uninstall_deletes_files_left_with_nothing_but_our_entries(
    client: Client, scope: InstallScope, dirs: Dirs, tmp_path: Path
) -> None:
    install(client, scope, dirs)
    plan = uninstall(client, scope, dirs)
    assert all(c.after is None for c in plan.changes)
    assert [p for p in tmp_path.rglob("*") if p.is_file() and not BACKUP.search(p.name)] == []


def test_uninstall_keeps_empty_containers_it_did_not_empty(dirs: Dirs) -> None:
    settings = {"hooks": {"Stop": []}, "model": "x"}
    path = write(dirs["project_dir"] / ".claude/settings.json", json.dumps(settings))
    install("claude-code", "project", dirs)
    uninstall("claude-code", "project", dirs)
    assert read_json(path) == settings


def test_uninstall_with_nothing_installed_plans_no_changes(dirs: Dirs) -> None:
    seed("claude-code", "user", dirs)
    for client, scope in COMBOS:
        assert plan_uninstall(client, scope, platform="linux", **dirs).changes == []


# ------------------------------------------------------------------ invalid files


@pytest.mark.parametrize(("client", "scope"), [c for c in COMBOS if c[0] != "codex"])
def test_invalid_json_is_refused_and_left_untouched(
    client: Client, scope: InstallScope, dirs: Dirs
) -> None:
    mcp, _ = paths(client, scope, dirs)
    write(mcp, '{"mcpServers": {,}')
    message = rf"{re.escape(str(mcp))} is not valid JSON \(.* line 1, column 17\); fix it"
    with pytest.raises(ConfigError, match=message):
        plan_install(client, scope, LAUNCH, platform="linux", **dirs)
    with pytest.raises(ConfigError, match=message):
        plan_uninstall(client, scope, platform="linux", **dirs)
    assert mcp.read_text() == '{"mcpServers": {,}'


@pytest.mark.parametrize("client", ["claude-code", "cursor"])
def test_an_invalid_hooks_file_stops_the_whole_install(client: Client, dirs: Dirs) -> None:
    mcp, hooks = paths(client, "project", dirs)
    assert hooks is not None
    write(hooks, "{ // comments are not JSON\n}")
    with pytest.raises(ConfigError, match=re.escape(str(hooks))):
        plan_install(client, "project", LAUNCH, **dirs)
    assert not mcp.exists()
    assert hooks.read_text() == "{ // comments are not JSON\n}"


def test_wrongly_typed_containers_are_refused(dirs: Dirs) -> None:
    write(dirs["project_dir"] / ".mcp.json", '{"mcpServers": []}')
    with pytest.raises(ConfigError, match=r'"mcpServers" in .*should be an object'):
        plan_install("claude-code", "project", LAUNCH, **dirs)
    write(dirs["project_dir"] / ".mcp.json", "[1]")
    with pytest.raises(ConfigError, match="JSON object at the top level"):
        plan_install("claude-code", "project", LAUNCH, **dirs)


def test_an_empty_json_file_is_treated_as_empty_config(dirs: Dirs) -> None:
    path = write(dirs["project_dir"] / ".mcp.json", "")
    install("claude-code", "project", dirs)
    assert "mtl-mcp" in read_json(path)["mcpServers"]


@pytest.mark.parametrize("scope", ["user", "project"])
def test_invalid_toml_is_refused_and_left_untouched(scope: InstallScope, dirs: Dirs) -> None:
    mcp, _ = paths("codex", scope, dirs)
    write(mcp, 'model = "o4\n[broken')
    with pytest.raises(ConfigError, match=rf"{re.escape(str(mcp))} is not valid TOML.*fix it"):
        plan_install("codex", scope, LAUNCH, **dirs)
    assert mcp.read_text() == 'model = "o4\n[broken'


# ------------------------------------------------------------------ codex TOML surgery

CODEX_TOML = """\
# Codex settings — hand written
model = "gpt-5-codex"   # inline comment
approval_policy = "on-request"

[mcp_servers.github]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-github"]
  # indented comment kept

[mcp_servers.github.env]
GITHUB_TOKEN = "x"

# profiles below
[profiles.fast]
model = "o4-mini"
"""


def test_codex_block_is_appended_and_everything_else_kept_byte_for_byte(dirs: Dirs) -> None:
    path = write(dirs["user_home"] / ".codex/config.toml", CODEX_TOML)
    install("codex", "user", dirs)
    assert path.read_text() == CODEX_TOML + (
        "\n"
        "[mcp_servers.mtl-mcp]\n"
        'command = "/opt/my tools/bin/mtl-mcp"\n'
        'args = ["serve"]\n'
        "startup_timeout_sec = 30\n"
        "[mcp_servers.mtl-mcp.env]\n"
        'MTL_MCP_HOME = "/data/mtl home"\n'
    )


def test_codex_old_block_in_the_middle_is_replaced_keeping_neighbours(dirs: Dirs) -> None:
    head, tail = CODEX_TOML.split("# profiles below\n")
    old = (
        '[mcp_servers."mtl-mcp"]\ncommand = "/old/mtl-mcp"\nargs = ["serve"]\n'
        "[mcp_servers.mtl-mcp.env]\nOLD = '1'\n\n"
    )
    path = write(dirs["user_home"] / ".codex/config.toml", head + old + "# profiles below\n" + tail)
    install("codex", "user", dirs, Launch("/new/mtl-mcp"))
    text = path.read_text()
    assert text.startswith(head + "\n# profiles below\n" + tail)
    assert "/old/mtl-mcp" not in text and "OLD" not in text
    assert tomllib.loads(text)["mcp_servers"]["mtl-mcp"] == {
        "command": "/new/mtl-mcp",
        "args": ["serve"],
        "startup_timeout_sec": 30,
    }


def test_codex_crlf_files_stay_crlf_and_round_trip(dirs: Dirs) -> None:
    original = CODEX_TOML.replace("\n", "\r\n")
    path = write(dirs["project_dir"] / ".codex/config.toml", original)
    install("codex", "project", dirs)
    assert "\n" not in path.read_bytes().decode().replace("\r\n", "")
    uninstall("codex", "project", dirs)
    assert path.read_bytes().decode() == original


def test_codex_values_that_need_escaping_round_trip(dirs: Dirs) -> None:
    launch = Launch('C:\\Users\\me "x"\\mtl-mcp.exe', env={"WEIRD KEY": "tab\there\x7f"})
    install("codex", "user", dirs, launch)
    server = server_of("codex", dirs["user_home"] / ".codex/config.toml")
    assert server["command"] == launch.command
    assert server["env"] == {"WEIRD KEY": "tab\there\x7f"}


def test_codex_inline_table_definition_is_refused_not_duplicated(dirs: Dirs) -> None:
    text = '[mcp_servers]\nmtl-mcp = { command = "x" }\n'
    path = write(dirs["user_home"] / ".codex/config.toml", text)
    with pytest.raises(ConfigError, match="inline table or dotted keys"):
        plan_install("codex", "user", LAUNCH, **dirs)
    with pytest.raises(ConfigError, match="Edit that entry by hand"):
        plan_uninstall("codex", "user", **dirs)
    assert path.read_text() == text


def test_codex_install_into_a_file_without_trailing_newline(dirs: Dirs) -> None:
    path = write(dirs["user_home"] / ".codex/config.toml", 'model = "o3"')
    install("codex", "user", dirs, Launch("/b/mtl-mcp"))
    assert path.read_text().startswith('model = "o3"\n\n[mcp_servers.mtl-mcp]\n')
    assert install("codex", "user", dirs, Launch("/b/mtl-mcp")).changes == []


# ------------------------------------------------------------------ launch


def test_launch_rejects_env_names_that_cannot_be_passed() -> None:
    with pytest.raises(InputError, match="environment variable name"):
        Launch("/b/mtl-mcp", env={"A=B": "1"})
    with pytest.raises(InputError, match="launch command is empty"):
        Launch("")


def test_detect_launch_points_at_this_environment() -> None:
    launch = detect_launch({"MTL_MCP_HOME": "/h"})
    assert os.path.isabs(launch.command)
    assert Path(launch.command).parent == Path(sys.executable).parent
    assert launch.env == {"MTL_MCP_HOME": "/h"}


# ------------------------------------------------------------------ codex hooks and their trust

CODEX_KEYS = ("session_end", "session_start", "post_tool_use")


def codex_states(dirs: Dirs) -> dict[str, Any]:
    config = dirs["user_home"] / ".codex/config.toml"
    state: dict[str, Any] = tomllib.loads(config.read_text()).get("hooks", {}).get("state", {})
    return state


def test_codex_hooks_have_the_shape_codex_reads(dirs: Dirs) -> None:
    """Claude Code's shape; no matcher (every source, every tool); SessionEnd at the 3 s
    Codex clamps it to (a longer one makes it warn on every run); no PostToolUseFailure."""
    install("codex", "user", dirs, Launch("/usr/bin/mtl-mcp"))

    def group(arg: str, timeout: int) -> list[dict[str, Any]]:
        handler = {"type": "command", "command": f"/usr/bin/mtl-mcp hook {arg}"}
        return [{"hooks": [{**handler, "timeout": timeout}]}]

    assert read_json(dirs["user_home"] / ".codex/hooks.json") == {
        "hooks": {
            "SessionEnd": group("session-end", 3),
            "SessionStart": group("session-start", 10),
            "PostToolUse": group("tool-use", 5),
        }
    }


def test_codex_trust_keys_and_hashes_are_the_ones_codex_computes() -> None:
    """Golden values from Codex 0.171.0's own `hooks/list` (app-server) for these handlers;
    SessionEnd's hash is over its clamped timeout."""
    from mtl_mcp.operations.install.codex_trust import hook_hash, hook_key

    def handler(event: str) -> dict[str, Any]:
        return {"type": "command", "command": f"/tmp/i17probe/hook.py {event}", "timeout": 10}

    assert hook_hash("PostToolUse", "*", handler("PostToolUse")) == (
        "sha256:bcdb48d217db756c953a8f5e606feee1f1d4848f969e63e72fff547215c5ae95"
    )
    assert hook_hash("SessionStart", None, handler("SessionStart")) == (
        "sha256:11526f1fc1272acdee02c993d63c39c128a62f0c477be87519786e4710f5caa1"
    )
    assert hook_hash("SessionEnd", None, handler("SessionEnd")) == (
        "sha256:4a8f1cced69da4335695da5c6fa71fc0c35e83583c2384dbf5930d218cf004ec"
    )
    key = hook_key(Path("/u/.codex/hooks.json"), "PostToolUse", 0, 1)
    assert key == "/u/.codex/hooks.json:post_tool_use:0:1"


def test_codex_install_does_not_trust_its_hooks_unless_asked(dirs: Dirs) -> None:
    from mtl_mcp.operations.install.codex_trust import installed_trust

    plan = install("codex", "user", dirs)
    codex = dirs["user_home"] / ".codex"
    assert "hooks" not in tomllib.loads((codex / "config.toml").read_text())
    statuses = installed_trust(codex / "hooks.json", codex / "config.toml")
    assert [s for _, s in statuses] == ["untrusted"] * 3
    assert any("type /hooks and trust the 3 mtl-mcp hooks" in n for n in plan.notes)


@pytest.mark.parametrize("scope", ["user", "project"])
def test_codex_trust_hooks_records_trust_for_exactly_ours_and_uninstall_removes_it(
    scope: InstallScope, dirs: Dirs
) -> None:
    """--trust-hooks: the user's config.toml (whatever the scope: Codex reads trust there
    only) trusts our three handlers where they are; the user's own hook stays untrusted;
    a reinstall changes nothing; uninstall restores every file byte for byte."""
    from mtl_mcp.operations.install.codex_trust import installed_trust

    seeded = seed("codex", scope, dirs)
    user_config = write(dirs["user_home"] / ".codex/config.toml", CODEX_TOML)
    originals = {path: path.read_bytes() for path in [*seeded, user_config]}
    plan = install("codex", scope, dirs, trust_hooks=True)
    assert any("Recorded Codex's trust in the 3 mtl-mcp hooks" in n for n in plan.notes)
    hooks = paths("codex", scope, dirs)[1]
    assert hooks is not None
    statuses = installed_trust(hooks, user_config)
    assert [(h.key.rsplit(":", 3)[1:], s) for h, s in statuses] == [
        (["session_end", "0", "0"], "trusted"),
        (["session_start", "0", "0"], "trusted"),
        (["post_tool_use", "1", "0"], "trusted"),  # after the user's own group
    ]
    assert set(codex_states(dirs)) == {h.key for h, _ in statuses}  # nothing of the user's
    if scope == "project":
        project = tomllib.loads((dirs["project_dir"] / ".codex/config.toml").read_text())
        assert "hooks" not in project
    assert install("codex", scope, dirs, trust_hooks=True).changes == []
    uninstall("codex", scope, dirs)
    for path, original in originals.items():
        if path.suffix == ".toml":
            assert path.read_bytes() == original  # byte for byte
        else:
            assert read_json(path) == seeded[path]


def test_codex_trust_the_user_gave_is_seen_and_removed_with_our_hooks(dirs: Dirs) -> None:
    """Trust recorded by /hooks (Codex's own tables, after ours) counts as trusted on a
    reinstall; uninstall removes it with the hooks, and keeps the user's other state."""
    from mtl_mcp.operations.install.codex_trust import installed_trust

    install("codex", "user", dirs)
    codex = dirs["user_home"] / ".codex"
    config = codex / "config.toml"
    theirs = '[hooks.state."/elsewhere/hooks.json:stop:0:0"]\nenabled = false\n'
    tables = [
        f'[hooks.state."{hook.key}"]\ntrusted_hash = "{hook.hash}"\n'
        for hook, _ in installed_trust(codex / "hooks.json", config)
    ]
    write(config, config.read_text() + "\n" + "\n".join([theirs, *tables]))
    plan = install("codex", "user", dirs)
    assert plan.changes == []
    assert any("Codex trusts the 3 mtl-mcp hooks already" in n for n in plan.notes)
    uninstall("codex", "user", dirs)
    assert config.read_text() == theirs
    assert not (codex / "hooks.json").exists()


def test_codex_trust_keeps_a_hook_the_user_disabled_disabled(dirs: Dirs) -> None:
    install("codex", "user", dirs)
    config = dirs["user_home"] / ".codex/config.toml"
    key = f"{dirs['user_home']}/.codex/hooks.json:post_tool_use:0:0"
    write(config, config.read_text() + f'\n[hooks.state."{key}"]\nenabled = false\n')
    install("codex", "user", dirs, trust_hooks=True)
    assert codex_states(dirs)[key]["enabled"] is False
    assert codex_states(dirs)[key]["trusted_hash"].startswith("sha256:")


def test_codex_moved_executable_is_untrusted_again_and_said_so(dirs: Dirs) -> None:
    from mtl_mcp.operations.install.codex_trust import installed_trust

    install("codex", "user", dirs, Launch("/old/mtl-mcp"), trust_hooks=True)
    plan = install("codex", "user", dirs, Launch("/new/mtl-mcp"))
    codex = dirs["user_home"] / ".codex"
    statuses = installed_trust(codex / "hooks.json", codex / "config.toml")
    assert [s for _, s in statuses] == ["modified"] * 3
    assert any("/hooks" in n for n in plan.notes)
    install("codex", "user", dirs, Launch("/new/mtl-mcp"), trust_hooks=True)
    assert [s for _, s in installed_trust(codex / "hooks.json", codex / "config.toml")] == [
        "trusted"
    ] * 3


def test_codex_trust_it_cannot_write_safely_is_skipped_with_a_note(dirs: Dirs) -> None:
    config = write(dirs["user_home"] / ".codex/config.toml", "[hooks]\nstate = { a = {} }\n")
    plan = install("codex", "user", dirs, trust_hooks=True)
    assert any("trust in the hooks was not recorded" in n for n in plan.notes)
    assert any("/hooks" in n for n in plan.notes)
    assert tomllib.loads(config.read_text())["hooks"] == {"state": {"a": {}}}
    assert "mtl-mcp" in tomllib.loads(config.read_text())["mcp_servers"]


def test_trust_hooks_is_refused_for_the_other_clients(dirs: Dirs) -> None:
    with pytest.raises(InputError, match="--trust-hooks is for codex"):
        plan_install("claude-code", "user", LAUNCH, trust_hooks=True, **dirs)


def test_doctor_says_whether_codex_runs_our_hooks(dirs: Dirs) -> None:
    from mtl_mcp.operations.doctor import _codex_hooks

    assert _codex_hooks(dirs["user_home"], dirs["project_dir"]) is None  # none installed
    install("codex", "project", dirs)
    check = _codex_hooks(dirs["user_home"], dirs["project_dir"])
    assert check is not None and not check.ok and not check.required
    assert "SessionStart untrusted" in check.detail and check.fix and "/hooks" in check.fix
    install("codex", "project", dirs, trust_hooks=True)
    check = _codex_hooks(dirs["user_home"], dirs["project_dir"])
    assert check is not None and check.ok and "3 mtl-mcp hooks, all trusted" in check.detail


def test_the_cli_says_which_files_uninstall_removed_and_which_it_rewrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Uninstall deletes a file left with nothing but our entries (Zed's new settings.json)
    and edits one that holds more (VS Code's mcp.json with another server): its output must
    say "removed" for the first, not "wrote" a file that is gone."""
    from click.testing import CliRunner

    from mtl_mcp.cli import cli

    home = tmp_path / "user"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("MTL_MCP_STARTER", "0")
    vscode = home / ".config" / "Code" / "User" / "mcp.json"
    vscode.parent.mkdir(parents=True)
    vscode.write_text('{"servers": {"other": {"command": "other-server"}}}\n')
    runner = CliRunner()
    for client in ("zed", "vscode"):
        assert runner.invoke(cli, ["install", client]).exit_code == 0
    zed = home / ".config" / "zed" / "settings.json"
    assert zed.is_file()

    gone, kept = (runner.invoke(cli, ["uninstall", client]) for client in ("zed", "vscode"))

    assert gone.exit_code == 0 and kept.exit_code == 0, (gone.output, kept.output)
    assert not zed.exists() and vscode.is_file()
    assert f"removed {zed}" in gone.stdout and f"wrote {zed}" not in gone.stdout
    assert f"wrote {vscode}" in kept.stdout and "removed" not in kept.stdout
