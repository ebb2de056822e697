"""What gets installed where: the clients, how they start mtl-mcp, and their config files."""

from __future__ import annotations

import difflib
import os
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from mtl_mcp.errors import InputError

Client = Literal[
    "claude-code",
    "cursor",
    "codex",
    "claude-desktop",
    "gemini-cli",
    "opencode",
    "copilot-cli",
    "vscode",
    "windsurf",
    "zed",
]
InstallScope = Literal["user", "project"]
CLIENTS: tuple[Client, ...] = get_args(Client)
SCOPES: tuple[InstallScope, ...] = get_args(InstallScope)
SERVER_NAME = "mtl-mcp"
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
    # Claude Code: which of settings.json's permission rules install added (see plans)
    permissions_record: Path | None = None
    # Codex: the user's config.toml, the only file whose trust in hooks Codex reads
    trust: Path | None = None
    # Gemini CLI: the user's policy file allowing the read-only tools (a file install owns)
    policy: Path | None = None
    # opencode: the plugin file that runs the session hooks (a file install owns)
    plugin: Path | None = None


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
        claude = (user_home if user else project_dir) / ".claude"
        return ConfigPaths(mcp, claude / "settings.json", claude / "mtl-mcp-install.json")
    if client == "cursor":
        base = (user_home if user else project_dir) / ".cursor"
        return ConfigPaths(base / "mcp.json", base / "hooks.json")
    if client == "codex":
        base = (user_home if user else project_dir) / ".codex"
        trust = user_home / ".codex" / "config.toml"
        return ConfigPaths(base / "config.toml", base / "hooks.json", trust=trust)
    if client == "gemini-cli":
        gemini_home = gemini_user_home(user_home)
        settings = (gemini_home if user else project_dir) / ".gemini" / "settings.json"
        policy = gemini_home / ".gemini" / "policies" / "mtl-mcp.toml" if user else None
        return ConfigPaths(settings, settings, policy=policy)
    if client == "opencode":
        if user:
            base = _xdg_config(user_home) / "opencode"
            return ConfigPaths(_json_or_jsonc(base / "opencode.json"), None,
                               plugin=base / "plugin" / "mtl-mcp.js")  # fmt: skip
        plugin = project_dir / ".opencode" / "plugin" / "mtl-mcp.js"
        return ConfigPaths(_json_or_jsonc(project_dir / "opencode.json"), None, plugin=plugin)
    if client == "copilot-cli":
        if user:
            base = Path(os.environ.get("COPILOT_HOME") or user_home / ".copilot")
            return ConfigPaths(base / "mcp-config.json", base / "hooks" / "mtl-mcp.json")
        github = project_dir / ".github"  # not .mcp.json: that one is Claude Code's too
        return ConfigPaths(github / "mcp.json", github / "hooks" / "mtl-mcp.json")
    if client == "vscode":
        if not user:
            return ConfigPaths(project_dir / ".vscode" / "mcp.json", None)
        return ConfigPaths(_app_config(user_home, platform) / "Code" / "User" / "mcp.json", None)
    if client == "zed":
        base = _xdg_config(user_home) / "zed" if user else project_dir / ".zed"
        return ConfigPaths(base / "settings.json", None)
    if not user:
        names = {"windsurf": "Windsurf", "claude-desktop": "Claude Desktop"}
        raise InputError(
            f"{names[client]} has no project-level configuration: install it with the 'user' scope"
        )
    if client == "windsurf":
        return ConfigPaths(user_home / ".codeium" / "windsurf" / "mcp_config.json", None)
    return ConfigPaths(
        _app_config(user_home, platform) / "Claude" / "claude_desktop_config.json", None
    )


def gemini_user_home(user_home: Path) -> Path:
    """The folder holding Gemini CLI's user `.gemini` (GEMINI_CLI_HOME moves it)."""
    return Path(os.environ.get("GEMINI_CLI_HOME") or user_home)


def _app_config(user_home: Path, platform: str) -> Path:
    """Where desktop apps keep their settings: Application Support, AppData, ~/.config."""
    if platform == "darwin":
        return user_home / "Library" / "Application Support"
    if platform.startswith("win"):
        appdata = os.environ.get("APPDATA")
        return Path(appdata) if appdata else user_home / "AppData" / "Roaming"
    return _xdg_config(user_home)


def _xdg_config(user_home: Path) -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or user_home / ".config")


def _json_or_jsonc(path: Path) -> Path:
    """opencode reads opencode.json or opencode.jsonc: the one that exists (.json if none)."""
    jsonc = path.with_suffix(".jsonc")
    return jsonc if jsonc.exists() and not path.exists() else path
