"""The recall ledger: what reached a model, for which plan, and how it went. SQLite.

Every recall that reaches a model (a tool call, the plan-triggered hook, the session-start
context) is a row: when, the session and client, the trigger, the plan (redacted, cut to
PLAN_MAX characters), the project, and the insight ids it gave with their scores. At
session end the judge's verdict on each insight it gave (helped, not used, misled and how)
is a row too, with the plan the insight was recalled for and that plan's embedding: what
feedback ranks with (`mtl_mcp.memory.feedback`). Each embedding names the model that made
it (`model`; rows of 0.3 and before have none): feedback compares a plan only with those of
its own model, and `reembed` brings the others along after a change of model.

- Owner-only (0600, like the rest of the data directory), and bounded: the oldest recalls
  beyond KEEP_RECALLS and verdicts beyond KEEP_VERDICTS are pruned.
- Several processes write it at once (the service, hooks, the CLI); SQLite serializes them.
  A write takes the write lock when it begins (`BEGIN IMMEDIATE`: a transaction that read
  first and wanted to write later would fail at once, "database is locked", where another
  writer holds it), and waits for it up to WRITE_WAIT seconds: a user's command waits for
  other writers, it does not fail.
- A purge leaves no trace: rows are deleted with `secure_delete` (freed pages zeroed) and
  the file is vacuumed, so neither an id nor a plan that matched survives in it.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mtl_mcp.errors import StoreError, StoreReadOnly
from mtl_mcp.schemas import LedgerHit, RecallEntry, VerdictEntry
from mtl_mcp.storage.ledger_sql import LEDGER_SCHEMA, chunks

if TYPE_CHECKING:  # numpy only where vectors are read or written: the hooks import this
    import numpy as np
    import numpy.typing as npt

LEDGER_FILE = "ledger.sqlite"
KEEP_RECALLS = 20_000
KEEP_VERDICTS = 20_000
PLAN_MAX = 2000
REEMBED_BATCH = 64  # verdicts' plans embedded again per transaction
BUSY_MS = 5000
WRITE_WAIT = 60.0  # seconds a write (or a vacuum) waits for other writers in all
_RANKS = 100  # more than any recall's hits (k <= 20): recall * _RANKS + rank names one hit


class Ledger:
    """The ledger file of one data directory. Thread-safe; opens lazily."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._ready = False

    @contextlib.contextmanager
    def _connection(self, write: bool = False) -> Iterator[sqlite3.Connection]:
        """A connection; for a `write`, in a transaction that holds the write lock from its
        start (committed at the end of the block)."""
        try:
            with self._lock:
                if not self._ready or not self.path.exists():  # deleted, as a damaged one is
                    self._create()
            connection = sqlite3.connect(self.path, timeout=BUSY_MS / 1000, isolation_level=None)
        except (sqlite3.Error, OSError) as exc:
            raise self._error(exc) from exc
        try:
            connection.execute("PRAGMA secure_delete = ON")
            connection.execute("PRAGMA foreign_keys = ON")
            if write:
                _waiting(lambda: connection.execute("BEGIN IMMEDIATE"))
            try:
                yield connection
            except BaseException:
                if connection.in_transaction:
                    connection.rollback()
                raise
            if connection.in_transaction:  # readers may still hold the file: wait for them
                _waiting(connection.commit)
        except sqlite3.Error as exc:
            raise self._error(exc) from exc
        finally:
            connection.close()

    def _error(self, exc: BaseException) -> StoreError:
        """Our error for SQLite's (or the file system's), with what to do."""
        text = str(exc)
        if "readonly" in text or "read-only" in text.lower() or isinstance(exc, PermissionError):
            return StoreReadOnly(
                f"the recall ledger {self.path} cannot be written ({text}): make the data "
                "directory writable; recall works meanwhile, without recording what it gave"
            )
        if "not a database" in text or "malformed" in text:
            return StoreError(
                f"the recall ledger {self.path} is damaged ({text}): delete it; it holds only "
                "the history of recalls and verdicts, and is made again"
            )
        return StoreError(f"the recall ledger {self.path} could not be used ({text}): retry")

    def _create(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not self.path.exists():  # created owner-only, before SQLite opens it
            os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))
        connection = sqlite3.connect(self.path, timeout=BUSY_MS / 1000)
        try:
            connection.executescript(LEDGER_SCHEMA)
            columns = {row[1] for row in connection.execute("PRAGMA table_info(verdicts)")}
            if "model" not in columns:  # a ledger of 0.3 or before
                try:
                    with connection:
                        connection.execute("ALTER TABLE verdicts ADD COLUMN model TEXT")
                except sqlite3.OperationalError as exc:  # another process added it just now
                    if "duplicate column" not in str(exc):
                        raise
        finally:
            connection.close()
        self._ready = True

    def exists(self) -> bool:
        return self.path.is_file()

    @property
    def _stamp_file(self) -> Path:
        return self.path.with_name(self.path.name + ".verdicts")

    def verdict_stamp(self) -> int:
        """Changes whenever verdicts or reinstatements change, in any process (a file's
        modification time: what feedback checks before each recall, for a stat's cost)."""
        try:
            return self._stamp_file.stat().st_mtime_ns
        except OSError:
            return 0

    def _touch(self) -> None:
        with contextlib.suppress(OSError):
            os.close(os.open(self._stamp_file, os.O_WRONLY | os.O_CREAT, 0o600))
            os.utime(self._stamp_file)

    # -- recalls ------------------------------------------------------------------------------

    def add_recalls(self, entries: Sequence[RecallEntry]) -> None:
        """Record recalls, then prune the oldest beyond KEEP_RECALLS."""
        if not entries:
            return
        with self._connection(write=True) as db:
            for entry in entries:
                cursor = db.execute(
                    "INSERT INTO recalls (at, session, client, trigger, plan, project) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        entry.at.isoformat(),
                        entry.session_id,
                        entry.client,
                        entry.trigger,
                        entry.plan[:PLAN_MAX],
                        entry.project,
                    ),
                )
                db.executemany(
                    "INSERT INTO recalled (recall, rank, insight, score) VALUES (?, ?, ?, ?)",
                    [(cursor.lastrowid, n, h.id, h.score) for n, h in enumerate(entry.hits)],
                )
            db.execute(
                "DELETE FROM recalls WHERE id <= (SELECT MAX(id) FROM recalls) - ?",
                (KEEP_RECALLS,),
            )

    def recalls(
        self,
        session_id: str | None = None,
        insight: str | None = None,
        limit: int | None = None,
    ) -> list[RecallEntry]:
        """Recalls, newest first: of one session, or those that gave one insight."""
        where, args = [], []
        if session_id is not None:
            where.append("r.session = ?")
            args.append(session_id)
        if insight is not None:
            where.append("r.id IN (SELECT recall FROM recalled WHERE insight = ?)")
            args.append(insight)
        sql = "SELECT r.id, r.at, r.session, r.client, r.trigger, r.plan, r.project FROM recalls r"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY r.id DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        if not self.exists():
            return []
        with self._connection() as db:
            rows = db.execute(sql, args).fetchall()
            hits: dict[int, list[LedgerHit]] = {row[0]: [] for row in rows}
            for chunk in chunks(list(hits)):
                marks = ", ".join("?" * len(chunk))
                for recall, insight_id, score in db.execute(
                    f"SELECT recall, insight, score FROM recalled WHERE recall IN ({marks}) "
                    "ORDER BY recall, rank",
                    chunk,
                ):
                    hits[recall].append(LedgerHit(id=insight_id, score=score))
        return [
            RecallEntry(
                at=datetime.fromisoformat(at),
                session_id=session,
                client=client,
                trigger=trigger,
                plan=plan,
                project=project,
                hits=hits[number],
            )
            for number, at, session, client, trigger, plan, project in rows
        ]

    def latest_plan(self, project: str) -> str | None:
        """The plan of the newest recall for a plan (a tool call or the hook) in a project."""
        if not self.exists():
            return None
        with self._connection() as db:
            row = db.execute(
                "SELECT plan FROM recalls WHERE project = ? AND plan != '' "
                "AND trigger IN ('tool', 'hook') ORDER BY id DESC LIMIT 1",
                (project,),
            ).fetchone()
        return str(row[0]) if row else None

    def sessions(self, limit: int = 20) -> list[str]:
        """The most recent sessions with a recall or a verdict, newest first."""
        if not self.exists():
            return []
        with self._connection() as db:
            rows = db.execute(
                "SELECT session, MAX(at) AS last FROM ("
                " SELECT session, at FROM recalls WHERE session IS NOT NULL"
                " UNION ALL SELECT session, at FROM verdicts"
                ") GROUP BY session ORDER BY last DESC LIMIT ?",
                (limit,),
            ).fetchall()
        return [row[0] for row in rows]

    # -- verdicts -----------------------------------------------------------------------------

    def add_verdicts(
        self,
        entries: Sequence[VerdictEntry],
        vectors: Sequence[npt.NDArray[np.float32] | None] | None = None,
        model: str | None = None,
    ) -> None:
        """Record verdicts, each with its plan's embedding (None: no plan was known) by the
        embedding model `model`."""
        if not entries:
            return
        blobs = [None if v is None else v.astype("float32").tobytes() for v in vectors or []]
        blobs += [None] * (len(entries) - len(blobs))
        with self._connection(write=True) as db:
            db.executemany(
                "INSERT INTO verdicts (at, session, insight, verdict, mode, reason, backend, "
                "plan, trigger, vector, model) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        e.at.isoformat(),
                        e.session_id,
                        e.insight,
                        e.verdict,
                        e.mode,
                        e.reason,
                        e.backend,
                        (e.plan or "")[:PLAN_MAX] or None,
                        e.trigger,
                        blob,
                        model if blob is not None else None,
                    )
                    for e, blob in zip(entries, blobs, strict=True)
                ],
            )
            db.execute(
                "DELETE FROM verdicts WHERE id <= (SELECT MAX(id) FROM verdicts) - ?",
                (KEEP_VERDICTS,),
            )
        self._touch()

    def reinstate(self, insight: str) -> None:
        """From now on, verdicts given before this moment no longer count against
        `insight` (a person decided it is good after all); its history stays."""
        with self._connection(write=True) as db:
            db.execute(
                "INSERT INTO reinstated (insight, at) VALUES (?, ?) "
                "ON CONFLICT(insight) DO UPDATE SET at = excluded.at",
                (insight, datetime.now(UTC).isoformat()),
            )
        self._touch()

    def reinstatements(self) -> dict[str, datetime]:
        if not self.exists():
            return {}
        with self._connection() as db:
            rows = db.execute("SELECT insight, at FROM reinstated").fetchall()
        return {insight: datetime.fromisoformat(at) for insight, at in rows}

    def verdicts(
        self, insight: str | None = None, session_id: str | None = None
    ) -> list[VerdictEntry]:
        """Verdicts, newest first: on one insight, or of one session."""
        return [entry for entry, _, _ in self._verdict_rows(insight, session_id)]

    def verdict_vectors(
        self, model: str, dim: int
    ) -> list[tuple[VerdictEntry, npt.NDArray[np.float32] | None]]:
        """Every verdict with its plan's embedding by `model`, oldest first: what feedback is
        built on. An embedding by another model is None (a row of 0.3 or before names no
        model: its embedding counts when it has `dim` dimensions, as its store's did)."""
        found = []
        for entry, vector, made in reversed(self._verdict_rows(None, None)):
            usable = vector is not None and made in (model, None) and len(vector) == dim
            found.append((entry, vector if usable else None))
        return found

    def vector_models(self) -> dict[str | None, int]:
        """How many verdicts' plan embeddings each model made (None: a row of 0.3 or before)."""
        if not self.exists():
            return {}
        with self._connection() as db:
            rows = db.execute(
                "SELECT model, COUNT(*) FROM verdicts WHERE vector IS NOT NULL GROUP BY model"
            ).fetchall()
        return dict(rows)

    def reembed(
        self,
        embed: Callable[[str], npt.NDArray[np.float32]],
        model: str,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Embed again, with `model` (`embed`: a plan's unit vector), the plan of every verdict
        whose embedding another model made, or none named; how many. What reindex does with
        the store's vectors, for the verdicts: feedback then counts them under the new model."""
        if not self.exists():
            return 0
        with self._connection() as db:
            rows = db.execute(
                "SELECT id, plan FROM verdicts WHERE plan IS NOT NULL "
                "AND (model IS NULL OR model != ?)",
                (model,),
            ).fetchall()
        for start in range(0, len(rows), REEMBED_BATCH):
            batch = rows[start : start + REEMBED_BATCH]
            vectors = [embed(plan).astype("float32").tobytes() for _, plan in batch]
            with self._connection(write=True) as db:
                db.executemany(
                    "UPDATE verdicts SET vector = ?, model = ? WHERE id = ?",
                    [(b, model, n) for (n, _), b in zip(batch, vectors, strict=True)],
                )
            if progress:
                progress(len(batch))
        if rows:
            self._touch()
        return len(rows)

    def _verdict_rows(
        self, insight: str | None, session_id: str | None
    ) -> list[tuple[VerdictEntry, npt.NDArray[np.float32] | None, str | None]]:
        if not self.exists():
            return []
        where, args = [], []
        if insight is not None:
            where.append("insight = ?")
            args.append(insight)
        if session_id is not None:
            where.append("session = ?")
            args.append(session_id)
        sql = (
            "SELECT at, session, insight, verdict, mode, reason, backend, plan, trigger, vector, "
            "model FROM verdicts"
            + (" WHERE " + " AND ".join(where) if where else "")
            + " ORDER BY id DESC"
        )
        import numpy as np

        with self._connection() as db:
            rows = db.execute(sql, args).fetchall()
        found = []
        for row in rows:
            at, session, insight_id, verdict, mode, reason, backend, plan, trigger = row[:9]
            blob, model = row[9:]
            entry = VerdictEntry(
                at=datetime.fromisoformat(at),
                session_id=session,
                insight=insight_id,
                verdict=verdict,
                mode=mode,
                reason=reason,
                backend=backend,
                plan=plan,
                trigger=trigger,
            )
            # A blob that is no whole number of floats is damaged: no vector, not a crash.
            whole = blob and len(blob) % 4 == 0
            vector = np.frombuffer(blob, dtype=np.float32).copy() if whole else None
            found.append((entry, vector, model))
        return found

    # -- consolidation ------------------------------------------------------------------------

    def last_used(self, since: datetime | None = None) -> dict[str, datetime]:
        """When each insight last reached a plan (a tool call or the hook, not the
        session-start context) or last helped a session, by the ledger."""
        if not self.exists():
            return {}
        after = (since or datetime.min.replace(tzinfo=UTC)).isoformat()
        with self._connection() as db:
            rows = db.execute(
                "SELECT d.insight, MAX(r.at) FROM recalled d JOIN recalls r ON r.id = d.recall "
                "WHERE r.trigger IN ('tool', 'hook') AND r.at >= ? GROUP BY d.insight "
                "UNION ALL SELECT insight, MAX(at) FROM verdicts "
                "WHERE verdict = 'helped' AND at >= ? GROUP BY insight",
                (after, after),
            ).fetchall()
        found: dict[str, datetime] = {}
        for insight, at in rows:
            when = datetime.fromisoformat(at)
            if insight not in found or when > found[insight]:
                found[insight] = when
        return found

    def move(self, moves: dict[str, str]) -> list[tuple[str, int, str]]:
        """Give the recalls and verdicts of some insights to others (consolidation merged
        them: {merged id: kept id}). Returns (table, key, former id) of each row moved,
        for `move_back`. Verdicts given before an insight was reinstated stay with it:
        they no longer count, and must not start counting against the kept one."""
        if not moves or not self.exists():
            return []
        moved: list[tuple[str, int, str]] = []
        reinstated = self.reinstatements()
        with self._connection(write=True) as db:
            for chunk in chunks(sorted(moves)):
                marks = ", ".join("?" * len(chunk))
                for key, insight in db.execute(
                    f"SELECT recall * {_RANKS} + rank, insight FROM recalled "
                    f"WHERE insight IN ({marks})",
                    chunk,
                ):
                    moved.append(("recalled", key, insight))
                for key, insight, when in db.execute(
                    f"SELECT id, insight, at FROM verdicts WHERE insight IN ({marks})", chunk
                ).fetchall():
                    since = reinstated.get(insight)
                    if since is None or datetime.fromisoformat(when) > since:
                        moved.append(("verdicts", key, insight))
            self._set_insights(db, [(t, k, moves[i]) for t, k, i in moved])
        self._touch()
        return moved

    @staticmethod
    def _set_insights(db: sqlite3.Connection, rows: Sequence[tuple[str, int, str]]) -> None:
        """Point ledger rows at other insights: (table, key, insight). A recalled row's key
        is its recall and rank (VACUUM renumbers the rowids of a table without a primary
        key); a verdict's is its id."""
        for table, key, insight in rows:
            if table == "recalled":
                recall, rank = divmod(key, _RANKS)
                db.execute(
                    "UPDATE recalled SET insight = ? WHERE recall = ? AND rank = ?",
                    (insight, recall, rank),
                )
            elif table == "verdicts":
                db.execute("UPDATE verdicts SET insight = ? WHERE id = ?", (insight, key))

    def move_back(self, moved: Sequence[tuple[str, int, str]]) -> None:
        """Undo `move`: each row back to the insight it was about (rows pruned since are
        gone, and stay gone)."""
        if not moved or not self.exists():
            return
        with self._connection(write=True) as db:
            self._set_insights(db, moved)
        self._touch()

    # -- figures and purges -------------------------------------------------------------------

    def figures(self) -> dict[str, Any]:
        """Recalls by trigger; sessions seen (any recall, the session-start context included)
        and those that got a recall for a plan (a tool call or the hook); verdicts by kind."""
        empty = {"recalls_by_trigger": {}, "sessions": 0, "sessions_with_plan_recall": 0}
        if not self.exists():
            return {**empty, "plan_recall_share": None, "verdicts": {}}
        with self._connection() as db:
            triggers = dict(db.execute("SELECT trigger, COUNT(*) FROM recalls GROUP BY trigger"))
            seen, planned = db.execute(
                "SELECT COUNT(DISTINCT session), "
                "COUNT(DISTINCT CASE WHEN trigger IN ('tool', 'hook') THEN session END) "
                "FROM recalls WHERE session IS NOT NULL"
            ).fetchone()
            kinds = dict(
                db.execute(
                    "SELECT verdict || COALESCE(':' || mode, ''), COUNT(*) FROM verdicts "
                    "GROUP BY verdict, mode"
                )
            )
        return {
            "recalls_by_trigger": triggers,
            "sessions": seen,
            "sessions_with_plan_recall": planned,
            "plan_recall_share": round(planned / seen, 3) if seen else None,
            "verdicts": kinds,
        }

    def forget(self, ids: Collection[str]) -> int:
        """Remove every row about these insights (their recalls' other hits stay); returns
        how many rows went. The file is vacuumed: nothing of them remains in it."""
        if not ids or not self.exists():
            return 0
        removed = 0
        touched: set[int] = set()  # recalls that gave one of them
        with self._connection(write=True) as db:
            for chunk in chunks(sorted(ids)):
                marks = ", ".join("?" * len(chunk))
                touched.update(
                    number
                    for (number,) in db.execute(
                        f"SELECT recall FROM recalled WHERE insight IN ({marks})", chunk
                    )
                )
                removed += db.execute(
                    f"DELETE FROM recalled WHERE insight IN ({marks})", chunk
                ).rowcount
                removed += db.execute(
                    f"DELETE FROM verdicts WHERE insight IN ({marks})", chunk
                ).rowcount
                db.execute(f"DELETE FROM reinstated WHERE insight IN ({marks})", chunk)
            # A recall that gave nothing else goes too (its plan matched them); one that
            # gave nothing at all was never about them, and stays.
            for chunk in chunks(sorted(touched)):
                marks = ", ".join("?" * len(chunk))
                db.execute(
                    f"DELETE FROM recalls WHERE id IN ({marks}) "
                    "AND id NOT IN (SELECT recall FROM recalled)",
                    chunk,
                )
        self._vacuum()
        self._touch()
        return removed

    def scrub(self, pattern: re.Pattern[str]) -> int:
        """Remove the recalls and verdicts whose text matches `pattern`; vacuumed."""
        if not self.exists():
            return 0
        with self._connection(write=True) as db:
            recalls = [
                number
                for number, plan, project in db.execute("SELECT id, plan, project FROM recalls")
                if pattern.search(plan or "") or pattern.search(project or "")
            ]
            verdicts = [
                number
                for number, *texts in db.execute("SELECT id, plan, reason FROM verdicts")
                if any(pattern.search(text or "") for text in texts)
            ]
            for table, numbers in (("recalls", recalls), ("verdicts", verdicts)):
                for chunk in chunks(numbers):
                    marks = ", ".join("?" * len(chunk))
                    db.execute(f"DELETE FROM {table} WHERE id IN ({marks})", chunk)
        if recalls or verdicts:
            self._vacuum()
            self._touch()
        return len(recalls) + len(verdicts)

    def _vacuum(self) -> None:
        try:
            connection = sqlite3.connect(self.path, timeout=BUSY_MS / 1000)
            try:
                _waiting(lambda: connection.execute("VACUUM"))
            finally:
                connection.close()
        except sqlite3.Error as exc:
            raise StoreError(
                f"the recall ledger {self.path} could not be vacuumed ({exc})"
            ) from exc


def _waiting(step: Callable[[], object]) -> None:
    """`step()`, tried again while another writer holds the lock, up to WRITE_WAIT seconds
    (each try itself waits BUSY_MS for it)."""
    deadline = time.monotonic() + WRITE_WAIT
    while True:
        try:
            step()
            return
        except sqlite3.OperationalError as exc:
            busy = "locked" in str(exc) or "busy" in str(exc)
            if not busy or time.monotonic() >= deadline:
                raise
            time.sleep(0.05)
