"""The real GitHub Copilot CLI, for end-to-end tests, pointed at a `FakeChatStream` on
127.0.0.1 in its bring-your-own-key mode (no GitHub login).

    copilot = CopilotCli.install(tmp_path)          # npm package, pinned; throwaway HOME
    copilot.run(["mcp", "get", "mtl-mcp"], cwd=project)
    copilot.run(["-p", "fix it"], cwd=project, fake=fake)

The npm package ships a native binary per platform; it is installed once per machine into
the test cache (see `tests.npm_clients`). `COPILOT_PROVIDER_BASE_URL` and
`COPILOT_PROVIDER_API_KEY` name the fake as the model provider: the one thing that differs
from a user signed in to GitHub.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.fake_chat_stream import FakeChatStream
from tests.npm_clients import CLIENTS, npm_binary


def copilot_binary() -> Path:
    """The `copilot` executable of the pinned version, installed from npm on first use."""
    return npm_binary(CLIENTS["copilot"])


@dataclass
class CopilotCli:
    """One user's Copilot CLI: the binary and a throwaway HOME (and so ~/.copilot)."""

    binary: Path
    home: Path

    @property
    def copilot_home(self) -> Path:
        return self.home / ".copilot"

    @classmethod
    def install(cls, root: Path) -> CopilotCli:
        home = root / "copilot-user"
        home.mkdir(parents=True, exist_ok=True)
        return cls(copilot_binary(), home)

    def run(
        self,
        args: list[str],
        *,
        cwd: Path,
        fake: FakeChatStream | None = None,
        timeout: float = 180,
    ) -> subprocess.CompletedProcess[str]:
        environment = {k: v for k, v in os.environ.items() if not k.startswith("COPILOT_")}
        environment |= {"HOME": str(self.home), "PWD": str(cwd), "NO_COLOR": "1"}
        if fake is not None:
            environment |= {
                "COPILOT_PROVIDER_BASE_URL": fake.base_url,
                "COPILOT_PROVIDER_API_KEY": "sk-fake",
                "COPILOT_MODEL": fake.model,
            }
        return subprocess.run(
            [str(self.binary), *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            env=environment,
            timeout=timeout,
        )
