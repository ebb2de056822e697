"""The client adapters: what each reads from its client's output, and the throwaway home each
lays out. The outputs in tests/fixtures/trial_outputs/ were recorded from the real pinned
binaries (Claude Code 2.1.332, Gemini CLI 0.61.0, Codex 0.171.0, opencode 1.18.33, Copilot
CLI 1.0.102), each run headless against a fake model API for one tool call and an answer."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mtl_mcp.errors import InputError
from mtl_mcp.trials.clients import TRIAL_CLIENTS, client_adapter
from tests.trials.conftest import SECRET, files_containing

OUTPUTS = Path(__file__).resolve().parent.parent / "fixtures" / "trial_outputs"


@pytest.mark.parametrize(
    ("client", "recorded", "expected"),
    [
        # tokens in, tokens out, model turns, tool calls
        ("claude-code", "claude-code.jsonl", (200, 100, 2, 1)),
        ("gemini-cli", "gemini-cli.json", (300, 60, 2, 1)),
        ("codex", "codex-exec.jsonl", (2000, 100, 2, 1)),
        ("opencode", "opencode.jsonl", (200, 40, 2, 1)),
        ("copilot-cli", "copilot.jsonl", (0, 0, 2, 1)),  # it reports no tokens
    ],
)
def test_each_client_s_recorded_output_gives_tokens_turns_and_tool_calls(
    client: str, recorded: str, expected: tuple[int, int, int, int]
) -> None:
    usage = client_adapter(client).parse((OUTPUTS / recorded).read_text(), "")
    assert usage.error is None
    assert (usage.tokens_in, usage.tokens_out, usage.turns, usage.tool_calls) == expected
    assert usage.session_id


@pytest.mark.parametrize("client", TRIAL_CLIENTS)
def test_output_that_is_not_the_client_s_is_an_error_not_a_crash(client: str) -> None:
    usage = client_adapter(client).parse("Segmentation fault\n", "boom")
    assert usage.error  # an error, never a crash or a silent zero


def test_a_failed_claude_session_says_what_the_client_said() -> None:
    result = {"type": "result", "is_error": True, "result": "API Error: 529 overloaded"}
    usage = client_adapter("claude-code").parse(json.dumps(result), "")
    assert usage.error == "Claude Code: API Error: 529 overloaded"


def test_the_claude_home_links_the_login_and_copies_no_secret(
    tmp_path: Path, user_home: Path
) -> None:
    """The throwaway home's credential file is a symlink to the user's, the settings the
    login needs are carried over, the `env` of the user's settings reaches the session's
    environment and not a file; the user's own folder is not written."""
    settings = {
        "theme": "dark",
        "apiKeyHelper": "~/bin/key",
        "env": {"ANTHROPIC_AUTH_TOKEN": SECRET},
    }
    (user_home / ".claude" / "settings.json").write_text(json.dumps(settings))
    adapter = client_adapter("claude-code", user_home=user_home)
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    env = adapter.environment(home, tmp_path)
    adapter.prepare_home(home, work, env)
    link = home / ".claude" / ".credentials.json"
    assert link.is_symlink() and link.resolve() == (user_home / ".claude" / ".credentials.json")
    assert json.loads((home / ".claude" / "settings.json").read_text()) == {
        "apiKeyHelper": "~/bin/key"
    }
    assert env["ANTHROPIC_AUTH_TOKEN"] == SECRET and env["HOME"] == str(home)
    adapter.install_memory(home, work, tmp_path / "arm")
    assert "mtl-mcp" in json.loads((home / ".claude.json").read_text())["mcpServers"]
    assert files_containing(home, SECRET) == []  # the link is not followed: no copy


