"""A client adapter for the scripted agent `stub_agent.py`: the harness runs it as it runs a
real client (throwaway home, mtl-mcp installed there for the memory arms, its own process
group, the time limit, the hidden verifier), but a session costs milliseconds. Everything
but the client is the real harness: these tests exercise it, not a mock of it."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mtl_mcp.trials.clients.base import ClientAdapter, SessionUsage

AGENT = Path(__file__).with_name("stub_agent.py")


@dataclass
class StubClient(ClientAdapter):
    name = "claude-code"  # its throwaway home gets Claude Code's config from the installer
    label = "the stub agent"
    default_command = f"{sys.executable} {AGENT}"
    install_hint = "(a test fixture)"
    login_fix = "(a test fixture)"
    uses_service = False  # it never calls the memory: no service to warm

    def version(self, home: Path, env: Mapping[str, str]) -> str:
        return "stub 1.0"

    def check_login(self, home: Path, env: Mapping[str, str]) -> None:
        return None

    def session_args(self, prompt: str, model: str | None) -> list[str]:
        return [prompt]

    def parse(self, stdout: str, stderr: str) -> SessionUsage:
        lines = [line for line in stdout.splitlines() if line.startswith("{")]
        data = json.loads(lines[-1]) if lines else {"error": f"no output: {stderr[-200:]}"}
        return SessionUsage(
            tokens_in=data.get("tokens_in", 0),
            tokens_out=data.get("tokens_out", 0),
            turns=data.get("turns", 0),
            tool_calls=data.get("tool_calls", 0),
            session_id=data.get("session_id"),
            error=data.get("error"),
        )
