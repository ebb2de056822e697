"""The assistant CLIs a trial can drive, one adapter each.

base         what every adapter does: find the client, check its login, the throwaway
             home, the installer, the session's environment, reading its JSON output
claude_code  Claude Code (`claude -p --output-format stream-json`)
gemini_cli   Gemini CLI (`gemini -p -o json`)
others       Codex, opencode, Copilot CLI
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from mtl_mcp.errors import InputError
from mtl_mcp.trials.clients.base import ClientAdapter, SessionUsage
from mtl_mcp.trials.clients.claude_code import ClaudeCodeClient
from mtl_mcp.trials.clients.gemini_cli import GeminiCliClient
from mtl_mcp.trials.clients.others import CodexClient, CopilotClient, OpencodeClient

ADAPTERS: dict[str, type[ClientAdapter]] = {
    adapter.name: adapter
    for adapter in (ClaudeCodeClient, CodexClient, GeminiCliClient, OpencodeClient, CopilotClient)
}
TRIAL_CLIENTS: tuple[str, ...] = tuple(ADAPTERS)


def client_adapter(
    name: str,
    command: str | None = None,
    *,
    user_home: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> ClientAdapter:
    """The adapter of client `name`; InputError naming the clients a trial can drive."""
    import os

    if name not in ADAPTERS:
        raise InputError(f"a trial cannot drive {name!r}: use one of {', '.join(TRIAL_CLIENTS)}")
    return ADAPTERS[name](
        command=command,
        user_home=user_home or Path.home(),
        environ=dict(os.environ if environ is None else environ),
    )


__all__ = ["TRIAL_CLIENTS", "ClientAdapter", "SessionUsage", "client_adapter"]
