"""Installers of Gemini CLI, opencode, Copilot CLI, VS Code, Windsurf and Zed: real config files
in tmp_path (their real binaries: tests/frontdoors/test_clients_real.py)."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from mtl_mcp.errors import ConfigError, InputError
from mtl_mcp.operations.install.json_text import parse
from mtl_mcp.operations.install.plans import apply, gemini_trust, plan_install, plan_uninstall
from mtl_mcp.operations.install.targets import Client, InstallScope, Launch, config_paths

EXE = "/opt/my tools/bin/mtl-mcp"
LAUNCH = Launch(EXE, env={"MTL_MCP_HOME": "/data/mtl home"})
COMBOS: list[tuple[Client, InstallScope]] = [
    ("gemini-cli", "user"),
    ("gemini-cli", "project"),
    ("opencode", "user"),
    ("opencode", "project"),
    ("copilot-cli", "user"),
    ("copilot-cli", "project"),
    ("vscode", "user"),
    ("vscode", "project"),
    ("windsurf", "user"),
    ("zed", "user"),
    ("zed", "project"),
]
BACKUP = re.compile(r"\.mtl-mcp-backup-\d{14}(-\d+)?$")
SERVERS_KEY = {"vscode": "servers", "opencode": "mcp", "zed": "context_servers"}


@pytest.fixture
def dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    for name in ("XDG_CONFIG_HOME", "COPILOT_HOME", "APPDATA", "GEMINI_CLI_HOME"):
        monkeypatch.delenv(name, raising=False)
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    return {"user_home": home, "project_dir": project}


def install(client: Client, scope: InstallScope, dirs: dict[str, Path], **kw: Any) -> Any:
    plan = plan_install(client, scope, LAUNCH, platform="linux", **dirs, **kw)
    apply(plan)
    return plan


def uninstall(client: Client, scope: InstallScope, dirs: dict[str, Path]) -> Any:
    plan = plan_uninstall(client, scope, platform="linux", **dirs)
    apply(plan)
    return plan


def files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and not BACKUP.search(p.name)
    }


@pytest.mark.parametrize(
    ("client", "scope", "mcp", "hooks", "owned"),
    [
        ("gemini-cli", "user", "H/.gemini/settings.json", "H/.gemini/settings.json",
         "H/.gemini/policies/mtl-mcp.toml"),
        ("gemini-cli", "project", "P/.gemini/settings.json", "P/.gemini/settings.json", None),
        ("opencode", "user", "H/.config/opencode/opencode.json", None,
         "H/.config/opencode/plugin/mtl-mcp.js"),
        ("opencode", "project", "P/opencode.json", None, "P/.opencode/plugin/mtl-mcp.js"),
        ("copilot-cli", "user", "H/.copilot/mcp-config.json", "H/.copilot/hooks/mtl-mcp.json",
         None),
        ("copilot-cli", "project", "P/.github/mcp.json", "P/.github/hooks/mtl-mcp.json", None),
        ("vscode", "user", "H/.config/Code/User/mcp.json", None, None),
        ("vscode", "project", "P/.vscode/mcp.json", None, None),
        ("windsurf", "user", "H/.codeium/windsurf/mcp_config.json", None, None),
        ("zed", "user", "H/.config/zed/settings.json", None, None),
        ("zed", "project", "P/.zed/settings.json", None, None),
    ],
)  # fmt: skip
def test_config_paths_per_client_and_scope(
    client: Client,
    scope: InstallScope,
    mcp: str,
    hooks: str | None,
    owned: str | None,
    dirs: dict[str, Path],
) -> None:
    def where(spec: str | None) -> Path | None:
        if spec is None:
            return None
        return (dirs["user_home"] if spec[0] == "H" else dirs["project_dir"]) / spec[2:]

    paths = config_paths(client, scope, platform="linux", **dirs)
    assert (paths.mcp, paths.hooks, paths.policy or paths.plugin) == (
        where(mcp),
        where(hooks),
        where(owned),
    )


def test_config_paths_follow_the_clients_environment(
    dirs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("COPILOT_HOME", str(tmp_path / "cop"))
    assert config_paths("zed", "user", **dirs).mcp == tmp_path / "xdg/zed/settings.json"
    assert config_paths("copilot-cli", "user", **dirs).mcp == tmp_path / "cop/mcp-config.json"
    mac = config_paths("vscode", "user", platform="darwin", **dirs).mcp
    assert mac == dirs["user_home"] / "Library/Application Support/Code/User/mcp.json"
    jsonc = dirs["project_dir"] / "opencode.jsonc"
    jsonc.write_text("{}")
    assert config_paths("opencode", "project", **dirs).mcp == jsonc


def test_windsurf_has_no_project_scope(dirs: dict[str, Path]) -> None:
    with pytest.raises(InputError, match="Windsurf has no project-level configuration"):
        plan_install("windsurf", "project", LAUNCH, **dirs)


def server_of(client: Client, scope: InstallScope, dirs: dict[str, Path]) -> Any:
    doc = parse(config_paths(client, scope, platform="linux", **dirs).mcp.read_text())
    return doc[SERVERS_KEY.get(client, "mcpServers")]["mtl-mcp"]


@pytest.mark.parametrize(("client", "scope"), COMBOS)
def test_install_registers_the_server_in_the_shape_each_client_reads(
    client: Client, scope: InstallScope, dirs: dict[str, Path]
) -> None:
    plan = install(client, scope, dirs)
    server = server_of(client, scope, dirs)
    env = {"MTL_MCP_HOME": "/data/mtl home"}
    expected = {
        "opencode": {
            "type": "local",
            "command": [EXE, "serve"],
            "environment": env,
            "enabled": True,
        },
        "copilot-cli": {
            "type": "local",
            "command": EXE,
            "args": ["serve"],
            "env": env,
            "tools": ["*"],
        },
        "vscode": {"type": "stdio", "command": EXE, "args": ["serve"], "env": env},
    }.get(client, {"command": EXE, "args": ["serve"], "env": env})
    assert server == expected
    assert plan.notes


def hook_commands(doc: dict[str, Any], key: str = "command") -> dict[str, list[list[str]]]:
    found: dict[str, list[list[str]]] = {}
    for event, items in doc["hooks"].items():
        handlers = [h for item in items for h in item.get("hooks", [item])]
        found[event] = [shlex.split(h[key]) for h in handlers]
    return found


def ours(arg: str) -> list[str]:
    return ["env", "MTL_MCP_HOME=/data/mtl home", EXE, "hook", arg]


@pytest.mark.parametrize("scope", ["user", "project"])
def test_gemini_gets_its_hooks_in_settings_and_a_policy_for_the_read_only_tools(
    scope: InstallScope, dirs: dict[str, Path]
) -> None:
    plan = install("gemini-cli", scope, dirs)
    paths = config_paths("gemini-cli", scope, **dirs)
    settings = json.loads(paths.mcp.read_text())
    assert hook_commands(settings) == {
        "SessionEnd": [ours("session-end")],
        "SessionStart": [ours("session-start")],
        "AfterTool": [ours("tool-use")],
    }
    handler = settings["hooks"]["AfterTool"][0]["hooks"][0]
    assert handler["type"] == "command" and handler["timeout"] == 5000  # milliseconds
    assert handler["name"] == "mtl-mcp tool-use"
    [trust] = [n for n in plan.notes if "Trust folder" in n]
    assert "Install does not trust" in trust and "mtl-mcp doctor" in trust
    assert not (dirs["user_home"] / ".gemini/trustedFolders.json").exists()
    if scope == "project":
        assert paths.policy is None
        assert any("reads no project policies" in n for n in plan.notes)
        return
    assert paths.policy is not None
    policy = paths.policy.read_text()
    import tomllib

    rules = tomllib.loads(policy)["rule"]
    assert [(r["mcpName"], r["toolName"], r["decision"]) for r in rules] == [
        ("mtl-mcp", "recall_insights", "allow"),
        ("mtl-mcp", "list_memories", "allow"),
    ]


def test_gemini_trust_is_read_as_gemini_reads_it(dirs: dict[str, Path], tmp_path: Path) -> None:
    home, project = dirs["user_home"], dirs["project_dir"]
    assert gemini_trust(home, project) == "unknown"
    trusted = home / ".gemini/trustedFolders.json"
    trusted.parent.mkdir(parents=True)
    trusted.write_text(json.dumps({str(project): "TRUST_FOLDER"}))
    assert gemini_trust(home, project) == "trusted"
    assert gemini_trust(home, project / "sub") == "trusted"
    trusted.write_text(json.dumps({str(project / "x"): "TRUST_PARENT"}))
    assert gemini_trust(home, project) == "trusted"
    trusted.write_text(json.dumps({str(tmp_path): "TRUST_FOLDER", str(project): "DO_NOT_TRUST"}))
    assert gemini_trust(home, project) == "untrusted"
    plan = plan_install("gemini-cli", "user", LAUNCH, **dirs)
    assert any(f"Gemini CLI does not trust {project}" in n for n in plan.notes)


@pytest.mark.parametrize("scope", ["user", "project"])
def test_copilot_gets_a_hook_file_of_its_own(scope: InstallScope, dirs: dict[str, Path]) -> None:
    install("copilot-cli", scope, dirs)
    paths = config_paths("copilot-cli", scope, **dirs)
    assert paths.hooks is not None
    doc = json.loads(paths.hooks.read_text())
    assert doc["version"] == 1
    assert hook_commands(doc, "bash") == {
        "sessionEnd": [ours("session-end")],
        "sessionStart": [ours("session-start")],
        "postToolUse": [ours("tool-use")],
    }
    assert all(
        h["type"] == "command" and h["timeoutSec"] for hs in doc["hooks"].values() for h in hs
    )


@pytest.mark.parametrize("scope", ["user", "project"])
def test_opencode_gets_the_plugin_with_this_command_line(
    scope: InstallScope, dirs: dict[str, Path]
) -> None:
    plan = install("opencode", scope, dirs)
    plugin = config_paths("opencode", scope, **dirs).plugin
    assert plugin is not None
    text = plugin.read_text()
    assert text.startswith("// Written by `mtl-mcp install opencode`")
    assert f"const MTL_MCP = {json.dumps([EXE])}" in text
    assert 'const MTL_MCP_ENV = {"MTL_MCP_HOME": "/data/mtl home"}' in text
    assert "__MTL_MCP" not in text
    assert any("plugin" in n and "npm" in n for n in plan.notes)
    node = shutil.which("node")
    if node:  # the plugin is an ES module opencode can load
        module = plugin.with_suffix(".mjs")
        module.write_text(text)
        subprocess.run([node, "--check", str(module)], check=True, capture_output=True)
        module.unlink()


@pytest.mark.parametrize("client", ["vscode", "windsurf", "zed"])
def test_clients_without_session_hooks_name_the_fallback(
    client: Client, dirs: dict[str, Path]
) -> None:
    plan = install(client, "user", dirs)
    [note] = [n for n in plan.notes if "record_session" in n]
    assert "no capture at session end" in note and "recall_insights" in note


def test_no_hooks_leaves_out_hooks_and_plugin_but_keeps_the_server(
    dirs: dict[str, Path],
) -> None:
    for client in ("gemini-cli", "opencode", "copilot-cli"):
        plan = install(client, "project", dirs, hooks=False)
        assert any("Session hooks were not installed" in n for n in plan.notes)
    assert "hooks" not in json.loads((dirs["project_dir"] / ".gemini/settings.json").read_text())
    assert not (dirs["project_dir"] / ".opencode").exists()
    assert not (dirs["project_dir"] / ".github/hooks").exists()
    assert (dirs["project_dir"] / ".github/mcp.json").is_file()


# Configs as people keep them: another server, other settings, 4-space or tab indents,
# and, where the client reads JSONC, comments and trailing commas.
SEEDS: dict[Client, str] = {
    "gemini-cli": """{
    // my Gemini settings
    "theme": "GitHub",
    "mcpServers": {
        "github": {"command": "gh-mcp", "args": ["x"]}
    },
    "hooks": {
        "AfterTool": [{"matcher": "write_file", "hooks": [{"type": "command", "command": "lint"}]}]
    },
}
""",
    "opencode": """{
  "$schema": "https://opencode.ai/config.json",
  /* providers */
  "model": "anthropic/claude",
  "mcp": {"other": {"type": "local", "command": ["other"]}}
}
""",
    "copilot-cli": '{\n\t"mcpServers": {\n\t\t"gh": {"type": "local", "command": "gh"}\n\t}\n}\n',
    "vscode": """{
    // Servers for this workspace
    "inputs": [],
    "servers": {
        "fetch": {"type": "stdio", "command": "uvx", "args": ["mcp-server-fetch"]}
    }
}
""",
    "windsurf": '{"mcpServers": {"a": {"command": "a"}}, "x": 1}',
    "zed": """// Zed settings
