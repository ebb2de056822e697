"""Client configs an older install left behind, as `mtl-mcp doctor` reports them.

A config written by an older `mtl-mcp install` keeps working in part: say, 0.2's Claude
Code install has the session hooks but not the tool-use hook, so plan-triggered recall
stays off; or it starts the `mtl-mcp` of another (older) installation. A config is stale
when installing again, as the user did (with hooks, or `--no-hooks`), would change it:
the same plan `install` makes, so every client and whatever a later release installs is
covered without a list of its own.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from mtl_mcp.config import platform_home
from mtl_mcp.errors import ConfigError, InputError
from mtl_mcp.operations.install.plans import plan_install, plan_uninstall
from mtl_mcp.operations.install.targets import (
    CLIENTS,
    SCOPES,
    Client,
    FileChange,
    InstallScope,
    Launch,
    config_paths,
    detect_launch,
)

# What an installed hook's command (or opencode's plugin) names: the hooks are there.
_HOOK_EVENTS = ("session-start", "session-end", "tool-use")


def install_launch(home: Path) -> Launch:
    """How `mtl-mcp install` has clients start this mtl-mcp for data directory `home`
    (clients start it with their own environment: a non-default one is passed)."""
    return detect_launch({} if home == platform_home() else {"MTL_MCP_HOME": str(home)})


@dataclass(frozen=True)
class Installed:
    """A client config that registers mtl-mcp, and what installing again would change."""

    client: Client
    scope: InstallScope
    stale: list[Path]  # the files install would change: none when it is up to date
    problems: list[str]  # what is missing or different, in the user's words

    @property
    def fix(self) -> str:
        scope = " --scope project" if self.scope == "project" else ""
        return f"mtl-mcp install {self.client}{scope}"


def installed_configs(launch: Launch, *, user_home: Path, project_dir: Path) -> list[Installed]:
    """Every client config of this user (and of `project_dir`) that registers mtl-mcp."""
    found = []
    for client in CLIENTS:
        for scope in SCOPES:
            try:
                ours = plan_uninstall(client, scope, user_home=user_home, project_dir=project_dir)
            except (InputError, ConfigError):  # no such scope, or a file install cannot read
                continue
            if not ours.changes:
                continue  # nothing of mtl-mcp in it
            with contextlib.suppress(InputError, ConfigError):  # install would say why
                found.append(_compare(client, scope, launch, user_home, project_dir, ours.changes))
    return found


def _compare(
    client: Client,
    scope: InstallScope,
    launch: Launch,
    user_home: Path,
    project_dir: Path,
    ours: list[FileChange],
) -> Installed:
    paths = config_paths(client, scope, user_home=user_home, project_dir=project_dir)
    hook_files = [path for path in (paths.hooks, paths.plugin) if path is not None]
    before = {change.path: change.before or "" for change in ours}
    hooks = any(event in before.get(path, "") for path in hook_files for event in _HOOK_EVENTS)
    plan = plan_install(
        client, scope, launch, hooks=hooks, user_home=user_home, project_dir=project_dir
    )
    problems = []
    for change in plan.changes:
        old, new = change.before or "", change.after or ""
        if hooks and "tool-use" in new and "tool-use" not in old:
            problems.append(f"{change.path} has no plan-triggered recall hook (tool-use)")
    if plan.changes and not any(launch.command in text for text in before.values()):
        problems.append(f"it starts another mtl-mcp than this one ({launch.command})")
    if plan.changes and not problems:
        problems.append("it is not what this version installs")
    return Installed(client, scope, [change.path for change in plan.changes], problems)
