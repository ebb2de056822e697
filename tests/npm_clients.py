"""The assistants' real CLIs the end-to-end tests drive: one pinned version each, from npm.

    npm_binary(CLIENTS["claude-code"])    # the executable, installed into the cache on first use
    python -m tests.npm_clients           # install them all now (scripts/dev-setup does)

This table is the one place a client's version is pinned. Each is installed once per machine
into `<cache>/<name>-<version>` (`MTL_MCP_TEST_CACHE`, default `~/.cache/mtl-mcp-tests`) and
reused; nothing here reaches the network but the npm registry at install time.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class NpmClient:
    """One client's npm package at its pinned version, and where its executable lands."""

    name: str
    package: str
    version: str
    binary_path: str  # relative to the install's node_modules

    @property
    def folder(self) -> str:
        return f"{self.name}-{self.version}"


CLIENTS = {
    client.name: client
    for client in (
        NpmClient(
            "claude-code", "@anthropic-ai/claude-code", "2.1.332",
            "@anthropic-ai/claude-code/bin/claude.exe",
        ),
        # The platform package npm installs beside the JS launcher; the launcher needs node,
        # this static binary not.
        NpmClient(
            "codex", "@openai/codex", "0.171.0",
            "@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex",
        ),
        # Gemini CLI is a JavaScript bundle run by node; opencode and Copilot CLI, like
        # Codex, ship a native binary in a platform package.
        NpmClient(
            "gemini-cli", "@google/gemini-cli", "0.61.0", "@google/gemini-cli/bundle/gemini.js"
        ),
        NpmClient("opencode", "opencode-ai", "1.18.33", "opencode-linux-x64/bin/opencode"),
        NpmClient("copilot", "@github/copilot", "1.0.102", "@github/copilot-linux-x64/copilot"),
    )
}  # fmt: skip


def cache_dir() -> Path:
    return Path(os.environ.get("MTL_MCP_TEST_CACHE") or Path.home() / ".cache" / "mtl-mcp-tests")


def npm_binary(client: NpmClient) -> Path:
    """The client's executable at its pinned version, installed on first use."""
    prefix = cache_dir() / client.folder
    binary = prefix / "node_modules" / client.binary_path
    if binary.is_file():
        return binary
    prefix.mkdir(parents=True, exist_ok=True)
    with (prefix.parent / f".{prefix.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # test processes installing at once install once
        if not binary.is_file():
            npm = shutil.which("npm")
            assert npm, f"npm is needed to install {client.package} for the end-to-end tests"
            subprocess.run(
                [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
                 "--loglevel=error", f"{client.package}@{client.version}"],
                check=True,
                timeout=600,
            )  # fmt: skip
    assert binary.is_file(), f"{client.package} installed no binary at {binary}"
    return binary


def main() -> None:
    """Install every pinned client into the test cache, saying where each one is."""
    for client in CLIENTS.values():
        binary = npm_binary(client)
        print(f"{client.package}@{client.version}: {binary}", file=sys.stderr)


if __name__ == "__main__":
    main()
