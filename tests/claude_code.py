"""The real Claude Code CLI, for end-to-end tests, pointed at a `FakeAnthropic` on 127.0.0.1.

    claude = ClaudeCode.install(tmp_path, fake)      # npm package, pinned; throwaway HOME
    result = claude.run(["-p", "fix the bug"], cwd=project)
    fake.message_requests[0].body                      # what Claude Code sent the model

The npm package ships its native binary; it is installed once per machine into a cache
folder (`MTL_MCP_TEST_CACHE`, default `~/.cache/mtl-mcp-tests`) and reused. Nothing here
reaches the network but the npm registry at install time and 127.0.0.1 afterwards.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.fake_anthropic import FakeAnthropic

CLAUDE_CODE_VERSION = "2.1.332"
PACKAGE = "@anthropic-ai/claude-code"


def cache_dir() -> Path:
    return Path(os.environ.get("MTL_MCP_TEST_CACHE") or Path.home() / ".cache" / "mtl-mcp-tests")


def npm_binary(package: str, version: str, folder: str, binary_path: str) -> Path:
    """An executable from an npm package of a pinned version, installed on first use into
    `<cache>/<folder>`; `binary_path` is relative to the install's node_modules."""
    prefix = cache_dir() / folder
    binary = prefix / "node_modules" / binary_path
    if binary.is_file():
        return binary
    prefix.mkdir(parents=True, exist_ok=True)
    with (prefix.parent / f".{prefix.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # test processes installing at once install once
        if not binary.is_file():
            npm = shutil.which("npm")
            assert npm, f"npm is needed to install {package} for the end-to-end tests"
            subprocess.run(
                [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
                 "--loglevel=error", f"{package}@{version}"],
                check=True,
                timeout=600,
            )  # fmt: skip
    assert binary.is_file(), f"{package} installed no binary at {binary}"
    return binary


def claude_binary() -> Path:
    """The `claude` executable of the pinned version, installed from npm on first use."""
    return npm_binary(
        PACKAGE,
        CLAUDE_CODE_VERSION,
        f"claude-code-{CLAUDE_CODE_VERSION}",
        f"{PACKAGE}/bin/claude.exe",
    )


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
