"""Files install writes whole, and so owns: Gemini CLI's policy allowing the read-only tools,
opencode's plugin. Each opens with a marker line; uninstall removes a file only when it
still carries it, and install never overwrites a file without it (the user's own)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from mtl_mcp.errors import ConfigError
from mtl_mcp.operations.install.files import read_text
from mtl_mcp.operations.install.json_configs import READ_ONLY_TOOLS
from mtl_mcp.operations.install.targets import SERVER_NAME, FileChange, Launch

MARKER = "Written by `mtl-mcp install"


def gemini_policy() -> str:
    """A user policy of Gemini CLI's policy engine: the read-only tools run without asking
    (and in `gemini -p`); the tools that change the memory still ask."""
    rules = "".join(
        f'\n[[rule]]\nmcpName = "{SERVER_NAME}"\ntoolName = "{tool}"\n'
        'decision = "allow"\npriority = 100\n'
        for tool in READ_ONLY_TOOLS
    )
    return (
        f"# {MARKER} gemini-cli`: Gemini CLI may call mtl-mcp's read-only tools without\n"
        "# asking. `mtl-mcp uninstall gemini-cli` removes this file.\n" + rules
    )


def opencode_plugin(launch: Launch) -> str:
    """The committed plugin, with the command line that starts this mtl-mcp."""
    template = resources.files("mtl_mcp").joinpath("data/opencode-plugin.js")
    text = template.read_text(encoding="utf-8")
    command = json.dumps([launch.command, *launch.args_prefix])
    return text.replace("__MTL_MCP_COMMAND__", command).replace(
        "__MTL_MCP_ENV__", json.dumps(dict(launch.env))
    )


def is_ours(text: str | None) -> bool:
    return text is not None and MARKER in text.split("\n", 1)[0]


def owned_change(path: Path, content: str) -> FileChange | None:
    """Write `content` to `path`: a new file, or ours from an earlier install."""
    before = read_text(path)
    if before == content:
        return None
    if before is not None and not is_ours(before):
        raise ConfigError(
            f"{path} exists and was not written by mtl-mcp; move it away (or merge it by "
            "hand) and run the command again. It was not changed."
        )
    return FileChange(path, before, content)


def owned_removal(path: Path, notes: list[str]) -> FileChange | None:
    """Remove `path` if install wrote it; a file the user changed the first line of stays."""
    before = read_text(path)
    if before is None:
        return None
    if not is_ours(before):
        notes.append(f"Kept {path}: it no longer says it was written by mtl-mcp.")
        return None
    return FileChange(path, before, None)
