"""The real Claude Code CLI, for end-to-end tests, pointed at a `FakeAnthropic` on 127.0.0.1.

    claude = ClaudeCode.install(tmp_path, fake)      # npm package, pinned; throwaway HOME
    result = claude.run(["-p", "fix the bug"], cwd=project)
    fake.message_requests[0].body                      # what Claude Code sent the model

The npm package ships its native binary; it is installed once per machine into the test
cache and reused (`tests.npm_clients`, which pins the version). Nothing here reaches the
network but the npm registry at install time and 127.0.0.1 afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.fake_anthropic import FakeAnthropic
from tests.npm_clients import CLIENTS, npm_binary


def claude_binary() -> Path:
    """The `claude` executable of the pinned version, installed from npm on first use."""
    return npm_binary(CLIENTS["claude-code"])


@dataclass
class ClaudeCode:
    """One user's Claude Code: the binary, a throwaway HOME, and the fake API it talks to."""

    binary: Path
    home: Path
    fake: FakeAnthropic
    env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def install(cls, root: Path, fake: FakeAnthropic, **env: str) -> ClaudeCode:
        home = root / "claude-home"
        home.mkdir(parents=True, exist_ok=True)
        return cls(claude_binary(), home, fake, dict(env))

    def environment(self, **extra: str) -> dict[str, str]:
        """What the CLI runs with: the fake API, no retries, no traffic but the fake's."""
        # Our own venv's `mtl-mcp` first on PATH, as after `pip install` into it.
        path = os.pathsep.join(
            [str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"]
        )
        return {
            "PATH": path,
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "ANTHROPIC_BASE_URL": self.fake.base_url,
            "ANTHROPIC_API_KEY": "sk-ant-test-dummy-key",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "CLAUDE_CODE_MAX_RETRIES": "0",
            **self.env,
            **extra,
        }

    def run(
        self,
        args: list[str],
        *,
        cwd: Path,
        stdin: str = "",
        timeout: float = 180,
        **env: str,
    ) -> subprocess.CompletedProcess[str]:
        cwd.mkdir(parents=True, exist_ok=True)
        return subprocess.run(
            [str(self.binary), *args],
            input=stdin,
            capture_output=True,
            text=True,
            cwd=cwd,
            env=self.environment(**env),
            timeout=timeout,
        )

    def settings(self) -> dict[str, Any]:
        """The user's ~/.claude/settings.json as it is now."""
        path = self.home / ".claude" / "settings.json"
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}

    def update_settings(self, **values: Any) -> None:
        """Set top-level keys of the user's ~/.claude/settings.json, keeping the others."""
        path = self.home / ".claude" / "settings.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({**self.settings(), **values}, indent=2), encoding="utf-8")
