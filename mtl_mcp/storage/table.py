"""The insight table: opening and migrating it, its snapshot, and writes that survive company.

Safe with several processes at once: the table has an (unenforced) primary key on `id`, so
concurrent `merge_insert`s of one id never duplicate it; counters change through SQL
increments, not read-modify-write; a write that meets another writer's commit is retried;
the table is compacted now and then by one process at a time.

In a local directory every read checks for a newer version, so one process's writes are
visible to the others at once, and lock files beside the store order compaction and purges.
The check is one stat of the table's manifest directory, which every commit changes; only
within CHANGE_MARGIN of a change does it ask LanceDB (a round trip through its event loop).
On object storage (many machines, no shared lock file, and a LIST request per version
check) the snapshot is reloaded when this process wrote, or when `refresh()` finds other
machines' writes; every write starts from the latest version; and the compaction turn goes
to the writer whose commit made the version a multiple of OPTIMIZE_EVERY, which LanceDB's
commit protocol gives to exactly one writer.
"""

from __future__ import annotations

import logging
import os
import random
import secrets
import threading
import time
from collections.abc import Callable, Collection
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import numpy as np
import pyarrow as pa

from mtl_mcp.config import Settings, local_path
from mtl_mcp.errors import StoreBusy, StoreDamaged, StoreError, StoreReadOnly
from mtl_mcp.files import private_dir
from mtl_mcp.storage.backup import make_backup
from mtl_mcp.storage.lance import connect, lance_errors, rewrite_without
from mtl_mcp.storage.locks import creating, store_lock, try_store_lock
from mtl_mcp.storage.schema import (
    META_SCHEMA,
    META_TABLE,
    NEXT_VECTOR,
    PROJECT_SALT,
    SCHEMA_VERSION,
    TABLE,
    insight_schema,
    row_columns,
    sql_string,
    vector_model,
)
from mtl_mcp.storage.snapshot import Snapshot

if TYPE_CHECKING:
    from lancedb.db import DBConnection
    from lancedb.table import Table

logger = logging.getLogger(__name__)

OPTIMIZE_EVERY = 50  # table versions; many small appends slow reads until compaction
# How coarse a file system's timestamps may be: a commit within this of the last change may
# leave the manifest directory's mtime as it was (FAT keeps 2 s; ext4 a clock tick).
CHANGE_MARGIN_NS = 2_000_000_000
KEEP_VERSIONS = timedelta(hours=1)  # how long compaction keeps older versions, locally
KEEP_REMOTE_VERSIONS = timedelta(minutes=10)  # and on object storage
WRITE_ATTEMPTS = 6
CREATE_ATTEMPTS = 6  # opens of a store another machine is creating (about 4 s in all)
T = TypeVar("T")
DOCTOR = "run `mtl-mcp doctor`: it says what is damaged and which backup restores it"

# What a new store records about its embedding model: (name, vector dimension).
ModelInfo = Callable[[], tuple[str, int]]


