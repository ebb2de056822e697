"""Purging: make a leaked secret really gone from the data directory.

`forget` deletes a row, but Lance deletes are soft and older table versions keep the text.
A purge deletes the rows, rewrites the table so no live file holds them, removes every
older version, rewrites the backups without them, scrubs the text from the logs, the spool
and the session-start context cache, and finally scans every file under the data directory
for the text and reports any trace left.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path

from pydantic import BaseModel

from mtl_mcp.config import Settings
from mtl_mcp.errors import InputError, NotFoundError
from mtl_mcp.files import write_private
from mtl_mcp.memory import Memory
from mtl_mcp.schemas import Insight
from mtl_mcp.storage.backup import backups_dir, make_backup, row_matches, scrub_backups
from mtl_mcp.text.redact import redact

PLACEHOLDER = "[PURGED]"
_CHUNK = 8 << 20
_OVERLAP = 16 << 10  # longer than any insight field, so no match straddles two chunks unseen


class PurgeReport(BaseModel):
    """What a purge removed, and whether any trace of the text is left on disk."""

    ids: list[str]
    titles: list[str]
    versions_removed: int = 0
    backup: str | None = None
    scrubbed_backups: list[str] = []
    scrubbed_files: list[str] = []
    traces: list[str] = []


def compile_pattern(text: str, ignore_case: bool = False) -> re.Pattern[str]:
    """A purge pattern, refusing one that matches everything."""
    try:
        pattern = re.compile(text, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise InputError(
            f"{redact(text)!r} is not a valid regular expression ({exc}): escape special "
            "characters, e.g. `\\.` for a dot"
        ) from exc
    if pattern.search(""):
        raise InputError(
            f"the pattern {redact(text)!r} matches empty text, so it would purge every insight: "
            "give the secret itself, or a pattern that needs at least one character"
        )
    return pattern


def literal_pattern(*texts: str) -> re.Pattern[str]:
    """A pattern matching any of `texts` literally (the longest first)."""
    return re.compile("|".join(re.escape(t) for t in sorted(texts, key=len, reverse=True)))


def matching(memory: Memory, pattern: re.Pattern[str]) -> list[Insight]:
    """Stored insights (retired ones included) with a field that matches."""
    return [i for i in memory.export() if row_matches(i.model_dump(), pattern)]


def purge_pattern(memory: Memory, pattern: re.Pattern[str]) -> PurgeReport:
    """Purge every insight matching `pattern` and every trace of the matched text: in
    backups, rows matching it go too, even ones no longer in the store."""
    return _purge(memory, matching(memory, pattern), pattern, pattern, pattern)


def insight_to_purge(memory: Memory, insight_id: str) -> Insight:
    """The stored insight, or an error that says how to purge one forgotten earlier."""
    try:
        return memory.get(insight_id)
    except NotFoundError as exc:
        raise NotFoundError(
            f"{exc}. If it was forgotten earlier, older versions and backups may still hold "
            "its text: `mtl-mcp purge --pattern TEXT` removes it from them"
        ) from exc


def purge_insight(memory: Memory, insight: Insight) -> PurgeReport:
    """Purge one stored insight and every trace of its text."""
    # Backups lose the row by id; files lose its title and content (a description such as
    # "when fixing a bug" is shared by many insights); any copy of the content is a trace.
    scrub = literal_pattern(insight.title, insight.content)
    return _purge(memory, [insight], None, scrub, literal_pattern(insight.content))


def _purge(
    memory: Memory,
    insights: Sequence[Insight],
    in_backups: re.Pattern[str] | None,
    in_files: re.Pattern[str],
    trace: re.Pattern[str],
) -> PurgeReport:
    settings = memory.settings
    ids = {i.id for i in insights}
    # Before anything is deleted, and without the purged rows: the backup never holds them.
    backup = make_backup(settings, "purge", exclude_ids=ids)
    _, versions = memory.purge(ids)
    ordered = sorted(insights, key=lambda i: i.id)
    return PurgeReport(
        ids=[i.id for i in ordered],
        titles=[i.title for i in ordered],
        versions_removed=versions,
        backup=backup.name if backup else None,
        scrubbed_backups=scrub_backups(settings, ids, in_backups),
        scrubbed_files=[str(p) for p in scrub_files(settings, in_files)],
        traces=[str(p) for p in find_traces(settings, trace)],
    )


def _skipped(settings: Settings) -> set[Path]:
    """Folders a file scrub leaves alone: the store and backups (rewritten through LanceDB),
    damaged stores (unreadable), and downloaded models."""
    skipped = {backups_dir(settings), settings.home / "damaged", settings.models_dir}
    if settings.local_store is not None:
        skipped.add(settings.local_store)
    return skipped


def _files(root: Path, skip: Collection[Path] = ()) -> Iterator[Path]:
    if not root.is_dir():
        return
    for path in sorted(root.iterdir()):
        if path in skip or path.is_symlink():
            continue
        if path.is_dir():
            yield from _files(path, skip)
        elif path.is_file():
            yield path


def scrub_files(settings: Settings, pattern: re.Pattern[str]) -> list[Path]:
    """Replace matches in the logs, the spool and other plain files under the data dir.

    Context cache files that match are deleted (they are rebuilt). The config file is
    left alone: a secret in it is the user's to rotate.
    """
    changed = []
    context = settings.home / "context"
    for path in _files(settings.home, _skipped(settings)):
        if path == settings.config_file or path.suffix == ".lock":
            continue
        data = path.read_bytes()
        text = data.decode("utf-8", errors="surrogateescape")
        if not pattern.search(text):
            continue
        if path.parent == context:
            path.unlink()
        else:
            cleaned = pattern.sub(PLACEHOLDER, text).encode("utf-8", errors="surrogateescape")
            write_private(path, cleaned)
        changed.append(path)
    return changed


def find_traces(settings: Settings, pattern: re.Pattern[str]) -> list[Path]:
    """Files anywhere under the data dir (store and backups included) whose bytes match.

    A byte-level check after the purge: it finds text stored uncompressed, as LanceDB
    stores short strings; the logical guarantee is the rewrite itself. A match in the
    config file is reported, never changed.
    """
    return [p for p in _files(settings.home, {settings.models_dir}) if _file_matches(p, pattern)]


def _file_matches(path: Path, pattern: re.Pattern[str]) -> bool:
    with path.open("rb") as handle:
        tail = b""
        while chunk := handle.read(_CHUNK):
            window = tail + chunk
            if pattern.search(window.decode("utf-8", errors="surrogateescape")):
                return True
            tail = window[-_OVERLAP:]
    return False
