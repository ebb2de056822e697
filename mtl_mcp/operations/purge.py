"""Purging: make a leaked secret really gone from the data directory and the stores.

`forget` deletes a row, but Lance deletes are soft and older table versions keep the text.
A purge deletes the rows, rewrites the table so no live file holds them, removes every
older version, rewrites the backups without them, deletes their rows from the recall ledger
(and any recall or verdict whose text matches), scrubs the text from the logs, the spool
and the session-start context cache, and finally scans every file under the data directory
for the text and reports any trace left. With a team pool it does the same there for the
insights you shared (others' are theirs to purge), and a store or pool on object storage
has every object under its URI scanned as well.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path

from pydantic import BaseModel

from mtl_mcp.config import Settings, local_path
from mtl_mcp.errors import InputError, NotFoundError, StoreUnavailable
from mtl_mcp.files import write_private
from mtl_mcp.memory import Memory
from mtl_mcp.schemas import Insight
from mtl_mcp.storage.backup import backups_dir, make_backup, row_matches, scrub_backups
from mtl_mcp.storage.ledger import LEDGER_FILE
from mtl_mcp.storage.objects import scan_objects, stream_matches
from mtl_mcp.text.redact import redact

PLACEHOLDER = "[PURGED]"


class PurgeReport(BaseModel):
    """What a purge removed, and whether any trace of the text is left on disk."""

    ids: list[str]
    titles: list[str]
    versions_removed: int = 0
    backup: str | None = None
    scrubbed_backups: list[str] = []
    scrubbed_files: list[str] = []
    traces: list[str] = []
    team_ids: list[str] = []  # purged from the team pool: insights you shared
    team_versions_removed: int = 0
    team_others: int = 0  # team insights others shared that match: left for them to purge
    unscanned: list[str] = []  # stores whose objects could not be scanned, and why
    ledger_rows: int = 0  # recalls and verdicts whose text matched (those of the ids go too)


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


def _shared(memory: Memory) -> list[Insight]:
    """The insights you shared with the team pool (none without one); a pool that cannot
    be reached stops the purge before anything changed."""
    if memory.team is None:
        return []
    try:
        return memory.shared_insights()
    except StoreUnavailable as exc:
        raise StoreUnavailable(
            f"{exc}. Nothing was purged. Retry when the team pool answers, or purge your own "
            "store now with MTL_MCP_TEAM_URI unset and the pool later"
        ) from exc


def team_matching(memory: Memory, pattern: re.Pattern[str]) -> tuple[list[Insight], int]:
    """Team insights with a field that matches: those you shared, and how many others did."""
    mine = [i for i in _shared(memory) if row_matches(i.model_dump(), pattern)]
    if memory.team is None:
        return mine, 0
    everyone = sum(row_matches(row, pattern) for row in memory.team.rows())
    return mine, everyone - len(mine)


def purge_pattern(memory: Memory, pattern: re.Pattern[str]) -> PurgeReport:
    """Purge every insight matching `pattern` and every trace of the matched text: in
    backups, rows matching it go too, even ones no longer in the store."""
    shared, others = team_matching(memory, pattern)
    report = _purge(memory, matching(memory, pattern), shared, pattern, pattern, pattern)
    report.team_others = others
    return report


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
    """Purge one insight (yours, or one you shared with the team) and every trace of its
    text."""
    shared = [i for i in _shared(memory) if i.id == insight.id]
    if insight.source == "team" and not shared:
        raise InputError(
            f"{insight.id} was shared with the team pool by other members: only they can "
            "purge it; rate it harmful (`mtl-mcp rate ID --harmful`) to retire it"
        )
    personal = [insight] if insight.source == "personal" else []
    # Backups lose the row by id; files lose its title and content (a description such as
    # "when fixing a bug" is shared by many insights); any copy of the content is a trace.
    scrub = literal_pattern(insight.title, insight.content)
    return _purge(memory, personal, shared, None, scrub, literal_pattern(insight.content))


def _purge(
    memory: Memory,
    insights: Sequence[Insight],
    shared: Sequence[Insight],
    in_backups: re.Pattern[str] | None,
    in_files: re.Pattern[str],
    trace: re.Pattern[str],
) -> PurgeReport:
    settings = memory.settings
    ids = {i.id for i in insights}
    # Before anything is deleted, and without the purged rows: the backup never holds them.
    backup = make_backup(settings, "purge", exclude_ids=ids)
    _, versions = memory.purge(ids)
    team_versions = memory.purge_shared({i.id for i in shared})[1] if shared else 0
    ordered = sorted({i.id: i for i in [*insights, *shared]}.values(), key=lambda i: i.id)
    report = PurgeReport(
        ids=[i.id for i in ordered],
        titles=[i.title for i in ordered],
        versions_removed=versions,
        backup=backup.name if backup else None,
        scrubbed_backups=scrub_backups(settings, ids, in_backups),
        scrubbed_files=[str(p) for p in scrub_files(settings, in_files)],
        ledger_rows=memory.loop.scrub(in_files),  # the recalls waiting to be written too
        team_ids=sorted(i.id for i in shared),
        team_versions_removed=team_versions,
    )
    # Last, once everything is rewritten: what is left anywhere.
    report.traces = [str(p) for p in find_traces(settings, trace)]
    for uri in _object_stores(settings):
        found = scan_objects(uri, settings.storage, trace)
        report.traces += found.matches
        report.unscanned += found.unscanned
    return report


def _object_stores(settings: Settings) -> list[str]:
    """The URIs of the store and the team pool that are on object storage."""
    uris = [settings.store_uri, settings.team_uri]
    return [uri for uri in uris if uri and local_path(uri) is None]


def _skipped(settings: Settings) -> set[Path]:
    """Folders a file scrub leaves alone: the store and backups (rewritten through LanceDB),
    damaged stores (unreadable), and downloaded models."""
    skipped = {backups_dir(settings), settings.home / "damaged", settings.models_dir}
    skipped.add(settings.home / LEDGER_FILE)  # SQLite: rows are deleted through it, never bytes
    for uri in (settings.store_uri, settings.team_uri):
        if uri and (path := local_path(uri)) is not None:
            skipped.add(path)
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
    """Files anywhere under the data dir (store and backups included), or in a store or team
    pool in a directory elsewhere, whose bytes match.

    A byte-level check after the purge: it finds text stored uncompressed, as LanceDB
    stores short strings; the logical guarantee is the rewrite itself. A match in the
    config file is reported, never changed.
    """
    roots = [settings.home]  # and a store or team pool in a directory elsewhere
    for uri in (settings.store_uri, settings.team_uri):
        path = local_path(uri) if uri else None
        if path is not None and not path.is_relative_to(settings.home):
            roots.append(path)
    return [
        p
        for root in roots
        for p in _files(root, {settings.models_dir})
        if _file_matches(p, pattern)
    ]


def _file_matches(path: Path, pattern: re.Pattern[str]) -> bool:
    with path.open("rb") as handle:
        return stream_matches(handle, pattern)
