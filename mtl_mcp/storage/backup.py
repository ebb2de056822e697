"""Backups of the store, taken before migrations, purges and restores, and on demand.

A backup is a small LanceDB database in `<home>/backups/<UTC time>-<reason>/`: the insight
and meta tables as they were (current rows only, no version history) and a `backup.json`
describing them. It is written under a hidden name and renamed when complete, so a crash
never leaves half a backup that looks whole. The newest BACKUPS_KEPT are kept.

Purged text survives in no backup: a purge writes its own backup without the purged
insights and rewrites every older backup without them (`mtl_mcp.operations.purge`).
"""

from __future__ import annotations

import json
import logging
import re
import shutil
from collections.abc import Collection, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ValidationError

from mtl_mcp.config import Settings
from mtl_mcp.errors import InputError, StoreError
from mtl_mcp.files import private_dir, write_private, writing
from mtl_mcp.storage.lance import connect, lance_errors, lance_message, rewrite_without
from mtl_mcp.storage.locks import store_lock
from mtl_mcp.storage.schema import META_TABLE, TABLE, VECTOR_COLUMNS

if TYPE_CHECKING:
    from lancedb.db import DBConnection

logger = logging.getLogger(__name__)

BACKUPS_KEPT = 10
INFO_FILE = "backup.json"
_BATCH = 4096


class BackupInfo(BaseModel):
    """What one backup holds."""

    name: str
    path: Path
    reason: str
    created_at: datetime
    insights: int
    schema_version: str | None = None
    embed_model: str | None = None


class RestoreResult(BaseModel):
    """What a restore did with the store it replaced."""

    restored: BackupInfo
    insights: int
    saved_as: BackupInfo | None = None  # the replaced store, if it could still be read
    moved_to: Path | None = None  # the replaced store, if it was damaged


def backups_dir(settings: Settings) -> Path:
    return settings.home / "backups"


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")


def row_matches(row: dict[str, Any], pattern: re.Pattern[str]) -> bool:
    """Whether any text field of a stored row (lists included, vector excluded) matches."""
    for key, value in row.items():
        if key in VECTOR_COLUMNS:
            continue
        values = value if isinstance(value, list) else [value]
        if any(isinstance(v, str) and pattern.search(v) for v in values):
            return True
    return False


def _copy_tables(source: DBConnection, target_uri: str | Path, drop: Collection[str]) -> int:
    """Stream both tables into a new database, leaving out the rows whose ids are in `drop`.

    Memory stays at one batch, whatever the table's size. Returns the rows copied.
    """
    copied = 0
    with lance_errors(f"copying the store to {target_uri}", "nothing was changed"):
        insights = source.open_table(TABLE)
        schema = insights.schema
        excluded = pa.array(sorted(drop), pa.string())

        def batches() -> Iterator[pa.RecordBatch]:
            nonlocal copied
            for batch in insights.search().limit(None).to_batches(_BATCH):
                if len(excluded):
                    keep = pc.invert(pc.is_in(batch.column("id"), value_set=excluded))
                    batch = batch.filter(keep)
                copied += batch.num_rows
                yield pa.RecordBatch.from_arrays(batch.columns, schema=schema)

        target = connect(target_uri)
        target.create_table(TABLE, data=pa.RecordBatchReader.from_batches(schema, batches()))
        target.create_table(META_TABLE, data=source.open_table(META_TABLE).to_arrow())
    return copied


def _meta_of(db: DBConnection) -> dict[str, str]:
    with lance_errors("reading the meta table", "run `mtl-mcp doctor`"):
        rows = db.open_table(META_TABLE).to_arrow().to_pylist()
    return {str(r["key"]): str(r["value"]) for r in rows}


