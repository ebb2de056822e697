"""The real Gemini CLI, for end-to-end tests, pointed at a `FakeGemini` on 127.0.0.1.

    gemini = GeminiCli.install(tmp_path)          # npm package, pinned; throwaway HOME
    gemini.trust(project)                          # what the user's 'Trust folder' writes
    gemini.run(["mcp", "list"], cwd=project)       # the CLI, as the user runs it
    gemini.run(["-p", "fix it"], cwd=project, fake=fake)   # a session against the fake

The npm package is a bundle of JavaScript run by `node`; it is installed once per machine
into the test cache (see `tests.npm_clients`). The user's settings pick the
API-key login and turn off telemetry and update checks; `GOOGLE_GEMINI_BASE_URL` points the
client at the fake, the one thing that differs from a real user's setup.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.fake_gemini import FakeGemini
from tests.npm_clients import CLIENTS, npm_binary

SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
}


def gemini_script() -> Path:
    """The `gemini` bundle of the pinned version, installed from npm on first use."""
    return npm_binary(CLIENTS["gemini-cli"])


@dataclass
class GeminiCli:
    """One user's Gemini CLI: the bundle, node, and a throwaway HOME with their settings."""

    script: Path
    node: str
    home: Path

    @property
    def settings(self) -> Path:
        return self.home / ".gemini" / "settings.json"

    @classmethod
    def install(cls, root: Path) -> GeminiCli:
        node = shutil.which("node")
        assert node, "node is needed to run Gemini CLI for the end-to-end tests"
        home = root / "gemini-user"
        (home / ".gemini").mkdir(parents=True, exist_ok=True)
        gemini = cls(gemini_script(), node, home)
        gemini.settings.write_text(json.dumps(SETTINGS, indent=2) + "\n", encoding="utf-8")
        return gemini

    def trust(self, folder: Path) -> None:
        """What choosing 'Trust folder' in Gemini's dialog records (trustedFolders.json)."""
        path = self.home / ".gemini" / "trustedFolders.json"
        rules = json.loads(path.read_text()) if path.exists() else {}
        rules[str(folder)] = "TRUST_FOLDER"
        path.write_text(json.dumps(rules, indent=2), encoding="utf-8")

    def environment(self, fake: FakeGemini | None = None) -> dict[str, str]:
        env = {"HOME": str(self.home), "GEMINI_CLI_NO_RELAUNCH": "1", "NO_COLOR": "1"}
        if fake is not None:
            env |= {"GEMINI_API_KEY": "fake-key", "GOOGLE_GEMINI_BASE_URL": fake.base_url}
        return env

    def run(
        self, args: list[str], *, cwd: Path, fake: FakeGemini | None = None, timeout: float = 180
    ) -> subprocess.CompletedProcess[str]:
        environment = {k: v for k, v in os.environ.items() if not k.startswith("GEMINI_")}
        environment.pop("GOOGLE_GEMINI_BASE_URL", None)
        return subprocess.run(
            [self.node, str(self.script), *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            env={**environment, **self.environment(fake)},
            timeout=timeout,
        )
