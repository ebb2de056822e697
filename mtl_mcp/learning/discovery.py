"""Finding the sessions a backfill distils: Claude Code and Codex transcripts on this machine."""

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


def session_files(since: timedelta) -> Iterator[tuple[Path, Format]]:
    """(transcript, format) for Claude Code and Codex sessions modified within `since`."""
    cutoff = datetime.now(UTC).timestamp() - since.total_seconds()
    claude = Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude") / "projects"
    codex = Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex") / "sessions"
    candidates: list[tuple[Path, Format]] = [(p, "claude-code") for p in claude.glob("*/*.jsonl")]
    candidates += [(p, "codex") for p in codex.glob("**/rollout-*.jsonl")]
    for path, fmt in sorted(candidates):
        try:
            if path.stat().st_mtime >= cutoff:
                yield path, fmt
        except OSError:
            continue
