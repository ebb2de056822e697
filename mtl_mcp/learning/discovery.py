"""Where the assistants keep their session transcripts and their own memories on this
machine: what a backfill distils, and the only places `record_session` may read a transcript
from.

Memories (each file a job of kind "notes"):
- Claude Code's auto memory: `<config>/projects/<project>/memory/*.md` (MEMORY.md, the index,
  and topic files), `<config>` being `$CLAUDE_CONFIG_DIR` or `~/.claude`.
- Codex's memories (`$CODEX_HOME/memories`, default `~/.codex/memories`), as the phase-2
  consolidation of openai/codex writes them (codex-rs/core/templates/memories/consolidation.md):
  `MEMORY.md` (the handbook), `memory_summary.md` (loaded into every prompt) and
  `skills/<name>/SKILL.md`. Found at any depth, which also covers the per-folder buckets
  (`memories/<hash>/memory/`) some Codex versions use. `raw_memories.md` and
  `rollout_summaries/` are left out: they restate single rollouts, which the session
  backfill already reads.
- A project's own notes, only when asked (`distill --project-notes`): CLAUDE.md,
  .claude/CLAUDE.md, CLAUDE.local.md, AGENTS.md, .cursorrules and .cursor/rules/**/*.mdc.

A notes file stays in its folder as a transcript does (`known_transcript`): symbolic links are
followed, and a file that then lies outside the folder it was found in (Claude Code's
projects, Codex's memories, the project) is not read: `MEMORY.md` linked to a private note,
a topic file linked to /etc/passwd (`confined_notes`).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from mtl_mcp.errors import InputError
from mtl_mcp.files import sha256_file
from mtl_mcp.learning.spool import NOTES_PREFIX, Job
from mtl_mcp.learning.transcripts import Format
from mtl_mcp.untrusted import json_loads, open_regular

logger = logging.getLogger(__name__)


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


def codex_home() -> Path:
    return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")


def codex_sessions() -> Path:
    return codex_home() / "sessions"


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


def _absolute(path: Path) -> Path:
    """`path` made absolute without following symbolic links."""
    return Path(os.path.abspath(path.expanduser()))


def notes_folder(path: Path, cwd: str | None) -> Path | None:
    """The folder a notes file was found in, by its path as named (links not followed):
    Claude Code's projects, Codex's memories, or the project `cwd` (its own notes)."""
    named = _absolute(path)
    folders = [claude_code_sessions(), codex_home() / "memories"]
    folders += [Path(cwd)] if cwd else []
    return next((f for f in map(_absolute, folders) if named.is_relative_to(f)), None)


def confined_notes(path: Path, cwd: str | None) -> Path:
    """`path` with its symbolic links followed, if it is a regular file that stays in the
    folder it was found in; InputError otherwise (what it names is never read)."""
    folder = notes_folder(path, cwd)
    resolved = path.expanduser().resolve()
    if folder is None or not resolved.is_relative_to(folder.resolve()):
        raise InputError(
            f"{path} leads out of the folder it is in ({resolved}): a notes file must stay in "
            "Claude Code's projects, Codex's memories or the project, so it is not read"
        )
    if not resolved.is_file():
        raise InputError(f"{path} is not a regular file: it is not read")
    return resolved


def _confined(found: list[NotesFile]) -> list[NotesFile]:
    """The notes files that stay in their folders; the others logged and left out."""
    kept = []
    for notes in found:
        try:
            confined_notes(notes.path, notes.cwd)
        except InputError as exc:
            logger.warning("%s", exc)
            continue
        kept.append(notes)
    return kept


@dataclass(frozen=True)
class NotesFile:
    """A file of notes an assistant keeps: its path, the assistant it belongs to ('claude-code',
    'codex' or 'cursor': whose login may distil it) and the project folder, when known."""

    path: Path
    client: str
    cwd: str | None = None

    @property
    def job_id(self) -> str:
        """The file's job and done-log id: one per file, whatever its content."""
        return f"{NOTES_PREFIX}{self.path}"

    def job(self) -> Job:
        return Job(
            session_id=self.job_id,
            transcript_path=str(self.path),
            kind="notes",
            client=self.client,
            cwd=self.cwd,
        )


