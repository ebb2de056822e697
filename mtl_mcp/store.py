"""The insight store: one LanceDB table of insights, plus a small table of metadata.

Safe with several processes at once: ids are derived from content and the table has an
(unenforced) primary key, so concurrent `merge_insert`s of one insight never duplicate it;
counters change through SQL increments, not read-modify-write; the connection re-checks
the latest table version on every read, so one process's writes are visible to the others.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import random
import re
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pyarrow as pa
from pydantic import ValidationError

from mtl_mcp.config import Settings, private_umask
from mtl_mcp.embed import Embedder, Vector, get_embedder
from mtl_mcp.errors import EmbeddingError, InputError, NotFoundError, StoreError
from mtl_mcp.infer import fill_labels
from mtl_mcp.lint import LintReport, lint
from mtl_mcp.locks import creating, store_lock, try_store_lock
from mtl_mcp.models import (
    CATEGORIES,
    Insight,
    InsightDraft,
    ListSort,
    Provenance,
    RecallHit,
    RecordResult,
    Scope,
)
from mtl_mcp.ranking import fuse, plan_vector
from mtl_mcp.redact import redact
from mtl_mcp.retrieval import RecallMethod, get_method
from mtl_mcp.snapshot import Snapshot

if TYPE_CHECKING:
    from lancedb.db import DBConnection
    from lancedb.table import Table

logger = logging.getLogger(__name__)

TABLE = "insights"
META_TABLE = "meta"
SCHEMA_VERSION = 1
OPTIMIZE_EVERY = 50  # table versions; many small appends slow reads until compaction
NOTES_KEPT = 10
T = TypeVar("T")


def insight_schema(dim: int) -> pa.Schema:
    """The table's Arrow schema. `id` is the unenforced primary key merge_insert relies on."""
    text, texts, count = pa.string(), pa.list_(pa.string()), pa.int32()
    when = pa.timestamp("us", tz="UTC")
    pk = {b"lance-schema:unenforced-primary-key:position": b"1"}
    return pa.schema(
        [
            pa.field("id", text, nullable=False, metadata=pk),
            *(pa.field(name, text) for name in ("title", "description", "content")),
            *(pa.field(name, text) for name in ("polarity", "category", "domain")),
            pa.field("languages", texts),
            pa.field("tags", texts),
            pa.field("project", text),
            pa.field("projects", texts),
            *(pa.field(name, text) for name in ("session_id", "client", "model")),
            pa.field("created_at", when),
            pa.field("updated_at", when),
            *(pa.field(name, count) for name in ("support", "helpful", "harmful", "recall_count")),
            pa.field("status", text),
            pa.field("abstraction_score", pa.float32()),
            pa.field("notes", texts),
            pa.field("vector", pa.list_(pa.float32(), dim)),
        ]
    )


def insight_id(draft: InsightDraft) -> str:
    """A stable id from the lesson's text, so the same lesson written twice is one row."""
    text = " ".join(f"{draft.title}\n{draft.description}\n{draft.content}".lower().split())
    return "ins_" + hashlib.sha256(text.encode()).hexdigest()[:16]


def _update(table: Table, where: str, values_sql: dict[str, str]) -> None:
    table.update(where=where, values_sql=values_sql)


def _verdict(title: str, report: LintReport, insight: str | None = None) -> RecordResult:
    """The result for a linted draft: rejected with the lint's errors, else stored."""
    return RecordResult(
        status="rejected" if report.errors else "stored",
        id=insight,
        title=title,
        reasons=report.errors,
        warnings=report.warnings,
        abstraction_score=report.score,
    )