def make_backup(
    settings: Settings,
    reason: str,
    exclude_ids: Collection[str] = (),
    protect: Path | None = None,
) -> BackupInfo | None:
    """Back up the store's current rows (less `exclude_ids`); None if there is no store yet.

    Older backups beyond the newest BACKUPS_KEPT are deleted, except `protect`.
    """
    source = connect(settings.store_uri, storage_options=settings.storage)
    with lance_errors(f"opening {settings.store_uri}", "run `mtl-mcp doctor`"):
        if TABLE not in source.list_tables().tables:
            return None
    folder = private_dir(backups_dir(settings))
    name = f"{_stamp()}-{reason}"
    partial = folder / f".{name}.partial"
    try:
        count = _copy_tables(source, partial, exclude_ids)
        meta = _meta_of(source)
    except StoreError as exc:
        shutil.rmtree(partial, ignore_errors=True)
        raise StoreError(
            f"could not back up {settings.store_uri} ({exc}): the operation that needed the "
            "backup did not run. Run `mtl-mcp doctor` to see what is wrong"
        ) from exc
    info = BackupInfo(
        name=name,
        path=folder / name,
        reason=reason,
        created_at=datetime.now(UTC),
        insights=count,
        schema_version=meta.get("schema_version"),
        embed_model=meta.get("embed_model"),
    )
    write_private(partial / INFO_FILE, info.model_dump_json(exclude={"path"}))
    partial.rename(info.path)
    logger.info("backed up %d insights to %s", count, info.path)
    for old in list_backups(settings)[BACKUPS_KEPT:]:
        if old.path != protect:
            shutil.rmtree(old.path, ignore_errors=True)
    return info


def _read_info(path: Path) -> BackupInfo | None:
    try:
        data = json.loads((path / INFO_FILE).read_text(encoding="utf-8"))
        return BackupInfo.model_validate({**data, "path": path})
    except (OSError, ValueError, TypeError, ValidationError):  # JSON errors are ValueErrors
        return None


def list_backups(settings: Settings) -> list[BackupInfo]:
    """Complete backups, newest first (an unreadable `backup.json` hides a backup)."""
    folder = backups_dir(settings)
    if not folder.is_dir():
        return []
    found = [
        info
        for path in folder.iterdir()
        if path.is_dir() and not path.name.startswith(".")
        if (info := _read_info(path)) is not None
    ]
    return sorted(found, key=lambda i: i.created_at, reverse=True)


def find_backup(settings: Settings, name: str) -> BackupInfo:
    """A backup by name (as `mtl-mcp backup --list` shows it) or by path."""
    for candidate in (Path(name).expanduser(), backups_dir(settings) / name):
        if candidate.is_dir() and (info := _read_info(candidate)) is not None:
            return info
    known = ", ".join(i.name for i in list_backups(settings)[:5]) or "none yet"
    raise InputError(
        f"{name!r} is not a backup: pass a name from `mtl-mcp backup --list` (newest: {known}) "
        "or the path of a backup folder"
    )


def inspect_store(settings: Settings) -> str | None:
    """What is wrong with the store's files, or None if every table and data file reads.

    Reads every row of both tables, so a truncated or missing data file is found.
    """
    uri = settings.store_uri
    if (root := settings.local_store) is not None:
        tables = [root / f"{name}.lance" for name in (TABLE, META_TABLE)]
        if not any(t.exists() for t in tables):
            return None  # a new store: it is created on first use
        for table in tables:
            versions = table / "_versions"
            if not table.is_dir():
                return f"the {table.stem} table is missing ({table} does not exist)"
            if not versions.is_dir() or not any(versions.glob("*.manifest")):
                return (
                    f"the {table.stem} table has lost its version manifests ({versions} is "
                    "missing or empty), so none of its data can be found"
                )
    try:
        db = connect(uri, storage_options=settings.storage)
        with lance_errors("reading the store", "run `mtl-mcp doctor`"):
            for name in (TABLE, META_TABLE):
                for _ in db.open_table(name).search().limit(None).to_batches(_BATCH):
                    pass
        meta = _meta_of(db)
    except StoreError as exc:
        cause = exc.__cause__ if exc.__cause__ is not None else exc
        detail = lance_message(cause).splitlines()[0]
        return f"a data file cannot be read (truncated, missing or overwritten): {detail}"
    for key in ("schema_version", "dim"):
        if not meta.get(key, "").isdigit():
            return f"the meta table is damaged: {key} is {meta.get(key)!r}, not a number"
    if not meta.get("embed_model"):
        return "the meta table is damaged: it does not name the embedding model"
    return None