def test_the_session_environment_points_at_nothing_of_the_user_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    users = {
        "MTL_MCP_HOME": "/u/mtl",
        "MTL_MCP_STORE_URI": "s3://x",
        "CLAUDE_CONFIG_DIR": "/u/claude",
        "XDG_CONFIG_HOME": "/u/cfg",
        "GEMINI_CLI_HOME": "/u/g",
        "CODEX_HOME": "/u/codex",
    }
    for name, value in users.items():
        monkeypatch.setenv(name, value)
    env = client_adapter("gemini-cli").environment(tmp_path / "home", tmp_path / "tmp")
    assert not {k for k in env if k.startswith("MTL_MCP_")}
    assert not {"CLAUDE_CONFIG_DIR", "XDG_CONFIG_HOME", "GEMINI_CLI_HOME", "CODEX_HOME"} & set(env)
    assert env["HOME"] == str(tmp_path / "home") and env["TMPDIR"] == str(tmp_path / "tmp")


def test_the_installers_write_only_into_the_throwaway_home(
    tmp_path: Path, user_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even with the variables that move a client's config set to the user's folders, the
    memory arm's config lands in the throwaway home (and the variables are as they were)."""
    moved = tmp_path / "users-own-config"
    monkeypatch.setenv("GEMINI_CLI_HOME", str(moved))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(moved))
    for client in ("gemini-cli", "opencode", "codex", "copilot-cli", "claude-code"):
        home, work = tmp_path / client / "home", tmp_path / client / "work"
        home.mkdir(parents=True)
        work.mkdir()
        client_adapter(client, user_home=user_home).install_memory(home, work, tmp_path / "arm")
        assert any(home.rglob("*")), client
    assert not moved.exists()
    assert os.environ["GEMINI_CLI_HOME"] == str(moved)


def test_gemini_needs_its_login_or_key(tmp_path: Path, user_home: Path) -> None:
    adapter = client_adapter("gemini-cli", user_home=user_home, environ={"PATH": os.defpath})
    with pytest.raises(InputError, match="GEMINI_API_KEY is not set"):
        adapter.check_login(tmp_path, {})
    adapter.check_login(tmp_path, {"GEMINI_API_KEY": "k"})
    (user_home / ".gemini" / "settings.json").write_text(
        '{"security": {"auth": {"selectedType": "oauth-personal"}}}'
    )
    with pytest.raises(InputError, match="Login with Google"):
        adapter.check_login(tmp_path, {})
    (user_home / ".gemini" / "oauth_creds.json").write_text("{}")
    adapter.check_login(tmp_path, {})
    home = tmp_path / "home"
    env: dict[str, str] = {}
    adapter.prepare_home(home, tmp_path / "work", env)
    assert (home / ".gemini" / "oauth_creds.json").is_symlink()
    trusted = json.loads((home / ".gemini" / "trustedFolders.json").read_text())
    assert trusted == {str(tmp_path / "work"): "TRUST_FOLDER"}


def test_copilot_needs_a_token_in_the_environment(tmp_path: Path) -> None:
    adapter = client_adapter("copilot-cli")
    with pytest.raises(InputError, match="COPILOT_GITHUB_TOKEN"):
        adapter.check_login(tmp_path, {})
    adapter.check_login(tmp_path, {"GH_TOKEN": "t"})


def test_opencode_s_providers_travel_in_the_environment_not_a_file(
    tmp_path: Path, user_home: Path
) -> None:
    config = user_home / ".config" / "opencode" / "opencode.json"
    config.parent.mkdir(parents=True)
    provider = {"fake": {"options": {"apiKey": SECRET}}}
    config.write_text(json.dumps({"provider": provider, "model": "fake/m", "mcp": {"other": {}}}))
    adapter = client_adapter("opencode", user_home=user_home, environ={"PATH": os.defpath})
    adapter.check_login(tmp_path, {})
    env: dict[str, str] = {}
    home = tmp_path / "home"
    adapter.prepare_home(home, tmp_path, env)
    assert json.loads(env["OPENCODE_CONFIG_CONTENT"]) == {"provider": provider, "model": "fake/m"}
    assert not home.exists() or files_containing(home, SECRET) == []


def test_an_unknown_client_names_those_a_trial_can_drive() -> None:
    with pytest.raises(InputError, match="claude-code, codex, gemini-cli, opencode, copilot-cli"):
        client_adapter("cursor")