def _sql(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


_RUST_LOCATION = re.compile(r",\s*/\S+\.rs:\d+:\d+")


def lance_message(exc: BaseException) -> str:
    """A LanceDB error's message without the Rust source location it ends with."""
    return _RUST_LOCATION.sub("", str(exc)).strip() or type(exc).__name__


def rewrite_without(table: Table, ids: Collection[str]) -> tuple[int, int]:
    """Delete rows by id and leave no copy of them in any file of the table's directory.

    Lance deletes are soft and compaction skips a fragment with few deleted rows, so every
    remaining row is rewritten into new files; then every older version and any file no
    version references is removed. Ids, not the matched text, go into the delete predicate:
    Lance keeps a delete's predicate in its transaction file. Returns (rows deleted,
    versions removed). Callers hold the store lock exclusively.
    """
    before = table.count_rows()
    if ids:
        table.delete(f"id IN ({', '.join(_sql(i) for i in sorted(ids))})")
    deleted = before - table.count_rows()
    table.update(where="true", values_sql={"status": "status"})
    versions = len(table.list_versions())
    with warnings.catch_warnings():
        # It warns that readers of older versions will fail: the purge is meant to do that.
        warnings.simplefilter("ignore", UserWarning)
        table.optimize(cleanup_older_than=timedelta(0), delete_unverified=True)
    return deleted, versions - len(table.list_versions())


def starter_drafts() -> list[InsightDraft]:
    """The starter pack shipped as package data."""
    text = resources.files("mtl_mcp").joinpath("data/starter.jsonl").read_text(encoding="utf-8")
    return [InsightDraft.model_validate_json(line) for line in text.splitlines() if line.strip()]


class InsightStore:
    """Open lazily; every public method is safe to call from several threads."""

    def __init__(self, settings: Settings, embedder: Embedder | None = None) -> None:
        self.settings = settings
        self._embedder = embedder
        self._lock = threading.RLock()
        self._db: DBConnection | None = None
        self._table: Table | None = None
        self._meta: dict[str, str] = {}
        self._snapshot: Snapshot | None = None
        self._pending_recalls: Counter[str] = Counter()
        self._last_optimized = 0

    # -- opening -------------------------------------------------------------------------

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = get_embedder(self.settings)
        return self._embedder

    @property
    def meta(self) -> dict[str, str]:
        self._open()
        return dict(self._meta)

    def _connect(self) -> DBConnection:
        if self._db is None:
            os.environ.setdefault(
                "LANCEDB_LOG", "error"
            )  # Rust-side warnings would hit stderr per query
            import lancedb

            private_umask()  # LanceDB's own files too: insights are private to their owner
            if "://" not in self.settings.store_uri:
                self.settings.home.mkdir(parents=True, exist_ok=True, mode=0o700)
            try:
                self._db = lancedb.connect(
                    self.settings.store_uri, read_consistency_interval=timedelta(0)
                )
            except Exception as exc:  # lancedb raises assorted OSError/ValueError/RuntimeError
                raise StoreError(
                    f"cannot open the store at {self.settings.store_uri}: {exc}. "
                    "Check the path and its permissions, or run `mtl-mcp doctor`"
                ) from exc
        return self._db

    def _open(self) -> Table:
        with self._lock:
            if self._table is not None:
                return self._table
            db = self._connect()
            try:
                with creating(self.settings):
                    table, created = self._open_or_create(db)
                rows = db.open_table(META_TABLE).to_arrow().to_pylist()
            except StoreError:
                raise
            except Exception as exc:  # a damaged data dir surfaces as assorted lance errors
                raise StoreError(
                    f"the store at {self.settings.store_uri} cannot be read "
                    f"({lance_message(exc)}). "
                    "Run `mtl-mcp doctor`: it says what is damaged and which backup restores it"
                ) from exc
            return self._finish_open(table, rows, created)

    def _open_or_create(self, db: DBConnection) -> tuple[Table, bool]:
        """The insight table (and its meta table), created if this is a new store."""
        created = TABLE not in db.list_tables().tables
        if created and self._table_dir_exists():
            raise StoreError(
                f"the store at {self.settings.store_uri} is damaged: the insight table's "
                "version manifests are missing. Run `mtl-mcp doctor`: it names the "
                "backup to restore"
            )
        if not created:
            table = db.open_table(TABLE)
            # Reads every data file's footer: a truncated or missing file fails here,
            # with advice, rather than as a raw error in the first query.
            table.search().select(["id"]).limit(None).to_arrow()
            return table, False
        dim = self.embedder.dim
        table = db.create_table(TABLE, schema=insight_schema(dim), exist_ok=True)
        meta_schema = pa.schema(
            [pa.field("key", pa.string(), nullable=False), pa.field("value", pa.string())]
        )
        meta = db.create_table(META_TABLE, schema=meta_schema, exist_ok=True)
        fresh = {
            "schema_version": str(SCHEMA_VERSION),
            "dim": str(dim),
            "embed_model": self.embedder.name,
        }
        if meta.count_rows() == 0:
            meta.merge_insert("key").when_not_matched_insert_all().execute(
                pa.Table.from_pylist([{"key": k, "value": v} for k, v in fresh.items()])
            )
        return table, True

    def _finish_open(self, table: Table, rows: list[dict[str, Any]], created: bool) -> Table:
        """Check the meta and the schema, then seed a new store."""
        self._meta = {row["key"]: row["value"] for row in rows}
        for key in ("schema_version", "dim"):
            if not self._meta.get(key, "0").isdigit():
                raise StoreError(
                    f"the store's meta table in {self.settings.store_uri} is damaged "
                    f"({key}={self._meta.get(key)!r}). Run `mtl-mcp doctor`: it names the "
                    "backup to restore"
                )
        self._table = table
        self._check_schema(table)
        self._last_optimized = table.version
        if created and self.settings.starter:
            self.seed()
        return table

    def _table_dir_exists(self) -> bool:
        """A local store whose insight table has files but does not open is damaged, not new."""
        uri = self.settings.store_uri
        return "://" not in uri and (Path(uri) / f"{TABLE}.lance").is_dir()

    def _check_schema(self, table: Table) -> None:
        version = int(self._meta.get("schema_version", "0"))
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"the store at {self.settings.store_uri} was written by a newer mtl-mcp "
                f"(schema {version}, this one reads {SCHEMA_VERSION}): upgrade with "
                "`pip install -U mtl-mcp`"
            )
        expected = insight_schema(int(self._meta.get("dim", "384")))
        missing = [f for f in expected if f.name not in table.schema.names]
        if missing or version < SCHEMA_VERSION:
            from mtl_mcp.backup import make_backup

            make_backup(self.settings, "migration")
        if missing:
            # Older stores gain the columns added since, null-filled; nothing is rewritten.
            logger.info("migrating store: adding columns %s", [f.name for f in missing])
            table.add_columns(missing)
        if version < SCHEMA_VERSION:
            self._set_meta({"schema_version": str(SCHEMA_VERSION)})

    def _set_meta(self, values: dict[str, str]) -> None:
        meta = self._connect().open_table(META_TABLE)
        rows = pa.Table.from_pylist(
            [{"key": k, "value": v} for k, v in values.items()], schema=meta.schema
        )
        meta.merge_insert("key").when_matched_update_all().when_not_matched_insert_all().execute(
            rows
        )
        self._meta.update(values)

    def _check_model(self) -> None:
        self._snap()  # a reindex by another process changes the model: see it first
        stored = self._meta.get("embed_model")
        if stored and stored != self.embedder.name:
            raise EmbeddingError(
                f"this store was built with embedding model {stored!r} but {self.embedder.name!r} "
                "is configured: run `mtl-mcp reindex` to re-embed everything with the new model, "
                f"or set MTL_MCP_EMBED_MODEL={stored}"
            )

    def warm(self) -> None:
        """Open the table, load the model and read the snapshot now rather than on first use."""
        self._open()
        self.embedder.embed_query("warm up")
        self._snap().bm25.scores("warm up")  # recall's keyword index, built once per snapshot

    # -- the snapshot ----------------------------------------------------------------------

    def _snap(self) -> Snapshot:
        table = self._open()
        with self._lock:
            version = table.version
            if self._snapshot is None or self._snapshot.version != version:
                try:
                    # Another process may have reindexed (model, dimension): reread the meta.
                    meta_rows = self._connect().open_table(META_TABLE).to_arrow().to_pylist()
                    self._meta = {row["key"]: row["value"] for row in meta_rows}
                    pinned = self._connect().open_table(TABLE)
                    pinned.checkout(version)  # both scans of the snapshot see the same rows
                    self._snapshot = Snapshot.load(pinned, int(self._meta.get("dim", "384")))
                except Exception as exc:  # files removed under us (a purge) or damaged
                    raise StoreError(
                        f"could not read the store at {self.settings.store_uri} "
                        f"({lance_message(exc)}): retry; if it persists run `mtl-mcp doctor`"
                    ) from exc
            return self._snapshot

    def _write(
        self, action: Callable[[Table], T], patch: Callable[[Snapshot], None] | None = None
    ) -> T:
        """Run one write with retries on commit conflicts, then compact now and then.

        `patch` applies the same change to the in-memory snapshot: when this write is the
        only one since the snapshot was read, patching replaces a full reload.
        """
        table = self._open()
        with store_lock(self.settings):
            return self._write_locked(table, action, patch)

    def _write_locked(
        self, table: Table, action: Callable[[Table], T], patch: Callable[[Snapshot], None] | None
    ) -> T:
        before = table.version
        for attempt in range(6):
            try:
                result = action(table)
                break
            except Exception as exc:  # lance reports commit conflicts as RuntimeError/OSError
                if attempt == 5 or not any(w in str(exc).lower() for w in ("conflict", "retry")):
                    raise StoreError(f"write to {self.settings.store_uri} failed: {exc}") from exc
                time.sleep(random.uniform(0.01, 0.05) * (attempt + 1))
        with self._lock:
            snapshot, after = self._snapshot, table.version
            if patch and snapshot and snapshot.version == before and after == before + 1:
                patch(snapshot)
                snapshot.version = after
        if table.version - self._last_optimized >= OPTIMIZE_EVERY:
            self._last_optimized = table.version
            self._compact(table)
        return result

    def _compact(self, table: Table) -> None:
        """Compact, unless another process is at it (servers reach the threshold together)."""
        with try_store_lock(self.settings, ".compact.lock") as mine:
            if not mine:
                return
            try:
                # Versions younger than an hour stay, so concurrent readers never lose theirs.
                table.optimize(cleanup_older_than=timedelta(hours=1))
            except Exception as exc:  # lance raises RuntimeError for conflicts and more
                if "conflict" in str(exc).lower():  # a write committed first: harmless
                    logger.info("compaction deferred: %s", lance_message(exc))
                else:
                    logger.warning("compaction skipped", exc_info=True)
                return
            logger.info("compacted the table at version %d", table.version)

    # -- writing ---------------------------------------------------------------------------

    def record(
        self,
        drafts: Sequence[InsightDraft | dict[str, Any]],
        provenance: Provenance | None = None,
        project_name: str | None = None,
    ) -> list[RecordResult]:
        """Lint, deduplicate and store drafts; one result per draft, in order."""
        provenance = provenance or Provenance()
        results: list[RecordResult] = []
        accepted: list[tuple[int, InsightDraft, float]] = []
        for position, raw in enumerate(drafts):
            try:
                draft = raw if isinstance(raw, InsightDraft) else InsightDraft.model_validate(raw)
            except ValidationError as exc:
                reasons = [
                    f"{'.'.join(map(str, e['loc'])) or 'insight'}: {e['msg']}" for e in exc.errors()
                ]
                results.append(RecordResult(status="rejected", reasons=reasons))
                continue
            report = lint(draft, project_name)
            results.append(_verdict(draft.title, report))
            if report.ok:
                accepted.append((position, draft, report.score))
        if not accepted:
            return results
        self._open()
        self._check_model()
        vectors = self.embedder.embed_documents([d.embedding_text() for _, d, _ in accepted])
        labelled = fill_labels(
            [d for _, d, _ in accepted], vectors, self.embedder, self.settings.models_dir
        )
        accepted = [(p, d, s) for (p, _, s), d in zip(accepted, labelled, strict=True)]
        with self._lock:
            snapshot = self._snap()
            # One matrix product for the batch; inactive rows can never be merge targets.
            similar = snapshot.vectors @ vectors.T
            similar[~snapshot.active] = -np.inf
            known_ids = set(snapshot.rows.column("id").to_pylist())
            new_rows: list[dict[str, Any]] = []
            new_vectors: list[Vector] = []
            merges: list[tuple[str, InsightDraft]] = []
            for column, (position, draft, score) in enumerate(accepted):
                vector = vectors[column]
                target = self._duplicate_of(
                    draft, vector, similar[:, column], snapshot, known_ids, new_rows, new_vectors
                )
                if target is None:
                    row = self._new_row(draft, provenance, score, vector)
                    new_rows.append(row)
                    new_vectors.append(vector)
                    results[position].id = row["id"]
                else:
                    results[position].status = "merged"
                    results[position].id = target
                    # The same text again changes nothing, unless another project wrote it.
                    if target != insight_id(draft) or self._new_project_for(
                        snapshot, target, provenance
                    ):
                        merges.append((target, draft))
            self._insert(new_rows)
            for target, draft in merges:  # after the insert: the target may be a new row
                self._merge_into(target, draft, provenance)
        return results

    def _duplicate_of(
        self,
        draft: InsightDraft,
        vector: Vector,
        similar: Vector,
        snapshot: Snapshot,
        known_ids: set[str],
        pending: list[dict[str, Any]],
        pending_vectors: list[Vector],
    ) -> str | None:
        """The id of an existing (or earlier in this batch) near-identical insight, if any.

        `similar` holds the draft's cosine similarity to every snapshot row (-inf if retired).
        """
        own_id = insight_id(draft)
        if own_id in known_ids or any(row["id"] == own_id for row in pending):
            return own_id
        threshold = self.settings.dedup_threshold
        if pending_vectors:
            sims = np.asarray(pending_vectors) @ vector
            if sims.max() >= threshold:
                return str(pending[int(sims.argmax())]["id"])
        if len(similar) and similar.max() >= threshold:
            return str(snapshot.rows.column("id")[int(similar.argmax())].as_py())
        return None

    @staticmethod
    def _new_project_for(snapshot: Snapshot, target: str, provenance: Provenance) -> bool:
        """Whether `provenance` names a project the stored insight `target` lacks."""
        position = snapshot.positions.get(target)
        if not provenance.project or position is None:
            return False
        projects = snapshot.rows.column("projects")[position].as_py() or []
        return provenance.project not in projects

    def _new_row(
        self, draft: InsightDraft, provenance: Provenance, score: float, vector: Vector
    ) -> dict[str, Any]:
        now = datetime.now(UTC)
        insight = Insight(
            **draft.model_dump(),
            id=insight_id(draft),
            project=provenance.project,
            projects=[provenance.project] if provenance.project else [],
            session_id=provenance.session_id,
            client=provenance.client,
            model=provenance.model,
            created_at=now,
            updated_at=now,
            abstraction_score=score,
        )
        return {**insight.model_dump(), "vector": vector.tolist()}

    def _merge_into(self, target: str, draft: InsightDraft, provenance: Provenance) -> None:
        """support + 1 and union tags, languages and projects, as one atomic SQL update."""

        def union(column: str, values: Sequence[str]) -> str:
            if not values:
                return column
            return (
                f"array_distinct(array_concat(coalesce({column}, make_array()), "
                f"make_array({', '.join(_sql(v) for v in values)})))"
            )

        values_sql = {
            "support": "support + 1",
            "updated_at": f"arrow_cast({_sql(datetime.now(UTC).isoformat())}, "
            "'Timestamp(Microsecond, Some(\"UTC\"))')",
            "tags": union("tags", draft.tags),
            "languages": union("languages", draft.languages),
            "projects": union("projects", [provenance.project] if provenance.project else []),
        }
        self._write(lambda t: t.update(where=f"id = {_sql(target)}", values_sql=values_sql))

    def import_insights(self, items: Sequence[Insight | InsightDraft]) -> list[RecordResult]:
        """One result per item, in order. Exported insights are stored as they were (same
        ids, counters, provenance); drafts go through `record`. Rerunning changes nothing."""
        results: dict[int, RecordResult] = {}
        drafts = [n for n, item in enumerate(items) if not isinstance(item, Insight)]
        if drafts:
            results.update(zip(drafts, self.record([items[n] for n in drafts]), strict=True))
        full = [(n, item) for n, item in enumerate(items) if isinstance(item, Insight)]
        if full:
            self._check_model()
            present = set(self._snap().positions)
            reports = {n: lint(item) for n, item in full}
            keep = [(n, item) for n, item in full if reports[n].ok]
            vectors = self.embedder.embed_documents([item.embedding_text() for _, item in keep])
            self._insert(
                [
                    {**item.model_dump(), "abstraction_score": reports[n].score,
                     "vector": vector.tolist()}
                    for (n, item), vector in zip(keep, vectors, strict=True)
                ]
            )
            for n, item in full:
                verdict = _verdict(item.title, reports[n], item.id if reports[n].ok else None)
                if verdict.status == "stored" and item.id in present:
                    verdict.status = "merged"  # already there: merge_insert kept the stored row
                results[n] = verdict
        return [results[n] for n in range(len(items))]

    def _insert(self, rows: list[dict[str, Any]]) -> None:
        """Insert rows whose ids are new; an id already present (another writer) is kept."""
        if rows:
            data = pa.Table.from_pylist(rows, schema=self._open().schema)
            self._write(lambda t: t.merge_insert("id").when_not_matched_insert_all().execute(data))

    def seed(self) -> list[RecordResult]:
        """Add the starter pack (project 'starter'); already present ones are merged."""
        return self.record(starter_drafts(), Provenance(project="starter", client="mtl-mcp"))

    # -- reading ---------------------------------------------------------------------------

    def recall(
        self,
        plan: str,
        k: int = 3,
        scope: Scope = "all",
        project: str | None = None,
        domains: Sequence[str] | None = None,
        min_score: float | None = None,
        exclude_domains: Sequence[str] | None = None,
        method: str | RecallMethod | None = None,
    ) -> list[RecallHit]:
        """The top-k active insights for a short plan, best first.

        `exclude_domains` leaves those domains out (the evaluation's leave-one-domain-out);
        `method` picks a ranking from `retrieval.METHODS` (default: the evaluated best).
        """
        ranking = get_method(method)
        if not plan.strip():
            raise InputError(
                "plan is empty: pass the 3-4 sentence plan you intend to follow for the task"
            )
        if not 1 <= k <= 20:
            raise InputError(f"k={k} is out of range: ask for 1 to 20 insights")
        if scope == "this-project" and not project:
            raise InputError(
                "scope 'this-project' needs a project: pass project=<repo path or id>, "
                "or use scope='all'"
            )
        self._open()
        self._check_model()
        query = plan_vector(self.embedder, plan, split=ranking.split_plan)
        snapshot = self._snap()
        mask = snapshot.active.copy()
        if project and scope == "this-project":
            mask &= snapshot.project_mask(project)
        elif project and scope == "other-projects":
            mask &= ~snapshot.project_mask(project)
        if domains:
            mask &= snapshot.column_mask("domain", [d.strip().lower() for d in domains])
        if exclude_domains:
            excluded = [d.strip().lower() for d in exclude_domains]
            mask &= ~snapshot.column_mask("domain", excluded)
        indices, sims = snapshot.similarities(query, mask)
        scores = (sims + ranking.rating_weight * snapshot.rating[indices]).astype(np.float32)
        if min_score is not None:
            keep = scores >= min_score
            indices, sims, scores = indices[keep], sims[keep], scores[keep]
        keyword = snapshot.bm25.scores(plan)[indices] if ranking.keywords else None
        best = fuse(scores if ranking.dense else None, keyword, k)
        records = snapshot.records([int(indices[i]) for i in best])
        hits = [
            RecallHit(
                id=r["id"],
                title=r["title"],
                description=r["description"],
                content=r["content"],
                polarity=r["polarity"],
                category=r["category"],
                domain=r["domain"],
                project=r["project"],
                score=round(float(scores[i]), 4),
                similarity=round(float(sims[i]), 4),
            )
            for r, i in zip(records, best, strict=True)
        ]
        with self._lock:
            self._pending_recalls.update(h.id for h in hits)
        return hits

    def flush(self) -> None:
        """Write accumulated recall counts (recall stays a pure read on its hot path)."""
        with self._lock:
            pending, self._pending_recalls = self._pending_recalls, Counter()
        by_count: dict[int, list[str]] = {}
        for insight, count in pending.items():
            by_count.setdefault(count, []).append(insight)
        for count, ids in list(by_count.items()):
            where = f"id IN ({', '.join(_sql(i) for i in ids)})"
            increment = {"recall_count": f"recall_count + {count}"}
            try:
                self._write(
                    functools.partial(_update, where=where, values_sql=increment),
                    patch=functools.partial(
                        Snapshot.add_recall_counts, counts=dict.fromkeys(ids, count)
                    ),
                )
            except StoreError:
                with self._lock:  # keep the unwritten counts for the next flush
                    for times, group in by_count.items():
                        self._pending_recalls.update(dict.fromkeys(group, times))
                raise
            del by_count[count]

    def get(self, insight: str) -> Insight:
        snapshot = self._snap()
        found = np.flatnonzero(snapshot.column_mask("id", [insight]))
        if not len(found):
            raise NotFoundError(
                f"no insight has id {insight!r}: list ids with `mtl-mcp list` or list_memories"
            )
        return Insight.model_validate(snapshot.records([int(found[0])])[0])

    def list(
        self,
        query: str | None = None,
        domain: str | None = None,
        project: str | None = None,
        polarity: str | None = None,
        category: str | None = None,
        sort: ListSort = "recent",
        limit: int = 20,
        offset: int = 0,
        include_retired: bool = False,
    ) -> tuple[list[Insight], int]:
        """A page of insights matching the filters, and how many match in all."""
        if category and category not in CATEGORIES:
            raise InputError(f"unknown category {category!r}: use one of {', '.join(CATEGORIES)}")
        snapshot = self._snap()
        mask = np.ones(len(snapshot), dtype=bool)
        if not include_retired:
            mask &= snapshot.active
        for column, value in (("domain", domain), ("polarity", polarity), ("category", category)):
            if value:
                mask &= snapshot.column_mask(column, [value])
        if project:
            mask &= snapshot.project_mask(project)
        indices = np.flatnonzero(mask)
        if query and query.strip():
            self._check_model()
            _, sims = snapshot.similarities(self.embedder.embed_query(query), mask)
            order = np.argsort(-sims, kind="stable")
        else:
            key = {"recent": "updated_at", "support": "support", "helpful": "helpful"}[sort]
            values = snapshot.rows.column(key).to_numpy(zero_copy_only=False)[indices]
            order = np.argsort(-values.astype(np.float64), kind="stable")
        page = indices[order][offset : offset + limit]
        items = [Insight.model_validate(r) for r in snapshot.records([int(i) for i in page])]
        return items, len(indices)

    def export(self) -> Iterator[Insight]:
        snapshot = self._snap()
        for row in snapshot.rows.to_pylist():
            yield Insight.model_validate(row)

    def stats(self) -> dict[str, Any]:
        snapshot = self._snap()
        rows = snapshot.rows
        active = snapshot.active

        def counts(column: str) -> dict[str, int]:
            values = rows.column(column).to_pylist()
            return dict(Counter(v or "(none)" for v, a in zip(values, active, strict=True) if a))

        return {
            "total": int(active.sum()),
            "retired": int(len(snapshot) - active.sum()),
            "by_domain": counts("domain"),
            "by_category": counts("category"),
            "by_polarity": counts("polarity"),
            "by_project": counts("project"),
            "embed_model": self._meta.get("embed_model"),
            "schema_version": int(self._meta.get("schema_version", SCHEMA_VERSION)),
            "data_dir": str(self.settings.home),
            "store_uri": self.settings.store_uri,
        }

    # -- changing one insight ----------------------------------------------------------------

    def rate(self, insight: str, helpful: bool, note: str | None = None) -> Insight:
        """Count a helpful or harmful use; retire an insight that keeps misleading."""
        current = self.get(insight)
        column = "helpful" if helpful else "harmful"
        values_sql = {column: f"{column} + 1"}
        harmful = current.harmful + (0 if helpful else 1)
        if harmful >= self.settings.retire_after_harmful and harmful > 2 * current.helpful:
            values_sql["status"] = "'retired'"
        if note and note.strip():
            note_text = _sql(redact(note.strip())[:500])
            values_sql["notes"] = (
                f"array_slice(array_append(coalesce(notes, make_array()), "
                f"{note_text}), -{NOTES_KEPT}, -1)"
            )
        self._write(lambda t: t.update(where=f"id = {_sql(insight)}", values_sql=values_sql))
        return self.get(insight)

    def forget(self, insight: str) -> Insight:
        """Delete one insight. Older table versions keep its text until compaction prunes
        them (an hour later at the earliest): `purge` removes it from disk at once."""
        current = self.get(insight)
        self._write(lambda t: t.delete(f"id = {_sql(insight)}"))
        return current

    def purge(self, ids: Collection[str]) -> tuple[int, int]:
        """Delete insights and every copy of them in the table's files, older versions
        included. Waits for other processes' writes; readers of older versions fail once
        and reload. Returns (insights deleted, versions removed)."""
        table = self._open()
        with self._lock, store_lock(self.settings, exclusive=True):
            try:
                result = rewrite_without(table, ids)
            except Exception as exc:  # lance errors; the table is intact (commits are atomic)
                raise StoreError(
                    f"purging {self.settings.store_uri} failed part way ({exc}); nothing was "
                    "lost: run the purge again"
                ) from exc
            self._snapshot = None
            self._last_optimized = table.version
        return result

    def reindex(self, progress: Callable[[int], None] | None = None) -> int:
        """Re-embed every insight with the configured model and record it as the store's."""
        with store_lock(self.settings, exclusive=True):  # writes meanwhile would be overwritten
            return self._reindex_locked(progress)

    def _reindex_locked(self, progress: Callable[[int], None] | None) -> int:
        from mtl_mcp.backup import make_backup

        table = self._open()
        make_backup(self.settings, "reindex")  # the overwrite below replaces every vector
        rows = table.to_arrow().drop_columns(["vector"]).to_pylist()
        vectors: list[Vector] = []
        for start in range(0, len(rows), 256):
            batch = rows[start : start + 256]
            vectors.extend(
                self.embedder.embed_documents(
                    [Insight.model_validate(r).embedding_text() for r in batch]
                )
            )
            if progress:
                progress(len(batch))
        dim = self.embedder.dim
        data = pa.Table.from_pylist(
            [{**r, "vector": v.tolist()} for r, v in zip(rows, vectors, strict=True)],
            schema=insight_schema(dim),
        )
        with self._lock:
            self._table = self._connect().create_table(TABLE, data=data, mode="overwrite")
            self._set_meta({"embed_model": self.embedder.name, "dim": str(dim)})
            self._snapshot = None
        return len(rows)

    def close(self) -> None:
        """Flush pending counters; the store can be reopened afterwards."""
        try:
            self.flush()
        finally:
            self._table = None
            self._snapshot = None


def dump_jsonl(insights: Iterator[Insight]) -> Iterator[str]:
    """One JSON line per insight, the format `import` reads."""
    for insight in insights:
        yield json.dumps(insight.model_dump(mode="json"), ensure_ascii=False)