CODEX_MEMORY_FILES = frozenset({"MEMORY.md", "memory_summary.md"})
PROJECT_NOTES = ("CLAUDE.md", ".claude/CLAUDE.md", "CLAUDE.local.md", "AGENTS.md", ".cursorrules")
_CWD_SCAN_BYTES = 64 * 1024


def memory_files(since: timedelta | None = None) -> list[NotesFile]:
    """Claude Code's auto-memory files and Codex's memories, those modified within `since`
    (all of them for None)."""
    found = [
        NotesFile(path, "claude-code", _session_cwd(path.parent.parent))
        for path in claude_code_sessions().glob("*/memory/*.md")
    ]
    found += codex_memory_files()
    cutoff = None if since is None else datetime.now(UTC).timestamp() - since.total_seconds()
    return [
        notes
        for notes in _confined(sorted(found, key=lambda n: n.path))
        if cutoff is None or _modified_since(notes.path, cutoff)
    ]


def codex_memory_files() -> list[NotesFile]:
    return _confined(
        [
            NotesFile(path, "codex")
            for path in sorted((codex_home() / "memories").rglob("*.md"))
            if path.name in CODEX_MEMORY_FILES
            or (path.name == "SKILL.md" and path.parent.parent.name == "skills")
        ]
    )


def memories_of_session(client: str, transcript: Path, cwd: str | None) -> list[NotesFile]:
    """The memory files the assistant behind an ended session may have written in it: a
    Claude Code project's auto memory (next to its transcript), or Codex's memories."""
    if client == "claude-code":
        folder = transcript.parent / "memory"
        if transcript.parent.parent.resolve() != claude_code_sessions().resolve():
            return []  # not in Claude Code's projects: no memory of its own next to it
        return _confined([NotesFile(p, "claude-code", cwd) for p in sorted(folder.glob("*.md"))])
    return codex_memory_files() if client == "codex" else []


def unread(notes: list[NotesFile], done: set[tuple[str, str]]) -> list[NotesFile]:
    """The notes files whose content is not among the distilled (`Spool.done`): new or
    changed since (by content hash, whatever their modification times). An unreadable one is
    left out."""
    fresh = []
    for found in notes:
        try:
            content_hash = sha256_file(found.path)
        except OSError as exc:
            logger.warning("%s unreadable, left out: %s", found.path, exc.strerror or exc)
            continue
        if (found.job_id, content_hash) not in done:
            fresh.append(found)
    return fresh


def project_note_files(folder: Path) -> list[NotesFile]:
    """The instructions a project keeps for coding assistants, in `folder`."""
    root = folder.expanduser().resolve()
    if not root.is_dir():
        raise InputError(f"{folder} is not a folder: pass the project's root folder")
    paths = [root / name for name in PROJECT_NOTES]
    paths += sorted((root / ".cursor" / "rules").rglob("*.mdc"))
    found = [NotesFile(p, _owner(p), str(root)) for p in paths if p.exists()]
    return _confined(found)


def _owner(path: Path) -> str:
    if path.name.startswith("CLAUDE"):
        return "claude-code"
    return "codex" if path.name == "AGENTS.md" else "cursor"


def _modified_since(path: Path, cutoff: float) -> bool:
    try:
        return path.stat().st_mtime >= cutoff
    except OSError:
        return False


def _session_cwd(project_folder: Path) -> str | None:
    """The working folder of a Claude Code project, from the newest of its transcripts (the
    folder's own name is the path with every separator a dash: it cannot be read back)."""
    transcripts = sorted(project_folder.glob("*.jsonl"), key=lambda p: _mtime(p), reverse=True)
    for transcript in transcripts[:3]:
        try:
            with open_regular(transcript) as stream:
                head = stream.read(_CWD_SCAN_BYTES).decode("utf-8", errors="replace")
        except OSError:
            continue
        for line in head.splitlines():
            try:
                record = json_loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and isinstance(record.get("cwd"), str) and record["cwd"]:
                return str(record["cwd"])
    return None


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