//
// For information on how to configure Zed, see the Zed
// documentation: https://zed.dev/docs/configuring-zed
{
  "ui_font_size": 16,
  "buffer_font_size": 15,
  "theme": {
    "mode": "system",
    "light": "One Light",
    "dark": "One Dark"
  },
}
""",
}
COPILOT_HOOKS = '{\n  "version": 1,\n  "hooks": {\n    "sessionEnd": [{"type": "command", "bash": "./audit.sh"}]\n  }\n}\n'  # noqa: E501


def seed(client: Client, scope: InstallScope, dirs: dict[str, Path]) -> dict[Path, bytes]:
    paths = config_paths(client, scope, platform="linux", **dirs)
    seeded = {paths.mcp: SEEDS[client]}
    if client == "copilot-cli" and paths.hooks is not None:
        seeded[paths.hooks] = COPILOT_HOOKS
    for path, text in seeded.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return {path: text.encode() for path, text in seeded.items()}


@pytest.mark.parametrize(("client", "scope"), COMBOS)
def test_install_then_uninstall_gives_back_the_same_bytes(
    client: Client, scope: InstallScope, dirs: dict[str, Path], tmp_path: Path
) -> None:
    seeded = seed(client, scope, dirs)
    before = files(tmp_path)
    install(client, scope, dirs)
    for path, original in seeded.items():
        text = path.read_text()
        assert "mtl-mcp" in text
        head = original.decode().splitlines()[:2]  # comments and all, untouched
        assert text.splitlines()[:2] == head or len(head) == 1
    server = server_of(client, scope, dirs)
    assert server.get("env", server.get("environment")) == {"MTL_MCP_HOME": "/data/mtl home"}
    assert plan_install(client, scope, LAUNCH, platform="linux", **dirs).changes == []
    uninstall(client, scope, dirs)
    assert files(tmp_path) == before
    assert plan_uninstall(client, scope, platform="linux", **dirs).changes == []


@pytest.mark.parametrize(("client", "scope"), COMBOS)
def test_a_plan_is_a_diff_and_apply_backs_up_what_existed(
    client: Client, scope: InstallScope, dirs: dict[str, Path], tmp_path: Path
) -> None:
    seeded = seed(client, scope, dirs)
    before = files(tmp_path)
    plan = plan_install(client, scope, LAUNCH, platform="linux", **dirs)
    assert files(tmp_path) == before  # planning writes nothing
    diff = "".join(change.diff() for change in plan.changes)
    assert '"mtl-mcp"' in diff and "+++ " in diff
    backups = apply(plan)
    assert sorted(b.read_bytes() for b in backups) == sorted(seeded.values())


@pytest.mark.parametrize(("client", "scope"), COMBOS)
def test_uninstall_removes_every_file_install_created(
    client: Client, scope: InstallScope, dirs: dict[str, Path], tmp_path: Path
) -> None:
    install(client, scope, dirs)
    uninstall(client, scope, dirs)
    assert files(tmp_path) == {}


def test_a_file_install_would_own_but_the_user_wrote_is_left_alone(
    dirs: dict[str, Path],
) -> None:
    policy = dirs["user_home"] / ".gemini/policies/mtl-mcp.toml"
    policy.parent.mkdir(parents=True)
    policy.write_text("# mine\n")
    with pytest.raises(ConfigError, match="was not written by mtl-mcp"):
        plan_install("gemini-cli", "user", LAUNCH, **dirs)
    policy.unlink()
    install("opencode", "project", dirs)
    plugin = dirs["project_dir"] / ".opencode/plugin/mtl-mcp.js"
    plugin.write_text("// my own now\n")
    plan = uninstall("opencode", "project", dirs)
    assert plugin.read_text() == "// my own now\n"
    assert any(f"Kept {plugin}" in n for n in plan.notes)


def test_jsonc_is_refused_where_the_client_reads_plain_json(dirs: dict[str, Path]) -> None:
    path = config_paths("windsurf", "user", **dirs).mcp
    path.parent.mkdir(parents=True)
    path.write_text('{"mcpServers": {}, // no\n}')
    with pytest.raises(ConfigError, match="is not valid JSON"):
        plan_install("windsurf", "user", LAUNCH, **dirs)


def test_a_reinstall_with_another_executable_replaces_only_our_entries(
    dirs: dict[str, Path],
) -> None:
    seed("zed", "user", dirs)
    install("zed", "user", dirs)
    plan = plan_install("zed", "user", Launch("/new/mtl-mcp"), platform="linux", **dirs)
    apply(plan)
    assert server_of("zed", "user", dirs) == {
        "command": "/new/mtl-mcp",
        "args": ["serve"],
        "env": {},
    }
    text = config_paths("zed", "user", **dirs).mcp.read_text()
    assert text.startswith("// Zed settings\n") and '"ui_font_size": 16' in text
