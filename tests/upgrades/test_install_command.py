"""The README's first command, run as written by a new user: from inside a clone (named
anything), in an empty HOME, offline. Read out of README.md, so the test follows the
README: a command that drifts from what works fails here."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from mtl_mcp import __version__
from tests.releases import REPO, offline_pip_env, working_tree_copy

pytestmark = pytest.mark.slow


def install_command() -> str:
    """The README's one install command (the fenced block that makes the venv)."""
    blocks = re.findall(r"^```sh\n(.*?)^```", (REPO / "README.md").read_text(), re.S | re.M)
    [command] = [b.strip() for b in blocks if b.startswith("python3 -m venv")]
    return command


def a_new_users_env(home: Path) -> dict[str, str]:
    """This machine's environment for someone who never ran mtl-mcp: no MTL_MCP_* setting,
    no XDG folders moved, HOME empty."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MTL_MCP_", "XDG_"))}
    return {**env, "HOME": str(home)}


def test_the_readmes_install_command_works_from_inside_a_clone(
    tmp_path: Path, packages: Path
) -> None:
    """It installs, attaches Claude Code to this installation, creates the memory, writes
    nothing outside the venv, the client's config and the data directory (onnxruntime's
    ~/.cache/Microsoft included), and run again (after a `git pull`) it upgrades in place."""
    clone = working_tree_copy(tmp_path / "my-checkout")  # not named mtl-mcp
    home = tmp_path / "user"
    home.mkdir()
    env = offline_pip_env(a_new_users_env(home), packages)
    command = install_command()
    for attempt in ("install", "again, as an upgrade"):
        done = subprocess.run(
            ["bash", "-c", command], cwd=clone, env=env, capture_output=True, text=True,
            timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, f"{attempt}: {command}\n{done.stdout}\n{done.stderr}"
    executable = home / ".mtl-mcp" / "bin" / "mtl-mcp"
    version = subprocess.run([executable, "--version"], env=env, capture_output=True, text=True)
    assert version.stdout.split()[-1] == __version__
    registered = json.loads((home / ".claude.json").read_text())["mcpServers"]["mtl-mcp"]
    assert registered["command"] == str(executable)
    data = home / ".local" / "share" / "mtl-mcp"
    assert (data / "store").is_dir()
    made = sorted(str(p.relative_to(home)) for p in home.rglob("*") if ".mtl-mcp" not in p.parts)
    # pip's cache and the rustup proxy pip runs (`rustc --version` for its user agent) are
    # the machine's tools, not mtl-mcp
    ours = (".local/share/mtl-mcp", ".claude", ".cache/pip", ".rustup")
    outside = [p for p in made if not p.startswith(ours)]
    assert outside == [".cache", ".local", ".local/share"], outside