class InsightTable:
    """One store's insight and meta tables. Opens lazily; every method is thread-safe.

    `uri` defaults to the settings' store; `team` makes it a team pool (`storage.schema`).
    """

    def __init__(
        self, settings: Settings, model_info: ModelInfo, uri: str | None = None, team: bool = False
    ) -> None:
        self.settings = settings
        self.uri = uri or settings.store_uri
        self.local = local_path(self.uri)  # None on object storage
        self.team = team
        self._model_info = model_info
        self._lock = threading.RLock()
        self._writing = threading.Lock()  # one write at a time in this process
        self._db: DBConnection | None = None
        self._table: Table | None = None
        self._meta: dict[str, str] = {}
        self._snapshot: Snapshot | None = None
        self._written = 0  # on object storage: the version of this process's last write
        # Locally: the manifest directory's (inode, mtime) at the last version check, and
        # the time just before that check.
        self._checked: tuple[tuple[int, int], int] | None = None
        self._last_optimized = 0
        self.created = False  # whether opening created a new, empty store

    # -- opening ---------------------------------------------------------------------------

    @property
    def meta(self) -> dict[str, str]:
        """The meta table as of the last open or snapshot: schema version, model, dim."""
        if not self._meta:
            self.open()
        return dict(self._meta)

    def _connect(self) -> DBConnection:
        if self._db is None:
            if self.local is not None:
                private_dir(self.settings.home)
            self._db = connect(
                self.uri, consistent=self.local is not None, storage_options=self.settings.storage
            )
        return self._db

    def exists(self) -> bool:
        """Whether the store was created already; asking does not create it. (No lock: on
        object storage this may wait on the network, and readers must not wait with it.)"""
        if self._table is not None:
            return True
        with lance_errors(f"reading the store at {self.uri}", DOCTOR):
            return TABLE in self._connect().list_tables().tables

    def open(self) -> Table:
        """The LanceDB table, opened (and created, checked, migrated) on first use."""
        with self._lock:
            if self._table is not None:
                return self._table
            db = self._connect()
            for attempt in range(1, CREATE_ATTEMPTS + 1):
                try:
                    table, self._meta = self._open_complete(db)
                    break
                except StoreDamaged:
                    # On object storage no lock keeps a store half made by another machine
                    # from view: its tables appear one by one, then the meta rows.
                    if self.local is not None or attempt == CREATE_ATTEMPTS:
                        raise
                    time.sleep(0.2 * attempt)
            for key in ("schema_version", "dim"):
                if not self._meta.get(key, "0").isdigit():
                    raise StoreDamaged(
                        f"the store's meta table in {self.uri} is damaged "
                        f"({key}={self._meta.get(key)!r}): {DOCTOR}"
                    )
            self._migrate(table)
            self._table = table
            self._last_optimized = table.version
            return table

    def _open_complete(self, db: DBConnection) -> tuple[Table, dict[str, str]]:
        """The insight table (created if new) and the meta table's entries; StoreDamaged
        if a table or a meta entry is missing."""
        with lance_errors(f"reading the store at {self.uri}", DOCTOR):
            with creating(self.local):
                table = self._open_or_create(db)
            rows = db.open_table(META_TABLE).to_arrow().to_pylist()
        meta = {row["key"]: row["value"] for row in rows}
        missing = {"schema_version", "dim", "embed_model"} - set(meta)
        if self.team:
            missing |= {PROJECT_SALT} - set(meta)
        if missing and self.local is None:  # a local store predates some keys: _migrate
            raise StoreDamaged(
                f"the store's meta table in {self.uri} lacks {sorted(missing)}: {DOCTOR}"
            )
        return table, meta

    def _open_or_create(self, db: DBConnection) -> Table:
        """The insight table (and its meta table), created if this is a new store."""
        created = TABLE not in db.list_tables().tables
        local = self.local
        if created and local is not None and (local / f"{TABLE}.lance").is_dir():
            raise StoreDamaged(
                f"the store at {self.uri} is damaged: the insight table's "
                f"version manifests are missing. {DOCTOR}"
            )
        if created:
            self.refuse_if_frozen()
        else:
            table = db.open_table(TABLE)
            # Reads every data file's footer: a truncated or missing file fails here,
            # with advice, rather than as a raw error in the first query.
            table.search().select(["id"]).limit(None).to_arrow()
            return table
        name, dim = self._model_info()
        table = db.create_table(TABLE, schema=insight_schema(dim, self.team), exist_ok=True)
        meta = db.create_table(META_TABLE, schema=META_SCHEMA, exist_ok=True)
        fresh = {"schema_version": str(SCHEMA_VERSION), "dim": str(dim), "embed_model": name}
        if self.team:
            fresh[PROJECT_SALT] = secrets.token_hex(16)
        if meta.count_rows() == 0:
            # Two machines creating one pool at once: the key's unenforced primary key keeps
            # one salt, the first committed, and both read that one.
            meta.merge_insert("key").when_not_matched_insert_all().execute(
                pa.Table.from_pylist(
                    [{"key": k, "value": v} for k, v in fresh.items()], schema=meta.schema
                )
            )
        self.created = True
        return table

    def _migrate(self, table: Table) -> None:
        """Refuse a newer store; give an older one the columns added since (null-filled)."""
        version = int(self._meta.get("schema_version", "0"))
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"the store at {self.uri} was written by a newer mtl-mcp "
                f"(schema {version}, this one reads {SCHEMA_VERSION}): upgrade with "
                "`pip install -U mtl-mcp`"
            )
        expected = insight_schema(int(self._meta.get("dim", "384")), self.team)
        missing = [f for f in expected if f.name not in table.schema.names]
        if not missing and version == SCHEMA_VERSION:
            return
        self.refuse_if_frozen()
        if not self.team:  # a team pool is backed up by its object store, not by each member
            make_backup(self.settings, "migration")
        with lance_errors(f"migrating the store at {self.uri}", DOCTOR):
            if missing:
                logger.info("migrating store: adding columns %s", [f.name for f in missing])
                table.add_columns(missing)
            if version < SCHEMA_VERSION:
                self.set_meta({"schema_version": str(SCHEMA_VERSION)})

    def set_meta(self, values: dict[str, str]) -> None:
        """Insert or replace meta entries (the embedding model after a reindex, say)."""
        self.refuse_if_frozen()
        with lance_errors(f"writing the meta table of {self.uri}", DOCTOR):
            meta = self._connect().open_table(META_TABLE)
            rows = pa.Table.from_pylist(
                [{"key": k, "value": v} for k, v in values.items()], schema=meta.schema
            )
            meta.merge_insert(
                "key"
            ).when_matched_update_all().when_not_matched_insert_all().execute(rows)
        self._meta.update(values)

    def refuse_if_frozen(self) -> None:
        """A frozen memory (`read_only`, e.g. a trial's snapshot) takes no write at all."""
        if self.settings.read_only:
            raise StoreReadOnly(
                f"the store at {self.uri} is frozen (read_only = true, MTL_MCP_READ_ONLY): "
                "reading it works, nothing in it can change; a trial's snapshot is frozen so "
                "that scoring never changes the memory it measures"
            )

    def meta_value(self, key: str) -> str | None:
        """One meta entry, read from the latest version now (not the cached meta)."""
        with lance_errors(f"reading the meta table of {self.uri}", "retry"):
            meta = self._connect().open_table(META_TABLE)
            rows = meta.search().where(f"key = {sql_string(key)}").limit(None).to_arrow()
        values = rows.column("value").to_pylist()
        return str(values[0]) if values else None

    def meta_entries(self, prefix: str) -> dict[str, str]:
        """The meta entries whose key starts with `prefix`, read now."""
        like = sql_string(prefix.replace("%", "") + "%")  # "_" matches any: filtered below
        with lance_errors(f"reading the meta table of {self.uri}", "retry"):
            meta = self._connect().open_table(META_TABLE)
            rows = meta.search().where(f"key LIKE {like}").limit(None).to_arrow().to_pylist()
        return {str(r["key"]): str(r["value"]) for r in rows if str(r["key"]).startswith(prefix)}

    def meta_swap(self, key: str, old: str | None, new: str) -> bool:
        """Set a meta entry to `new` only if it is `old` now (None: absent), a compare-and-swap
        other machines cannot interleave with: LanceDB lets one of two racing writers through;
        the other's retried update finds the entry changed. True if this one won."""
        self.refuse_if_frozen()
        with lance_errors(f"writing the meta table of {self.uri}", "retry"):
            meta = self._connect().open_table(META_TABLE)
            if old is None:
                row = pa.Table.from_pylist([{"key": key, "value": new}], schema=meta.schema)
                meta.merge_insert("key").when_not_matched_insert_all().execute(row)
            else:
                meta.update(
                    where=f"key = {sql_string(key)} AND value = {sql_string(old)}",
                    values={"value": new},
                )
        return self.meta_value(key) == new

    # -- the snapshot ------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """The rows and vectors of the table, as of the latest version this process knows.

        In a local directory that is the latest version, re-checked on every call. On object
        storage it is the last one loaded, reloaded here only after this process wrote;
        `refresh()` brings in other machines' writes.
        """
        table = self.open()
        with self._lock:
            current = self._snapshot
            if self.local is None:
                if current is None or current.version < self._written:
                    current = self._snapshot = self._load(None)
            elif current is None or (not self._unchanged() and current.version != table.version):
                current = self._snapshot = self._load(table.version)
            return current

    def _unchanged(self) -> bool:
        """Whether no commit can have landed since the last version check, from one stat of
        the manifest directory (see the module docstring); if not sure, record this check
        (the caller asks LanceDB next)."""
        assert self.local is not None
        now = time.time_ns()
        try:
            found = os.stat(self.local / f"{TABLE}.lance" / "_versions")
        except OSError:
            self._checked = None
            return False
        stamp = (found.st_ino, found.st_mtime_ns)
        checked = self._checked
        if checked is not None and checked[0] == stamp and checked[1] - stamp[1] > CHANGE_MARGIN_NS:
            return True
        self._checked = (stamp, now)
        return False

    @property
    def loaded(self) -> Snapshot | None:
        """The snapshot last loaded (or patched), without looking at the table. No lock:
        an open on object storage holds it while it waits on the network."""
        return self._snapshot

    def refresh(self) -> Snapshot:
        """Look for other writers' commits now and load them, if any (one LIST request when
        nothing changed). Slow network work happens outside the lock: readers of the
        current snapshot never wait for it."""
        self.open()
        with self._lock:
            current = self._snapshot
        with lance_errors(
            f"reading the store at {self.uri}", "retry; if it persists run `mtl-mcp doctor`"
        ):
            latest = self._connect().open_table(TABLE).version
        if current is not None and current.version >= latest:
            return current
        loaded = self._load(None)
        with self._lock:
            if self._snapshot is None or loaded.version > self._snapshot.version:
                self._snapshot = loaded
            return self._snapshot

    def _load(self, version: int | None) -> Snapshot:
        """A snapshot of `version` (None: the latest), with the meta table reread: another
        process may have reindexed (model, dimension)."""
        with lance_errors(
            f"reading the store at {self.uri}", "retry; if it persists run `mtl-mcp doctor`"
        ):
            meta_rows = self._connect().open_table(META_TABLE).to_arrow().to_pylist()
            meta = {row["key"]: row["value"] for row in meta_rows}
            pinned = self._connect().open_table(TABLE)
            # Both scans of the snapshot see the same rows: a local handle would otherwise
            # follow new versions; one on object storage stays at the version it opened.
            pinned.checkout(pinned.version if version is None else version)
            snapshot = Snapshot.load(pinned, int(meta.get("dim", "384")))
            snapshot.model = vector_model(pinned.schema, meta)
        with self._lock:
            self._meta = meta
        return snapshot

    def forget_snapshot(self) -> None:
        """Drop the cached snapshot: the next read loads the table afresh."""
        with self._lock:
            self._snapshot = None

    # -- writing -----------------------------------------------------------------------------

    def write(
        self,
        action: Callable[[Table], T],
        patch: Callable[[Snapshot], Snapshot] | None = None,
        exclusive: bool = False,
    ) -> T:
        """Run one write with retries on commit conflicts, then compact now and then.

        `patch` makes the in-memory snapshot with the same change: when this write is the only
        one since the snapshot was read, the patched copy replaces a full reload (readers of
        the old one keep theirs). `exclusive`: no other process writes meanwhile.
        """
        self.refuse_if_frozen()
        table = self.open()
        with self._writing, store_lock(self.local, exclusive=exclusive):
            result = self._attempt(table, action)
            with self._lock:
                snapshot, after = self._snapshot, table.version
                if patch and snapshot and after == snapshot.version + 1:
                    patched = patch(snapshot)
                    patched.version = after
                    self._snapshot = patched
                self._written = after
            if self._compaction_turn(after):
                self._compact(table)
        return result

    def _attempt(self, table: Table, action: Callable[[Table], T]) -> T:
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            try:
                with lance_errors(
                    f"writing to {self.uri}", "retry; if it persists run `mtl-mcp doctor`"
                ):
                    if self.local is None:
                        # A handle on object storage stays at the version it last saw: an
                        # update would miss rows other machines added since.
                        _follow_latest(table)
                    return action(table)
            except StoreBusy:
                if attempt == WRITE_ATTEMPTS:
                    raise
                time.sleep(random.uniform(0.01, 0.05) * attempt)
            except StoreDamaged as exc:
                # On object storage, another machine's purge may have removed the version
                # this write started from: from the latest one, it goes through.
                if self.local is not None or attempt == WRITE_ATTEMPTS:
                    raise
                logger.info("write retried from the latest version: %s", exc)
        raise AssertionError("unreachable")  # the loop returns or raises

    def _compaction_turn(self, version: int) -> bool:
        """Whether this process should compact after its write made `version`."""
        if self.local is None:
            return version % OPTIMIZE_EVERY == 0  # exactly one commit makes each version
        if version - self._last_optimized >= OPTIMIZE_EVERY:
            self._last_optimized = version
            return True
        return False

    def insert(self, rows: list[dict[str, Any]]) -> int:
        """Insert rows whose ids are new; an id already present (another writer) is kept.
        The in-memory snapshot gains them too, when no other writer came between. Returns
        how many rows were inserted."""
        if not rows:
            return 0
        vectors = np.asarray([row["vector"] for row in rows], dtype=np.float32)

        def insert(table: Table) -> int:
            schema = table.schema
            data = pa.Table.from_pylist(rows, schema=schema)
            # While a re-embedding runs, a new row has no new vector yet (null: a later batch
            # embeds it); otherwise a bad vector is an error.
            unfilled: Literal["null", "error"] = "null" if NEXT_VECTOR in schema.names else "error"
            if self._appendable(table, rows):
                table.add(data, on_bad_vectors=unfilled)
                return len(rows)
            builder = table.merge_insert("id").when_not_matched_insert_all()
            return int(builder.execute(data, on_bad_vectors=unfilled).num_inserted_rows)

        return self.write(
            insert,
            patch=lambda snapshot: snapshot.appended(
                pa.Table.from_pylist(rows, schema=snapshot.rows.schema), vectors
            ),
            exclusive=self.local is not None,
        )

    def _appendable(self, table: Table, rows: list[dict[str, Any]]) -> bool:
        """Whether `rows` can simply be appended (a merge_insert reads every stored id to find
        the new ones: 40 of a record's 60 ms at 10k rows). Only in a local directory, under
        the exclusive store lock, with the snapshot at the latest version and holding none of
        their ids; on object storage, no lock keeps other machines out."""
        snapshot = self._snapshot
        ids = {row["id"] for row in rows}
        return (
            self.local is not None
            and snapshot is not None
            and len(ids) == len(rows)
            and not any(i in snapshot.positions for i in ids)
            and snapshot.version == table.version
        )

    def upsert(self, rows: list[dict[str, Any]]) -> None:
        """Replace stored rows by `rows` (matched by id), vectors and all, in one commit: an
        edit, or a consolidation's counters, lists, notes and status of hundreds of rows.
        Ids not stored are left out. The snapshot is read afresh afterwards: texts and
        vectors may have changed in place."""
        if not rows:
            return

        def rewrite(table: Table) -> Any:
            schema = table.schema
            data = pa.Table.from_pylist(rows, schema=schema)
            unfilled: Literal["null", "error"] = "null" if NEXT_VECTOR in schema.names else "error"
            builder = table.merge_insert("id").when_matched_update_all()
            return builder.execute(data, on_bad_vectors=unfilled)

        self.write(rewrite)

    def read(
        self, where: str, columns: list[str], limit: int | None = None
    ) -> list[dict[str, Any]]:
        """`columns` of the rows matching `where` (at most `limit`), read from the latest
        version now."""
        table = self.open()
        with self._writing, lance_errors(f"reading the store at {self.uri}", "retry"):
            if self.local is None:  # not while a write of this process uses the handle
                _follow_latest(table)
            query = table.search().where(where).select(columns).limit(limit)
            rows: list[dict[str, Any]] = query.to_arrow().to_pylist()
        return rows

    def update(
        self,
        where: str,
        values_sql: dict[str, str],
        patch: Callable[[Snapshot], Snapshot] | None = None,
    ) -> None:
        """An SQL update of the rows matching `where` (increments stay atomic)."""
        self.write(lambda t: t.update(where=where, values_sql=values_sql), patch)

    def update_rows(self, where: str, values_sql: dict[str, str]) -> None:
        """`update`, for a change that leaves the rows' texts, status and ratings as they were
        (a merge: support, labels, projects): the changed rows are read back into the
        snapshot, instead of a reload of every row (~140 ms at 10k) at the next read."""
        table = self.open()

        def reread(snapshot: Snapshot) -> Snapshot:
            columns = snapshot.rows.column_names
            query = table.search().where(where).select(columns).limit(None)
            with lance_errors(f"reading the store at {self.uri}", "retry"):
                return snapshot.with_rows(query.to_arrow())

        self.update(where, values_sql, reread)

    def delete(self, where: str) -> None:
        self.write(lambda t: t.delete(where))

    def _compact(self, table: Table) -> None:
        """Compact, unless another process is at it (servers reach the threshold together)."""
        with try_store_lock(self.local, ".compact.lock") as mine:
            if not mine:
                return
            try:
                with lance_errors(f"compacting {self.uri}", "skipped"):
                    # Younger versions stay, so concurrent readers keep theirs. On object
                    # storage every version check lists them all, and a reader there holds
                    # a version only while it loads a snapshot: minutes are plenty.
                    keep = KEEP_VERSIONS if self.local is not None else KEEP_REMOTE_VERSIONS
                    table.optimize(cleanup_older_than=keep)
            except StoreBusy as exc:  # a write committed first: harmless, next time
                logger.info("compaction deferred: %s", exc)
                return
            except StoreError:
                logger.warning("compaction skipped", exc_info=True)
                return
            logger.info("compacted the table at version %d", table.version)

    # -- rewriting the whole table -------------------------------------------------------------

    def purge(self, ids: Collection[str]) -> tuple[int, int]:
        """Delete rows and every copy of them in the table's files, older versions included.

        Waits for other processes' writes; readers of older versions fail once and reload.
        Returns (rows deleted, versions removed).
        """
        self.refuse_if_frozen()
        table = self.open()
        remote = self.local is None
        with self._lock, self._writing, store_lock(self.local, exclusive=True):
            with lance_errors(f"purging {self.uri}", "nothing was lost: run the purge again"):
                if remote:
                    _follow_latest(table)
                result = rewrite_without(table, ids, others_may_write=remote)
            self._snapshot = None
            self._last_optimized = table.version
        return result

    def rows_without_vectors(self) -> list[dict[str, Any]]:
        """Every row, vector column left out (for a reindex)."""
        table = self.open()
        with lance_errors(f"reading the store at {self.uri}", DOCTOR):
            if self.local is None:
                _follow_latest(table)
            rows: list[dict[str, Any]] = (
                table.search().select(row_columns(table.schema)).limit(None).to_arrow().to_pylist()
            )
        return rows

    def replace(self, rows: list[dict[str, Any]], model_name: str, dim: int) -> None:
        """Overwrite every row (same ids, new vectors) and record the model they came from.
        Callers hold the store lock exclusively: writes meanwhile would be lost."""
        self.refuse_if_frozen()
        data = pa.Table.from_pylist(rows, schema=insight_schema(dim))
        with self._lock:
            with lance_errors(f"rewriting {self.uri}", DOCTOR):
                self._table = self._connect().create_table(TABLE, data=data, mode="overwrite")
            self.set_meta({"embed_model": model_name, "dim": str(dim)})
            self._snapshot = None

    def close(self) -> None:
        """Forget the open table and snapshot; the next use reopens them."""
        with self._lock:
            self._table = None
            self._snapshot = None


def _follow_latest(table: Table) -> None:
    """Move a handle on object storage to the latest version (one LIST request)."""
    table.checkout_latest()  # type: ignore[no-untyped-call]  # untyped in lancedb 0.40
