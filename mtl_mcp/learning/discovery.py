"""Where the assistants keep their session transcripts on this machine: what a backfill
distils, and the only places `record_session` may read a transcript from."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from mtl_mcp.errors import InputError
from mtl_mcp.learning.transcripts import Format


def parse_age(text: str) -> timedelta:
    """'12h', '7d' or '2w' as a duration."""
    match = re.fullmatch(r"\s*(\d+)\s*([hdw])\s*", text)
    if not match:
        raise InputError(f"{text!r} is not an age: use a number and h, d or w, e.g. 7d")
    amount, unit = int(match[1]), match[2]
    return {
        "h": timedelta(hours=amount),
        "d": timedelta(days=amount),
        "w": timedelta(weeks=amount),
    }[unit]


def claude_code_sessions() -> Path:
    return Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude") / "projects"


def codex_sessions() -> Path:
    return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex") / "sessions"


def cursor_sessions() -> Path:
    """Cursor's agent transcripts (`<project>/agent-transcripts/<conversation>.jsonl`)."""
    return Path.home() / ".cursor" / "projects"


def gemini_sessions() -> Path:
    """Gemini CLI's chats (`<project>/chats/session-*.jsonl`)."""
    return Path(os.environ.get("GEMINI_CLI_HOME") or Path.home()) / ".gemini" / "tmp"


def copilot_sessions() -> Path:
    """Copilot CLI's session records (`<session>/events.jsonl`)."""
    return Path(os.environ.get("COPILOT_HOME") or Path.home() / ".copilot") / "session-state"


def opencode_sessions() -> Path:
    """The transcripts mtl-mcp's opencode plugin writes (opencode keeps its own in a
    database): `<session>.jsonl`."""
    data = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(data) / "opencode" / "mtl-mcp-transcripts"


def known_transcript(path: str) -> Path:
    """`path`, resolved, if it is a transcript in one of the assistants' session folders.

    A tool argument names the file, so it must not reach anything else the server's user
    may read (the digest of a file goes to a model, and with MCP sampling back to the
    client). Symbolic links are followed before the check.
    """
    resolved = Path(path).expanduser().resolve()
    folders = [
        claude_code_sessions(),
        codex_sessions(),
        cursor_sessions(),
        gemini_sessions(),
        copilot_sessions(),
        opencode_sessions(),
    ]
    if resolved.suffix == ".jsonl" and any(
        resolved.is_relative_to(folder.expanduser().resolve()) for folder in folders
    ):
        return resolved
    raise InputError(
        "transcript_path must be a session transcript (.jsonl) in the assistants' session "
        f"folders ({', '.join(str(f) for f in folders)}): for any other session, pass its "
        "summary or 0-3 insights instead"
    )


def session_files(since: timedelta) -> Iterator[tuple[Path, Format]]:
    """(transcript, format) for the sessions modified within `since` of Claude Code, Codex,
    Gemini CLI, Copilot CLI and opencode (as its mtl-mcp plugin wrote them)."""
    cutoff = datetime.now(UTC).timestamp() - since.total_seconds()
    claude, codex = claude_code_sessions(), codex_sessions()
    candidates: list[tuple[Path, Format]] = [(p, "claude-code") for p in claude.glob("*/*.jsonl")]
    candidates += [(p, "codex") for p in codex.glob("**/rollout-*.jsonl")]
    candidates += [(p, "gemini-cli") for p in gemini_sessions().glob("*/chats/session-*.jsonl")]
    candidates += [(p, "copilot-cli") for p in copilot_sessions().glob("*/events.jsonl")]
    candidates += [(p, "trajectory") for p in opencode_sessions().glob("*.jsonl")]
    for path, fmt in sorted(candidates):
        try:
            if path.stat().st_mtime >= cutoff:
                yield path, fmt
        except OSError:
            continue
