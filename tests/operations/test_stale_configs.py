"""`doctor` names a client config an older install left: no plan hook, or another
`mtl-mcp` executable. Real config files in tmp_path, written by the real installers; the
older install is the installer without its tool-use hook, as 0.2 wrote Claude Code's, and
an install from another (older) installation's executable."""

from __future__ import annotations

from pathlib import Path

import pytest

from mtl_mcp.config import load_settings
from mtl_mcp.operations.doctor import _client_configs
from mtl_mcp.operations.install import json_configs
from mtl_mcp.operations.install.plans import apply, plan_install
from mtl_mcp.operations.install.stale import installed_configs
from mtl_mcp.operations.install.targets import CLIENTS, Client, Launch

NOW = Launch("/home/me/.mtl-mcp/bin/mtl-mcp")
OLD = Launch("/home/me/old-mtl-mcp/bin/mtl-mcp")
# The clients whose installer writes hooks (opencode's are its plugin); the others get the
# server entry only.
HOOKED: list[Client] = ["claude-code", "cursor", "codex", "gemini-cli", "opencode", "copilot-cli"]
HOOK_TABLES = ("_CLAUDE_EVENTS", "CODEX_EVENTS", "_GEMINI_EVENTS", "_CURSOR_EVENTS")


@pytest.fixture
def dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    home, project = tmp_path / "user", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    for name in ("XDG_CONFIG_HOME", "COPILOT_HOME", "GEMINI_CLI_HOME"):
        monkeypatch.delenv(name, raising=False)
    return {"user_home": home, "project_dir": project}


def install(client: Client, launch: Launch, dirs: dict[str, Path], **kw: object) -> None:
    apply(plan_install(client, "user", launch, platform="linux", **dirs, **kw))  # type: ignore[arg-type]


def test_nothing_installed_is_nothing_to_report(dirs: dict[str, Path]) -> None:
    assert installed_configs(NOW, **dirs) == []


@pytest.mark.parametrize("client", CLIENTS)
def test_an_install_of_this_version_is_up_to_date(client: Client, dirs: dict[str, Path]) -> None:
    install(client, NOW, dirs)
    [found] = installed_configs(NOW, **dirs)
    assert (found.client, found.scope, found.stale) == (client, "user", [])


@pytest.mark.parametrize("client", CLIENTS)
def test_a_config_that_starts_another_installation_is_named_with_the_fix(
    client: Client, dirs: dict[str, Path]
) -> None:
    install(client, OLD, dirs)
    [found] = installed_configs(NOW, **dirs)
    assert found.stale and found.fix == f"mtl-mcp install {client}"
    assert any(f"another mtl-mcp than this one ({NOW.command})" in p for p in found.problems)


@pytest.mark.parametrize("client", [c for c in HOOKED if c != "opencode"])
def test_hooks_without_the_plan_hook_are_named_with_the_fix(
    client: Client, dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Installed as 0.2 did (session hooks, no tool-use hook): plan-triggered recall is off
    until the user installs again, and doctor says so; installing again clears it."""
    for table in (*HOOK_TABLES, "_COPILOT_EVENTS"):
        events = getattr(json_configs, table)
        older = {event: spec for event, spec in events.items() if spec[0] != "tool-use"}
        monkeypatch.setattr(json_configs, table, older)
    install(client, NOW, dirs)
    monkeypatch.undo()
    [found] = installed_configs(NOW, **dirs)
    assert found.stale
    assert any("no plan-triggered recall hook" in p for p in found.problems), found.problems
    install(client, NOW, dirs)
    assert [f.stale for f in installed_configs(NOW, **dirs)] == [[]]


@pytest.mark.parametrize("client", HOOKED)
def test_an_install_without_hooks_is_not_asked_to_add_them(
    client: Client, dirs: dict[str, Path]
) -> None:
    """`install --no-hooks` was the user's choice: still up to date."""
    install(client, NOW, dirs, hooks=False)
    assert [f.stale for f in installed_configs(NOW, **dirs)] == [[]]


def test_doctor_has_a_check_per_stale_client_and_one_for_the_rest(
    dirs: dict[str, Path], tmp_path: Path
) -> None:
    settings = load_settings(tmp_path / "data")
    from mtl_mcp.operations.install.stale import install_launch

    now = install_launch(settings.home)
    install("claude-code", now, dirs)
    install("cursor", OLD, dirs)
    checks = {c.name: c for c in _client_configs(settings, **dirs)}
    assert checks["client configs"].ok and "claude-code (user)" in checks["client configs"].detail
    cursor = checks["cursor config"]
    assert not cursor.ok and not cursor.required
    assert cursor.fix and "`mtl-mcp install cursor` again" in cursor.fix
