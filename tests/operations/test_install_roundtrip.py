"""The installers' promise, property-tested: `install` then `uninstall` gives back the same
bytes, whatever the JSON or JSONC file held: comments in every position, LF or CRLF line
ends, a byte-order mark, empty and non-empty objects and arrays, our servers object empty,
holding others, or absent. Or install refuses, in our words, and changes nothing.

The texts are generated token by token, with trivia (blanks, line and block comments)
drawn between every two tokens; the installs and uninstalls are the real plans, applied
to real files (backups included) in a temporary directory.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mtl_mcp.errors import ConfigError
from mtl_mcp.operations.install.json_configs import COMMENTS_ALLOWED, servers_key
from mtl_mcp.operations.install.plans import apply, plan_install, plan_uninstall
from mtl_mcp.operations.install.targets import Client, Launch, config_paths

LAUNCH = Launch("/opt/mtl/bin/mtl-mcp", env={"MTL_MCP_HOME": "/data/mtl home"})
# Every client with a JSON config, and the file that holds its server entry.
CLIENTS: list[Client] = [
    "vscode", "gemini-cli", "opencode", "zed", "cursor", "claude-desktop", "windsurf",
    "copilot-cli", "claude-code",
]  # fmt: skip
SPACE = ["", " ", "  ", "\n", "\n  ", "\n    ", "\t", "\n\n"]
COMMENTS = ["// keep me\n", "/* note */", " // a comment, with {braces} and [brackets]\n",
            "/* multi\n   line */", "\n  // own line\n  "]  # fmt: skip
KEYS = ["theme", "inputs", "editor.fontSize", "hooks", "permissions", "servers", "mcpServers",
        "mcp", "context_servers", "other", "a\"quote", "ünï", "allow", "version"]  # fmt: skip
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 500), st.sampled_from(["dark", "", "a/b//c"])
)


def trivia(draw: Any, comments: bool) -> str:
    """Blanks and, where the client allows them, comments: what may sit between tokens."""
    pieces = draw(st.lists(st.sampled_from(SPACE + (COMMENTS if comments else [])), max_size=2))
    return "".join(pieces)


def value_text(draw: Any, value: Any, comments: bool, depth: int = 0) -> str:
    """`value` as JSON(C) text with trivia between its tokens (and trailing commas)."""
    if isinstance(value, dict):
        items = [
            f"{trivia(draw, comments)}{json.dumps(k, ensure_ascii=False)}{trivia(draw, comments)}:"
            f"{trivia(draw, comments)}{value_text(draw, v, comments, depth + 1)}"
            for k, v in value.items()
        ]
        return "{" + _join(draw, items, comments) + "}"
    if isinstance(value, list):
        items = [trivia(draw, comments) + value_text(draw, v, comments, depth + 1) for v in value]
        return "[" + _join(draw, items, comments) + "]"
    return json.dumps(value, ensure_ascii=False)


def _join(draw: Any, items: list[str], comments: bool) -> str:
    sep = [f"{trivia(draw, comments)}," for _ in items[1:]]
    text = items[0] if items else ""
    for comma, item in zip(sep, items[1:], strict=True):
        text += comma + item
    trailing = "," if items and comments and draw(st.booleans()) else ""
    return text + trailing + trivia(draw, comments)


@st.composite
def config_texts(draw: Any, client: Client, comments: bool | None = None) -> str:
    comments = client in COMMENTS_ALLOWED if comments is None else comments
    leaf = st.one_of(
        SCALARS,
        st.just({}),
        st.just([]),
        st.lists(SCALARS, max_size=3),
        st.dictionaries(st.sampled_from(KEYS), SCALARS, max_size=3),
    )
    doc: dict[str, Any] = draw(st.dictionaries(st.sampled_from(KEYS), leaf, max_size=4))
    key = servers_key(client)
    shape = draw(st.sampled_from(["absent", "empty", "others"]))
    if shape == "absent":
        doc.pop(key, None)
    else:
        doc[key] = {} if shape == "empty" else {"github": {"command": "gh-mcp", "args": []}}
    if client == "claude-code":
        doc.pop("hooks", None)  # ~/.claude.json: its hooks live in settings.json
    text = trivia(draw, comments) + value_text(draw, doc, comments) + trivia(draw, comments)
    if draw(st.booleans()):
        text += "\n"
    if draw(st.booleans()):
        text = text.replace("\n", "\r\n")
    if draw(st.booleans()):
        text = "\ufeff" + text
    return text


def files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".mtl-mcp-backup-" not in p.name
    }


def round_trip(client: Client, text: str, hooks_text: str | None = None) -> None:
    root = Path(tempfile.mkdtemp(prefix="mtl-roundtrip-"))
    try:
        dirs = {"user_home": root / "home", "project_dir": root / "project"}
        for folder in dirs.values():
            folder.mkdir()
        paths = config_paths(client, "user", platform="linux", **dirs)
        path = paths.mcp
        for where, content in ((path, text), (paths.hooks, hooks_text)):
            if where is not None and content is not None and not where.exists():
                where.parent.mkdir(parents=True, exist_ok=True)
                where.write_bytes(content.encode("utf-8"))
        before = files(root)
        try:
            plan = plan_install(client, "user", LAUNCH, platform="linux", **dirs)
        except ConfigError as exc:  # refused, in our words: nothing changed
            assert "Traceback" not in str(exc) and files(root) == before
            return
        apply(plan)
        assert "mtl-mcp" in path.read_text(encoding="utf-8")
        apply(plan_uninstall(client, "user", platform="linux", **dirs))
        after = files(root)
        assert after == before, {k: (before.get(k), after.get(k)) for k in {*before, *after}}
    finally:
        shutil.rmtree(root)


@pytest.mark.parametrize("client", CLIENTS)
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_install_then_uninstall_gives_back_every_byte(client: Client, data: Any) -> None:
    """The servers file, and for a client with a file of hooks of its own (plain JSON) that
    one too, existing or not."""
    hooks = data.draw(st.none() | config_texts(client, comments=False))
    round_trip(client, data.draw(config_texts(client)), hooks)


@pytest.mark.parametrize(
    ("client", "text"),
    [
        ("vscode", '{"servers": {}, "inputs": []}'),  # VS Code's own default
        ("vscode", '{\n  "servers": {// keep me\n  }\n}\n'),
        ("vscode", '{\n\t"servers": {\n\t\t// keep me\n\t},\n\t"inputs": []\n}'),
        (
            "gemini-cli",
            '{\n  "mcpServers": {\n    "a": {"command": "x"}, // a\'s comment\n    '
            '"b": {"command": "y"}\n  }\n}\n',
        ),
        ("zed", "{}"),
        ("zed", "{\r\n}\r\n"),
        ("opencode", '\ufeff{\r\n  // mine\r\n  "mcp": { },\r\n}\r\n'),
        ("cursor", '{"mcpServers": {}}'),
        ("claude-desktop", '{"theme": "dark"}'),
    ],
)
def test_the_cases_the_review_found_give_back_every_byte(client: Client, text: str) -> None:
    round_trip(client, text)
