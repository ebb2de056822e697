"""The real opencode, for end-to-end tests, pointed at a `FakeChatStream` on 127.0.0.1.

    opencode = Opencode.install(tmp_path)          # npm package, pinned; throwaway HOME
    opencode.use_fake(fake)                        # a custom OpenAI-compatible provider
    opencode.run(["mcp", "list"], cwd=project)

The npm package ships a native binary per platform; it is installed once per machine into
the test cache (see `tests.npm_clients`). opencode fetches the provider SDK it
is configured with, and the plugin SDK of a config folder with plugins, from the npm
registry on first use: its cache folder is kept in the test cache, so only the first run
downloads them.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.fake_chat_stream import FakeChatStream
from tests.npm_clients import CLIENTS, cache_dir, npm_binary


def opencode_binary() -> Path:
    """The `opencode` executable of the pinned version, installed from npm on first use."""
    return npm_binary(CLIENTS["opencode"])


@dataclass
class Opencode:
    """One user's opencode: the binary and a throwaway HOME."""

    binary: Path
    home: Path

    @property
    def config(self) -> Path:
        return self.home / ".config" / "opencode" / "opencode.json"

    @classmethod
    def install(cls, root: Path) -> Opencode:
        home = root / "opencode-user"
        home.mkdir(parents=True, exist_ok=True)
        return cls(opencode_binary(), home)

    def use_fake(self, fake: FakeChatStream) -> None:
        """The user's config names the fake as an OpenAI-compatible provider and model."""
        provider = {
            "npm": "@ai-sdk/openai-compatible",
            "name": "fake",
            "options": {"baseURL": fake.base_url, "apiKey": "sk-fake"},
            "models": {fake.model: {"name": fake.model, "tool_call": True}},
        }
        doc = json.loads(self.config.read_text()) if self.config.exists() else {}
        doc |= {
            "provider": {"fake": provider},
            "model": f"fake/{fake.model}",
            "small_model": f"fake/{fake.model}",
            "autoupdate": False,
            "share": "disabled",
        }
        self.config.parent.mkdir(parents=True, exist_ok=True)
        self.config.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")

    def environment(self) -> dict[str, str]:
        return {
            "HOME": str(self.home),
            "XDG_CACHE_HOME": str(cache_dir() / "opencode-cache"),
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "NO_COLOR": "1",
        }

    def run(
        self, args: list[str], *, cwd: Path, timeout: float = 180
    ) -> subprocess.CompletedProcess[str]:
        environment = {
            k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "OPENCODE"))
        }
        return subprocess.run(
            [str(self.binary), *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            env={**environment, **self.environment(), "PWD": str(cwd)},  # opencode reads PWD
            timeout=timeout,
        )
