"""The real Codex CLI, for end-to-end tests, pointed at a `FakeOpenAI` on 127.0.0.1.

    codex = Codex.install(tmp_path, fake)   # npm package, pinned; throwaway HOME, logged in
    codex.command                            # the `codex` to give mtl-mcp
    codex.environment()                      # HOME, CODEX_HOME and the fake provider's key
    codex.hooks(cwd)                         # the hooks Codex sees, and whether it trusts them

The npm package ships a static native binary; it is installed once per machine into the
test cache (`tests.npm_clients` pins the version). A user's `codex exec` talks to their
login's provider; here `codex.command` is a two-line wrapper that adds, to `exec` only, a provider
whose base URL is the fake (`-c model_provider=...`, the one thing that differs from the
command line mtl-mcp builds), and passes everything else through unchanged. The login is
real: `codex login --with-api-key` with a dummy key, which `codex login status` reports.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.fake_openai import FakeOpenAI
from tests.npm_clients import CLIENTS, npm_binary

PROVIDER_KEY_ENV = "FAKE_OPENAI_API_KEY"


def codex_binary() -> Path:
    """The `codex` executable of the pinned version, installed from npm on first use."""
    return npm_binary(CLIENTS["codex"])


@dataclass
class Codex:
    """One user's Codex: the binary, a throwaway HOME and CODEX_HOME, the fake it talks to."""

    binary: Path
    home: Path
    command: Path
    fake: FakeOpenAI

    @property
    def codex_home(self) -> Path:
        return self.home / ".codex"

    @classmethod
    def install(cls, root: Path, fake: FakeOpenAI, *, logged_in: bool = True) -> Codex:
        home = root / "codex-user"
        (home / ".codex").mkdir(parents=True, exist_ok=True)
        binary = codex_binary()
        provider = (
            f'model_providers.fake={{name="Fake",base_url="{fake.base_url}",'
            f'wire_api="responses",env_key="{PROVIDER_KEY_ENV}",request_max_retries=0,'
            "stream_max_retries=0,stream_idle_timeout_ms=5000}"
        )
        real = shlex.quote(str(binary))
        command = root / "codex-bin" / "codex"
        command.parent.mkdir(parents=True, exist_ok=True)
        command.write_text(
            "#!/bin/sh\n"
            f'[ "$1" = exec ] && shift && exec {real} exec -c model_provider=fake '
            f'-c {shlex.quote(provider)} "$@"\n'
            f'exec {real} "$@"\n',
            encoding="utf-8",
        )
        command.chmod(command.stat().st_mode | stat.S_IXUSR)
        codex = cls(binary, home, command, fake)
        if logged_in:
            codex.run(["login", "--with-api-key"], stdin="sk-test-fake-0123456789")
        return codex

    def environment(self) -> dict[str, str]:
        """What Codex needs in its environment to be this user's, talking to the fake."""
        return {
            "HOME": str(self.home),
            "CODEX_HOME": str(self.codex_home),
            PROVIDER_KEY_ENV: "sk-test-fake-0123456789",
        }

    def hooks(self, cwd: Path) -> list[dict[str, Any]]:
        """The hooks Codex sees for `cwd`, with its own trust key, hash and status: the
        `hooks/list` of `codex app-server` (JSON-RPC over stdio, labelled experimental),
        which is what /hooks in the TUI shows."""
        client = {"clientInfo": {"name": "mtl-mcp-tests", "version": "0"}}
        messages = [
            {"id": 1, "method": "initialize", "params": client},
            {"method": "initialized"},
            {"id": 2, "method": "hooks/list", "params": {"cwds": [str(cwd)]}},
        ]
        server = subprocess.Popen(
            [str(self.command), "app-server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**os.environ, **self.environment()},
        )
        assert server.stdin is not None and server.stdout is not None
        try:
            server.stdin.write("".join(json.dumps(m) + "\n" for m in messages))
            server.stdin.flush()
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                line = server.stdout.readline()
                assert line, "codex app-server closed its output"
                answer = json.loads(line)
                if answer.get("id") == 2:
                    return [h for entry in answer["result"]["data"] for h in entry["hooks"]]
            raise AssertionError("codex app-server did not answer hooks/list")
        finally:
            server.kill()
            server.wait()

    def run(
        self, args: list[str], *, stdin: str = "", timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.command), *args],
            input=stdin,
            capture_output=True,
            text=True,
            env={**os.environ, **self.environment()},
            timeout=timeout,
            check=True,
        )
