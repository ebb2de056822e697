"""The scripted agent `stub_agent.sh` as the trial's client: it speaks Claude Code's command
line, so the harness drives it through the real Claude Code adapter (throwaway home,
mtl-mcp installed there for the memory arms, its own process group, the time limit, the
hidden verifier, the JSON it reads), but a session costs a fraction of a second. Everything
but the model and the client is the real harness: the tests exercise it, not a mock of it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mtl_mcp.trials.clients.claude_code import ClaudeCodeClient

AGENT = Path(__file__).with_name("stub_agent.sh")
STUB_COMMAND = f"sh {AGENT}"


@dataclass
class StubClient(ClaudeCodeClient):
    """Claude Code's adapter, starting the stub; it never calls the memory, so the trial
    starts no service for it (the library tests that run many trials need the speed)."""

    uses_service = False

    def __post_init__(self) -> None:
        self.command = self.command or STUB_COMMAND