def restore_backup(settings: Settings, backup: BackupInfo) -> RestoreResult:
    """Replace the store with a backup's rows. The replaced store is backed up if it can be
    read, else moved to `<home>/damaged/`; other processes should be stopped first."""
    try:
        source = connect(backup.path)
        _meta_of(source)
        with lance_errors(f"reading {backup.path}", "pick another backup"):
            source.open_table(TABLE).count_rows()
    except StoreError as exc:
        raise InputError(
            f"{backup.path} cannot be read as a backup ({exc}): pick another with "
            "`mtl-mcp backup --list`"
        ) from exc
    result = RestoreResult(restored=backup, insights=0)
    with store_lock(settings.local_store, exclusive=True):
        if settings.local_store is None:  # on object storage: overwritten in place
            if inspect_store(settings) is None:
                result.saved_as = make_backup(settings, "pre-restore", protect=backup.path)
            result.insights = _overwrite_remote(source, settings)
            return result
        store = settings.local_store
        aside = store.with_name(f".{store.name}.replaced-{_stamp()}")
        if store.exists():
            if inspect_store(settings) is None:
                result.saved_as = make_backup(settings, "pre-restore", protect=backup.path)
            with writing(store):
                store.rename(aside)
        try:
            result.insights = _copy_tables(source, store, ())
        except BaseException:  # put the old store back rather than leave none
            shutil.rmtree(store, ignore_errors=True)
            if aside.exists():
                aside.rename(store)
            raise
        if aside.exists():
            if result.saved_as is not None:
                shutil.rmtree(aside)
            else:
                damaged = settings.home / "damaged" / f"{_stamp()}-store"
                private_dir(damaged.parent)
                aside.rename(damaged)
                result.moved_to = damaged
    return result


def _overwrite_remote(source: DBConnection, settings: Settings) -> int:
    uri = settings.store_uri
    target = connect(uri, storage_options=settings.storage)
    with lance_errors(f"restoring into {uri}", "retry; the backup is unchanged"):
        data = source.open_table(TABLE).to_arrow()
        target.create_table(TABLE, data=data, mode="overwrite")
        meta = source.open_table(META_TABLE).to_arrow()
        target.create_table(META_TABLE, data=meta, mode="overwrite")
    return int(data.num_rows)


def scrub_backups(
    settings: Settings, ids: Collection[str], pattern: re.Pattern[str] | None
) -> list[str]:
    """Rewrite every backup holding one of `ids` (or a row matching `pattern`) without it.

    Returns the names of the backups rewritten.
    """
    scrubbed = []
    for info in list_backups(settings):
        db = connect(info.path)
        with lance_errors(f"rewriting the backup {info.path}", "run the purge again"):
            table = db.open_table(TABLE)
            drop = set()
            for batch in table.search().limit(None).to_batches(_BATCH):
                vectors = [name for name in batch.schema.names if name in VECTOR_COLUMNS]
                for row in batch.drop_columns(vectors).to_pylist():
                    if row["id"] in ids or (pattern is not None and row_matches(row, pattern)):
                        drop.add(str(row["id"]))
            if not drop:
                continue
            deleted, _ = rewrite_without(table, drop)
        updated = info.model_copy(update={"insights": info.insights - deleted})
        write_private(info.path / INFO_FILE, updated.model_dump_json(exclude={"path"}))
        scrubbed.append(info.name)
    return scrubbed
