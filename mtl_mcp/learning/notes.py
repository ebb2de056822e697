"""Notes the assistants keep, as the text a distillation reads: a memory file or a project's
instructions, bounded, decoded and redacted, under a line that says whose notes they are.

Notes are short by nature (Claude Code loads the first 200 lines of its MEMORY.md); a longer
file is cut to the digest budget from its start, and the cut is said.
"""

from __future__ import annotations

from pathlib import Path

from mtl_mcp.errors import TranscriptError
from mtl_mcp.learning.transcripts.lines import text_encoding
from mtl_mcp.text.redact import redact
from mtl_mcp.text.tokens import chars_for_tokens, estimate_tokens
from mtl_mcp.untrusted import open_regular

MAX_NOTES_BYTES = 512 * 1024  # far beyond any budget: the rest is never read

_WHOSE = {
    "claude-code": "Claude Code's auto memory for one project",
    "codex": "Codex's memories",
    "cursor": "a project's Cursor rules",
}


def whose(path: Path, client: str) -> str:
    """What the notes are, in words, for the line above them."""
    if path.name == "AGENTS.md" or path.name.startswith("CLAUDE"):
        return f"a project's instructions to coding assistants ({path.name})"
    if path.name == "SKILL.md":
        return "a skill Codex wrote into its memories"
    return _WHOSE.get(client, "notes a coding assistant keeps")


def notes_digest(path: Path, client: str, token_budget: int) -> str:
    """The redacted text of a notes file within `token_budget` tokens; "" when it holds no
    text. Raises TranscriptError when it cannot be read or is no text."""
    try:
        with open_regular(path) as stream:
            raw = stream.read(MAX_NOTES_BYTES)
    except OSError as exc:
        raise TranscriptError(f"cannot read {path} ({exc.strerror or exc})") from exc
    encoding = text_encoding(raw[:65536])
    if encoding is None:
        raise TranscriptError(f"{path} holds no text: notes are Markdown or plain text")
    text = redact(raw.decode(encoding, errors="replace").replace("\r\n", "\n")).strip()
    if not text:
        return ""
    heading = f"Notes: {whose(path, client)}."
    room = token_budget - estimate_tokens(heading) - 20
    if estimate_tokens(text) > room:
        # One token per character at worst: cut by the estimate, so a budget check holds.
        text = text[: chars_for_tokens(room)]
        while estimate_tokens(text) > room:
            text = text[: int(len(text) * 0.9)]
        text = text.rsplit("\n", 1)[0] + "\n[the rest of the notes was cut]"
    return f"{heading}\n\n{text}"
