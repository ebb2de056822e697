"""`Memory`: the one object every front door uses to record, recall and manage insights.

It composes the layers below: the insight table and its snapshot (`mtl_mcp.storage`), the
embedding model and the rankings (`mtl_mcp.index`), the lint (`mtl_mcp.text`). Each method
validates its arguments, does one thing, and raises only errors from `mtl_mcp.errors`.
Every method is safe to call from several threads; the table opens and the model loads on
first use.

With a team pool configured (`Settings.team_uri`, `mtl_mcp.memory.team`), recall, list,
get, rate and stats read both tiers, every result saying its `source`; recording, imports
and exports stay personal, and insights reach the pool only through `share`.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, Field

import mtl_mcp.memory.ingest as ingest
import mtl_mcp.memory.loop as loop_reports
import mtl_mcp.memory.queries as queries
import mtl_mcp.memory.sharing as sharing
from mtl_mcp.config import Settings, load_settings
from mtl_mcp.errors import (
    ConfigError,
    EmbeddingError,
    InputError,
    NotFoundError,
    Retryable,
    StoreError,
    StoreReadOnly,
)
from mtl_mcp.index.categories import fill_labels
from mtl_mcp.index.embedder import Embedder, Vector, get_embedder
from mtl_mcp.index.methods import RecallMethod, get_method, plan_vector
from mtl_mcp.memory.jsonl import read_import
from mtl_mcp.memory.loop import Loop
from mtl_mcp.memory.team import TeamPool, stats_of
from mtl_mcp.memory.tier import Tier
from mtl_mcp.schemas import (
    CATEGORIES,
    NOTE_MAX,
    TEXT_MAX,
    BrowseSort,
    GivenInsight,
    Insight,
    InsightDraft,
    InsightHistory,
    LeftOut,
    Provenance,
    RatingState,
    RecallHit,
    RecallOrigin,
    RecallPart,
    RecallPreview,
    RecordResult,
    Scope,
    SessionReport,
    ShareResult,
    Source,
    VerdictEntry,
    too_long,
)
from mtl_mcp.storage import backup
from mtl_mcp.storage.locks import store_lock
from mtl_mcp.storage.schema import SCHEMA_VERSION, ids_predicate, sql_string
from mtl_mcp.storage.snapshot import Snapshot
from mtl_mcp.storage.table import InsightTable
from mtl_mcp.text.lint import lint
from mtl_mcp.text.redact import redact
from mtl_mcp.text.starter import starter_drafts

if TYPE_CHECKING:
    from mtl_mcp.storage.backup import BackupInfo, RestoreResult

logger = logging.getLogger(__name__)

NOTES_KEPT = 10
PLAN_NOT_TASK = "the 3-4 sentence plan, not the task text, a transcript or a file"
IMPORT_BATCH = 256


@dataclass(frozen=True)
class LabelledVectors:
    """The active insights (as stored rows, without vectors) and their embeddings, aligned:
    what the quality tools measure and draw."""

    records: list[dict[str, Any]]
    vectors: npt.NDArray[np.float32]

    def column(self, name: str) -> list[Any]:
        return [record[name] for record in self.records]


def _appended_note(note_sql: str) -> str:
    """SQL for the notes with one more (an SQL string), keeping the newest NOTES_KEPT."""
    return (
        f"array_slice(array_append(coalesce(notes, make_array()), {note_sql}), -{NOTES_KEPT}, -1)"
    )


class ImportProblem(BaseModel):
    line: int
    problem: str


class ImportReport(BaseModel):
    """What importing a JSONL file did: counts by status and the lines it could not use."""

    stored: int = 0
    merged: int = 0
    rejected: int = 0
    skipped: int = 0
    problems: list[ImportProblem] = Field(default_factory=list)


class Memory:
    """A store of abstract insights: record, recall, browse, rate, forget, back up.

    `on_change` is called with the memory after every change to the insights themselves
    (recorded, merged, imported, rated, forgotten, purged, restored; not recall counters),
    for a front door to keep what it derives from them in step.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        embedder: Embedder | None = None,
        on_change: Callable[[Memory], None] | None = None,
    ) -> None:
        self.settings = settings or load_settings()
        self._embedder = embedder
        self._on_change = on_change
        self.table = InsightTable(self.settings, self._model_info)
        self._personal = Tier(self.table, "personal", self.settings.refresh_seconds)
        self.team = TeamPool(self.settings, self._model_info) if self.settings.team_uri else None
        if self.team is not None:
            self.team.tier.prepare = self._compare_with_team
        self._lock = threading.RLock()  # one record at a time: exact dedup within a process
        self._seeded = False
        self._seed_done = False
        # Recall counts have their own lock: a recall must never wait for a record's write.
        self._recalls_lock = threading.Lock()
        self._pending_recalls: Counter[str] = Counter()
        self._drained_at = 0.0  # when the background last tried to drain the team outbox
        self.loop = Loop(self.settings)  # what reached a model, and how it went
        self._counts_unsaved = False  # a read-only store refused the recall counts (logged)

    # -- parts ----------------------------------------------------------------------------

    @property
    def embedder(self) -> Embedder:
        """The embedding model (loaded on first use)."""
        if self._embedder is None:
            self._embedder = get_embedder(self.settings)
        return self._embedder

    def _model_info(self) -> tuple[str, int]:
        return self.embedder.name, self.embedder.dim

    @property
    def _model_name(self) -> str:
        """The embedding model's name, without loading it for that."""
        return self._embedder.name if self._embedder is not None else self.settings.embed_model

    @property
    def meta(self) -> dict[str, str]:
        """The store's meta table: schema version, embedding model, vector dimension."""
        self._open()
        return self.table.meta

    def exists(self) -> bool:
        """Whether the store was created already; asking does not create it."""
        return self.table.exists()

    def _open(self) -> None:
        """Open the table; a store this call created gets the starter pack."""
        self.table.open()
        if self._seed_done or not self.table.created:
            return  # every read passes here: it must not queue behind a record's lock
        with self._lock:
            if not self._seeded:
                self._seeded = True  # seed() reads through here again
                try:
                    if self.settings.starter:
                        self.seed()
                finally:  # seeded or not, reads stop taking the write lock (never retried)
                    self._seed_done = True

    def _snapshot(self) -> Snapshot:
        self._open()
        return self._personal.snapshot()

    def _check_model(self) -> None:
        self._snapshot()  # a reindex by another process changes the model: see it first
        stored = self.table.meta.get("embed_model")
        if stored and stored != self.embedder.name:
            raise EmbeddingError(
                f"this store was built with embedding model {stored!r} but {self.embedder.name!r} "
                "is configured: run `mtl-mcp reindex` to re-embed everything with the new model, "
                f"or set MTL_MCP_EMBED_MODEL={stored}"
            )

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change(self)

    def changes_stamp(self) -> tuple[int, int, int]:
        """Changes whenever the insights (in any process) or the recall ledger change: the
        table version, and the ledger's and verdicts' file times. A stat or two, and a
        version check: cheap enough to poll every second."""
        version = self._snapshot().version
        ledger = self.loop.ledger.path
        stamps = []
        for path in (ledger, ledger.with_name(ledger.name + "-wal")):
            try:
                stamps.append(path.stat().st_mtime_ns)
            except OSError:
                stamps.append(0)
        return version, max(stamps), self.loop.ledger.verdict_stamp()

    def warm(self) -> None:
        """Open the table, load the model and build the keyword index now, not on first use;
        start loading the team pool in the background."""
        if self.team is not None:
            self.team.tier.refresh_when_due()
        self._open()
        self.embedder.embed_query("warm up")
        self._personal.keywords(self._snapshot()).scores("warm up")

    # -- recording ----------------------------------------------------------------------------

    def record(
        self,
        drafts: Sequence[InsightDraft | dict[str, Any]],
        provenance: Provenance | None = None,
        project_name: str | None = None,
    ) -> list[RecordResult]:
        """Lint, deduplicate and store drafts; one result per draft, in order.

        A draft is `stored`, `merged` into a near-identical insight (support + 1), or
        `rejected` with the reasons. `project_name` lets the lint flag the project's own name.
        """
        provenance = provenance or Provenance()
        results, accepted = ingest.screen(drafts, project_name)
        if not accepted:
            return results
        self._check_model()
        texts = [item.draft.embedding_text() for item in accepted]
        # A record embeds under the write lock too: writers embedding side by side crowd
        # recalls out of the same cores (in one stress run of the shared service, recall
        # p50/p90 went from 89/178 to 74/160 ms), and their writes queue for the lock anyway.
        with self._lock:
            vectors = self.embedder.embed_documents(texts)
            labelled = fill_labels(
                [item.draft for item in accepted], vectors, self.embedder, self.settings.models_dir
            )
            for item, draft in zip(accepted, labelled, strict=True):
                item.draft = draft
            plan = ingest.plan_writes(
                accepted,
                vectors,
                self._snapshot(),
                provenance,
                self.settings.dedup_threshold,
                results,
            )
            if self.table.insert(plan.rows) < len(plan.rows):  # another process was first
                stored = self.table.read(ids_predicate(plan.drafts), ["id", "created_at"])
                plan.raced(stored, results)
            for target, draft in plan.merges:  # after the insert: the target may be a new row
                sql = ingest.merge_sql(draft, provenance)
                self.table.update(f"id = {sql_string(target)}", sql)
        self._changed()
        return results

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
            present = set(self._snapshot().positions)
            reports = {n: lint(item) for n, item in full}
            keep = [(n, item) for n, item in full if reports[n].ok]
            vectors = self.embedder.embed_documents([item.embedding_text() for _, item in keep])
            self.table.insert(
                [
                    {
                        **item.model_dump(),
                        "abstraction_score": reports[n].score,
                        "vector": vector.tolist(),
                    }
                    for (n, item), vector in zip(keep, vectors, strict=True)
                ]
            )
            for n, item in full:
                verdict = ingest.verdict(item.title, reports[n], item.id if reports[n].ok else None)
                if verdict.status == "stored" and item.id in present:
                    verdict.status = "merged"  # already there: merge_insert kept the stored row
                results[n] = verdict
            self._changed()
        return [results[n] for n in range(len(items))]

    def import_file(
        self, path: Path, progress: Callable[[int], None] | None = None
    ) -> ImportReport:
        """Import a JSONL file in batches; bad lines are reported by number, good ones land.

        `progress` is called with the number of lines handled after each batch.
        """
        tally: Counter[str] = Counter()
        problems: list[ImportProblem] = []
        batch: list[tuple[int, Insight | InsightDraft]] = []

        def flush() -> None:
            results = self.import_insights([item for _, item in batch])
            for (number, _), result in zip(batch, results, strict=True):
                tally[result.status] += 1
                if result.reasons:
                    problems.append(ImportProblem(line=number, problem="; ".join(result.reasons)))
            if progress:
                progress(len(batch))
            batch.clear()

        for number, item in read_import(path):
            if isinstance(item, str):
                tally["skipped"] += 1
                problems.append(ImportProblem(line=number, problem=item))
                if progress:
                    progress(1)
                continue
            batch.append((number, item))
            if len(batch) >= IMPORT_BATCH:
                flush()
        if batch:
            flush()
        return ImportReport(problems=problems, **tally)

    def seed(self) -> list[RecordResult]:
        """Add the starter pack (project 'starter'); already present ones are merged."""
        return self.record(starter_drafts(), Provenance(project="starter", client="mtl-mcp"))

    # -- reading ------------------------------------------------------------------------------

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
        exclude_ids: Collection[str] = (),
        origin: RecallOrigin | None = None,
    ) -> list[RecallHit]:
        """The top-k active insights for a short plan, best first.

        `exclude_domains` leaves those domains out (the evaluation's leave-one-domain-out);
        `method` picks a ranking from `index.methods.METHODS` (default: the evaluated best);
        `exclude_ids` leaves out insights already shown (the next best take their place).
        A recall with an `origin` reaches a model: the ledger records it (`flush` writes it).
        """
        hits = self._ranked(
            plan, k, scope, project, domains, min_score, exclude_domains, method, exclude_ids
        )
        with self._recalls_lock:  # the team pool's counters are not written: reads stay reads
            self._pending_recalls.update(h.id for h in hits if h.source == "personal")
        if origin is not None:
            self.loop.note(origin, plan, project, hits)
        return hits

    def preview(
        self,
        plan: str,
        k: int = 3,
        scope: Scope = "all",
        project: str | None = None,
        domains: Sequence[str] | None = None,
        min_score: float | None = None,
    ) -> RecallPreview:
        """What `recall` gives for a plan, through the same ranking, and why: each hit's
        dense and keyword parts, and what session verdicts left out. A preview reaches no
        model: it counts no recall and the ledger does not record it."""
        parts: list[RecallPart] = []
        left: dict[str, str] = {}
        start = time.perf_counter()
        hits = self._ranked(plan, k, scope, project, domains, min_score, parts=parts, left_out=left)
        seconds = time.perf_counter() - start
        retired = feedback.keeps_misleading() if (feedback := self.loop.feedback()) else {}
        left_out = []
        for insight, reason in left.items():
            with contextlib.suppress(NotFoundError):
                title = self.get(insight).title
                left_out.append(
                    LeftOut(id=insight, title=title, reason=reason, retired=insight in retired)
                )
        method = get_method(None).name
        return RecallPreview(
            hits=hits, parts=parts, left_out=left_out, method=method, seconds=seconds
        )

    def _ranked(
        self,
        plan: str,
        k: int,
        scope: Scope,
        project: str | None,
        domains: Sequence[str] | None,
        min_score: float | None,
        exclude_domains: Sequence[str] | None = None,
        method: str | RecallMethod | None = None,
        exclude_ids: Collection[str] = (),
        parts: builtins.list[RecallPart] | None = None,
        left_out: dict[str, str] | None = None,
    ) -> builtins.list[RecallHit]:
        """Recall's ranking (`recall` and `preview` both run it); `parts` and `left_out`, when
        given, get why each hit ranked there and what feedback left out."""
        ranking = get_method(method)
        if not plan.strip():
            raise InputError(
                "plan is empty: pass the 3-4 sentence plan you intend to follow for the task"
            )
        if len(plan) > TEXT_MAX:
            raise InputError(f"{too_long('plan', len(plan), TEXT_MAX)} ({PLAN_NOT_TASK})")
        if not 1 <= k <= 20:
            raise InputError(f"k={k} is out of range: ask for 1 to 20 insights")
        if scope == "this-project" and not project:
            raise InputError(
                "scope 'this-project' needs a project: pass project=<repo path or id>, "
                "or use scope='all'"
            )
        self._check_model()
        query = plan_vector(self.embedder, plan, split=ranking.split_plan)
        if (feedback := self.loop.feedback()) is not None:
            # Lessons that misled plans like this one, or keep misleading: left out.
            suppressed = feedback.suppressed(query) | feedback.keeps_misleading()
            exclude_ids = set(exclude_ids) | set(suppressed)
            if left_out is not None:
                left_out.update(suppressed)
        snapshot = self._snapshot()
        mask = queries.recall_mask(snapshot, scope, project, domains, exclude_domains, exclude_ids)
        keywords = self._personal.keywords(snapshot) if ranking.keywords else None
        pools = [queries.Pool("personal", snapshot, mask, keywords)]
        team = self._team_snapshot()
        if self.team is not None and team is not None:
            team_project = self.team.project(project)
            team_mask = queries.recall_mask(
                team, scope, team_project, domains, exclude_domains, exclude_ids
            )
            pool = self.team.pool(team, snapshot, team_mask)
            pools.append(pool if ranking.keywords else replace(pool, keywords=None))
        return queries.recall_hits(pools, query, plan, k, ranking, min_score, parts)

    def _compare_with_team(self, team: Snapshot) -> None:
        """Find the team rows this memory holds already, for a new team snapshot (in the
        refresh thread: recall then finds the answer ready)."""
        personal = self.table.loaded
        if (
            self.team is not None
            and personal is not None
            and not self.team.model_problem(self._model_name)
        ):
            self.team.overlap.hidden(team, personal)

    def _team_snapshot(self) -> Snapshot | None:
        """The team snapshot, if a pool is configured, loaded and comparable with ours."""
        if self.team is None:
            return None
        snapshot = self.team.snapshot()
        if snapshot is None or self.team.model_problem(self._model_name):
            return None
        return snapshot

    def team_notice(self) -> str | None:
        """Why results may lack the team pool's newest insights, or None when they do not:
        it is unreachable (results come from the last snapshot loaded, or none), has not
        answered yet, or uses another embedding model."""
        if self.team is None:
            return None
        status = self.team.tier.status()
        loaded = self.team.table.loaded
        if loaded is not None and (problem := self.team.model_problem(self._model_name)):
            return f"Team insights are left out: {problem}."
        if status.reachable is False:
            if loaded is None or status.loaded_at is None:
                return (
                    "The team pool did not answer: these results come from your personal "
                    "memory only (`mtl-mcp doctor` says why)."
                )
            return (
                "The team pool did not answer: its insights here come from the snapshot "
                f"loaded at {status.loaded_at:%Y-%m-%d %H:%M:%S} UTC (`mtl-mcp doctor` says why)."
            )
        if loaded is None and not status.empty:
            return (
                "The team pool has not answered yet: these results come from your personal "
                "memory only."
            )
        return None

    def get(self, insight: str) -> Insight:
        """One insight by id (retired ones too)."""
        snapshot = self._snapshot()
        position = snapshot.positions.get(insight)
        if position is None and self.team is not None and (found := self.team.get(insight)):
            return found
        if position is None:
            raise NotFoundError(
                f"no insight has id {redact(insight)!r}: list ids with `mtl-mcp list` or "
                "list_memories"
            )
        return Insight.model_validate(snapshot.records([position])[0])

    def list(
        self,
        query: str | None = None,
        domain: str | None = None,
        project: str | None = None,
        polarity: str | None = None,
        category: str | None = None,
        sort: BrowseSort = "recent",
        limit: int = 20,
        offset: int = 0,
        include_retired: bool = False,
        text: str | None = None,
        source: Source | None = None,
        rating: RatingState | None = None,
    ) -> tuple[list[Insight], int]:
        """A page of insights matching the filters, and how many match in all.

        `query` ranks by meaning; `text` keeps only insights holding each of its words;
        `source` keeps one tier; `rating` one rating state ("retired": only retired ones)."""
        if category and category not in CATEGORIES:
            raise InputError(f"unknown category {category!r}: use one of {', '.join(CATEGORIES)}")
        for name, value in (("query", query), ("text", text)):
            if value and len(value) > TEXT_MAX:
                raise InputError(f"{too_long(name, len(value), TEXT_MAX)} (a few words)")
        snapshot = self._snapshot()
        vector: Vector | None = None
        if query and query.strip():
            self._check_model()
            vector = self.embedder.embed_query(query)
        filters = {"domain": domain, "polarity": polarity, "category": category}
        pools = []
        if source != "team":
            mask = queries.filter_mask(snapshot, filters, project, include_retired, text, rating)
            pools.append(queries.Pool("personal", snapshot, mask))
        if (
            source != "personal"
            and self.team is not None
            and (team := self._team_snapshot()) is not None
        ):
            team_project = self.team.project(project) if project else None
            team_mask = queries.filter_mask(
                team, filters, team_project, include_retired, text, rating
            )
            pools.append(self.team.pool(team, snapshot, team_mask))
        if not pools:
            return [], 0
        return queries.list_page(pools, vector, sort, limit, offset)

    def export(self) -> Iterator[Insight]:
        """Every insight, retired ones included, as stored."""
        for row in self._snapshot().rows.to_pylist():
            yield Insight.model_validate(row)

    def stats(self) -> dict[str, Any]:
        """Counts by domain, category, polarity and project, with the store's model and
        paths, and the loop's figures (recalls by trigger, sessions, verdicts)."""
        numbers = queries.counts(self._snapshot())
        meta = self.table.meta
        result = {
            **numbers,
            "embed_model": meta.get("embed_model"),
            "schema_version": int(meta.get("schema_version", SCHEMA_VERSION)),
            "data_dir": str(self.settings.home),
            "store_uri": self.settings.store_uri,
            "loop": self.loop.ledger.figures(),
        }
        if self.team is not None:
            team = self.team.snapshot()
            counts = queries.counts(team) if team is not None else None
            result["team"] = stats_of(self.team, self._model_name, counts)
        return result

    def vectors(self, columns: Sequence[str] | None = None) -> LabelledVectors:
        """The active insights' embeddings and labels (the in-memory matrix, not a re-read);
        only `columns` of each record, if given (a map of 100k needs four)."""
        snapshot = self._snapshot()
        active = [int(n) for n in np.flatnonzero(snapshot.active)]
        return LabelledVectors(snapshot.records(active, columns), snapshot.vectors[active])

    # -- changing insights ----------------------------------------------------------------------

    def rate(self, insight: str, helpful: bool, note: str | None = None) -> Insight:
        """Count a helpful or harmful use; retire an insight that keeps misleading."""
        if note and len(note) > NOTE_MAX:
            raise InputError(f"{too_long('note', len(note), NOTE_MAX)} (say why in a sentence)")
        current = self.get(insight)
        column = "helpful" if helpful else "harmful"
        values_sql = {column: f"{column} + 1"}
        harmful = current.harmful + (0 if helpful else 1)
        if harmful >= self.settings.retire_after_harmful and harmful > 2 * current.helpful:
            values_sql["status"] = "'retired'"
        if current.source == "team" and self.team is not None:
            self.team.rate(insight, values_sql)  # notes stay personal: they are not shared
            return self.get(insight)
        if note and note.strip():
            values_sql["notes"] = _appended_note(sql_string(redact(note.strip())[:NOTE_MAX]))
        self.table.update(f"id = {sql_string(insight)}", values_sql)
        self._changed()
        return self.get(insight)

    def revise(self, insight: str, fields: dict[str, Any]) -> RecordResult:
        """Edit an insight of your memory in place: the new text goes through the lint
        (secrets and project names included) as `record`'s drafts do, and is embedded
        again. Its id, support, ratings, provenance and feedback history stay: they are
        about the lesson, which an edit words better. Rejected (nothing changes) with the
        lint's reasons, or when the new text says what another insight already says."""
        current = self.get(insight)
        if current.source == "team":
            raise InputError(f"{insight} is in the team pool: edit your own copy, or rate it there")
        editable = set(InsightDraft.model_fields)
        if unknown := sorted(set(fields) - editable):
            raise InputError(
                f"cannot edit {', '.join(unknown)}: only {', '.join(sorted(editable))}"
            )
        draft = {**current.model_dump(include=editable), **fields}
        results, accepted = ingest.screen([draft], None)
        result = results[0]
        result.id = insight
        if not accepted:
            return result
        self._check_model()
        with self._lock:
            item = accepted[0]
            vectors = self.embedder.embed_documents([item.draft.embedding_text()])
            # A field cleared by the edit is inferred, as `record` does: never stored null.
            [item.draft] = fill_labels(
                [item.draft], vectors, self.embedder, self.settings.models_dir
            )
            vector = vectors[0]
            snapshot = self._snapshot()
            similar = snapshot.vectors @ vector
            similar[~snapshot.active] = -np.inf
            own = snapshot.positions.get(insight)
            if own is not None:
                similar[own] = -np.inf
            best = int(np.argmax(similar)) if len(similar) else -1
            if best >= 0 and similar[best] >= self.settings.dedup_threshold:
                other = snapshot.records([best])[0]
                result.status = "rejected"
                result.reasons.append(
                    f"it would say what {other['id']} ('{redact(other['title'])}') says "
                    f"(similarity {float(similar[best]):.2f}): forget one of the two instead"
                )
                return result
            stored = self.get(insight)  # counters as they are now, under the write lock
            notes = [*stored.notes, "edited by hand"][-NOTES_KEPT:]
            row = {
                **stored.model_dump(),
                **item.draft.model_dump(),
                "updated_at": datetime.now(UTC),
                "abstraction_score": item.score,
                "notes": notes,
                "vector": vector.tolist(),
            }
            self.table.rewrite(row)
        result.status = "stored"
        self._changed()
        return result

    def retire(self, insight: str, reason: str | None = None) -> Insight:
        """Retire an insight of your memory by hand: recall leaves it out until
        `reinstate`; the reason goes in its notes."""
        if reason and len(reason) > NOTE_MAX:
            raise InputError(f"{too_long('reason', len(reason), NOTE_MAX)} (say why briefly)")
        current = self.get(insight)
        if current.source == "team":
            raise InputError(
                f"{insight} is in the team pool: rate it harmful to retire it for the team"
            )
        if current.status == "retired":
            return current
        why = redact(reason.strip()) if reason and reason.strip() else "no reason given"
        note = sql_string(f"retired by hand: {why}"[:NOTE_MAX])
        self.table.update(
            f"id = {sql_string(insight)}", {"status": "'retired'", "notes": _appended_note(note)}
        )
        self._changed()
        return self.get(insight)

    def forget(self, insight: str) -> Insight:
        """Delete one insight. Older table versions keep its text until compaction prunes
        them (an hour later at the earliest): `purge` removes it from disk at once."""
        current = self.get(insight)
        if current.source == "team":
            raise InputError(
                f"{insight} is in the team pool, not your memory: `mtl-mcp forget {insight} "
                "--purge` removes an insight you shared; rate one shared by others as "
                "harmful (rate_insight helpful=false) to retire it"
            )
        self.table.delete(f"id = {sql_string(insight)}")
        self._changed()
        return current

    def purge(self, ids: Collection[str]) -> tuple[int, int]:
        """Delete insights and every copy of them in the table's files, older versions
        included. Waits for other processes' writes; readers of older versions fail once
        and reload. Returns (insights deleted, versions removed)."""
        self._open()
        purged = self.table.purge(ids)
        self.loop.forget(ids)
        self._changed()
        return purged

    # -- the closed loop ---------------------------------------------------------------------

    def recall_for_session(
        self,
        plan: str,
        origin: RecallOrigin,
        k: int = 3,
        project: str | None = None,
        min_score: float | None = None,
        exclude_ids: Collection[str] = (),
        on_time: Callable[[], bool] | None = None,
    ) -> builtins.list[RecallHit] | None:
        """A recall put in front of a session's model unasked (the plan-triggered hook):
        never an insight the session was given already, by any trigger (the ledger's, and
        `exclude_ids` the caller knows of). None when `on_time` says the caller has given
        up meanwhile: then no model sees it and the ledger does not record it."""
        shown = self.loop.shown(origin.session_id) if origin.session_id else set()
        hits = self.recall(
            plan, k=k, project=project, min_score=min_score, exclude_ids=shown | set(exclude_ids)
        )
        if on_time is not None and not on_time():
            return None
        if hits:
            self.loop.note(origin, plan, project, hits)
        return hits

    def note_shown(
        self, origin: RecallOrigin, ids: Sequence[str], project: str | None = None
    ) -> None:
        """Record insights put in front of a model without a plan (the session-start
        context): the ledger gets a recall with no plan."""
        hits = [h for h in (self._hit_of(i) for i in ids) if h is not None]
        self.loop.note(origin, "", project, hits)

    def _hit_of(self, insight: str) -> RecallHit | None:
        try:
            found = self.get(insight)
        except NotFoundError:
            return None
        return RecallHit.model_validate({**found.model_dump(), "score": 0.0, "similarity": 0.0})

    def given_insights(self, session_id: str) -> builtins.list[GivenInsight]:
        """The insights one session was given (by a tool call, the hook or the session-start
        context), in the order it first got them, each with the latest plan it was
        recalled for. Insights gone since are left out."""
        return loop_reports.given(self, session_id)

    def record_verdicts(self, entries: Sequence[VerdictEntry]) -> None:
        """Store the judge's verdicts, each with the embedding of the plan its insight was
        recalled for (what feedback compares later plans with)."""
        vectors = [
            plan_vector(self.embedder, e.plan, split=True) if e.plan else None for e in entries
        ]
        self.loop.add_verdicts(entries, vectors)
        feedback = self.loop.feedback()
        for insight, reason in (feedback.keeps_misleading() if feedback else {}).items():
            self._retire_for(insight, reason)

    def _retire_for(self, insight: str, reason: str) -> None:
        """Retire a personal insight that keeps misleading, saying why in its notes (a team
        one is only left out of this memory's recalls)."""
        snapshot = self._snapshot()
        position = snapshot.positions.get(insight)
        if position is None or not snapshot.active[position]:
            return
        note = sql_string(f"retired by session verdicts: {reason}"[:NOTE_MAX])
        self.table.update(
            f"id = {sql_string(insight)}",
            {"status": "'retired'", "notes": _appended_note(note)},
        )
        logger.info("retired %s: %s", insight, reason)
        self._changed()

    def reinstate(self, insight: str) -> Insight:
        """Undo a retirement (by ratings or session verdicts): the insight is recalled again,
        and verdicts given before now no longer count against it (they stay in its
        history)."""
        current = self.get(insight)
        self.loop.ledger.reinstate(insight)
        if current.source == "personal" and current.status != "active":
            note = sql_string("reinstated by hand")
            self.table.update(
                f"id = {sql_string(insight)}", {"status": "'active'", "notes": _appended_note(note)}
            )
            self._changed()
        return self.get(insight)

    def sessions(self, limit: int = 20) -> builtins.list[SessionReport]:
        """The most recent sessions: what each was given and by which trigger, what was
        learnt from it, and the verdicts."""
        return loop_reports.sessions(self, limit)

    def learnt_in(self, session_id: str) -> builtins.list[Insight]:
        """The insights of your memory that one session produced or confirmed first."""
        snapshot = self._snapshot()
        rows = np.flatnonzero(snapshot.column_mask("session_id", [session_id]))
        return [Insight.model_validate(r) for r in snapshot.records([int(n) for n in rows])]

    def history(self, insight: str) -> InsightHistory:
        """One insight's feedback: its verdicts and the recalls that gave it, newest first."""
        return InsightHistory(
            recalls=self.loop.ledger.recalls(insight=insight, limit=50),
            verdicts=self.loop.ledger.verdicts(insight=insight),
        )

    # -- the team pool ---------------------------------------------------------------------------

    def _team(self) -> TeamPool:
        if self.team is None:
            raise ConfigError(
                "no team pool is configured: set MTL_MCP_TEAM_URI (or team_uri in "
                f"{self.settings.config_file}) to its URI, e.g. s3://bucket/team"
            )
        return self.team

    def share(
        self,
        ids: Sequence[str],
        dry_run: bool = False,
        policy: sharing.SharePolicy | None = None,
    ) -> builtins.list[ShareResult]:
        """Share insights of your memory with the team pool, after a second lint pass (and
        `policy`, if given); one result per id, in order, then any the outbox held.

        When the pool cannot take them now they wait in the outbox (status `queued`); every
        call first retries what waits there. `dry_run` only screens them.
        """
        team = self._team()
        ids = list(dict.fromkeys(ids))
        if not dry_run:
            ids += [i for i in team.outbox.pending() if i not in ids]
        results, ready = sharing.screen_ids(self._snapshot(), ids, policy)
        if not dry_run:
            team.deliver(ready, results, self._model_name, self.settings.dedup_threshold)
        return list(results.values())

    def share_candidates(self, policy: sharing.SharePolicy) -> builtins.list[str]:
        """Ids of the active insights `policy` would share that the pool lacks from you."""
        team = self._team()
        pool = team.snapshot()
        shared = team.shared_in(pool) if pool is not None else set()
        return sharing.candidates(self._snapshot(), shared, policy)

    def purge_shared(self, ids: Collection[str]) -> tuple[int, int]:
        """Purge from the team pool the insights among `ids` that you shared: the rows and
        every copy of them in its objects. Returns (insights deleted, versions removed)."""
        return self._team().purge(sorted(ids))

    def shared_insights(self) -> builtins.list[Insight]:
        """Every insight in the team pool that you shared, read from the pool now."""
        return self._team().shared_by_me()

    def reindex(self, progress: Callable[[int], None] | None = None) -> int:
        """Re-embed every insight with the configured model and record it as the store's."""
        self._open()
        with store_lock(
            self.settings.local_store, exclusive=True
        ):  # writes meanwhile would be overwritten
            backup.make_backup(self.settings, "reindex")  # the overwrite replaces every vector
            rows = self.table.rows_without_vectors()
            vectors: list[Vector] = []
            for start in range(0, len(rows), IMPORT_BATCH):
                batch = rows[start : start + IMPORT_BATCH]
                texts = [Insight.model_validate(r).embedding_text() for r in batch]
                vectors.extend(self.embedder.embed_documents(texts))
                if progress:
                    progress(len(batch))
            self.table.replace(
                [{**r, "vector": v.tolist()} for r, v in zip(rows, vectors, strict=True)],
                self.embedder.name,
                self.embedder.dim,
            )
        return len(rows)

    def flush(self, drain: bool = True) -> None:
        """Write accumulated recall counts (recall stays a pure read on its hot path) and
        the ledger's recalls, then (`drain`) retry the team outbox once per refresh interval
        while the pool answers. The counts go first: a drain waits on the pool, and they
        never should.

        A read-only store cannot take the counts: they are dropped (they are shown, never
        ranked by), said once in the log, and reads go on."""
        try:
            self.loop.flush()
        finally:
            try:
                self._flush_recalls()
            finally:
                if drain:
                    self._drain_outbox()

    def _flush_recalls(self) -> None:
        with self._recalls_lock:
            pending, self._pending_recalls = self._pending_recalls, Counter()
        by_count: dict[int, list[str]] = {}
        for insight, count in pending.items():
            by_count.setdefault(count, []).append(insight)
        for count, ids in list(by_count.items()):
            counts = dict.fromkeys(ids, count)
            try:
                self.table.update(
                    ids_predicate(ids),
                    {"recall_count": f"recall_count + {count}"},
                    patch=functools.partial(Snapshot.with_recall_counts, counts=counts),
                )
            except StoreReadOnly as exc:
                if not self._counts_unsaved:
                    logger.info("recall counts are not saved: %s", exc)
                self._counts_unsaved = True
                return
            except StoreError:  # keep the unwritten counts for the next flush
                with self._recalls_lock:
                    for times, group in by_count.items():
                        self._pending_recalls.update(dict.fromkeys(group, times))
                raise
            del by_count[count]

    def _drain_outbox(self) -> None:
        """Share what waits in the outbox, at most once per refresh interval, and only once
        a background refresh has heard from the pool (an idle process starts one)."""
        team = self.team
        if team is None or not team.outbox.pending():
            return
        if team.tier.status().reachable is not True:
            team.tier.refresh_when_due()
            return
        now = time.monotonic()
        if now - self._drained_at < self.settings.refresh_seconds:
            return
        self._drained_at = now
        try:
            drained = self.share([])
        except Retryable as exc:
            logger.info("the team outbox waits: %s", exc)
            return
        logger.info("team outbox: %s", Counter(r.status for r in drained))

    # -- backups ---------------------------------------------------------------------------------

    def backup(self, reason: str = "manual") -> BackupInfo | None:
        """Back up the current rows now; None if there is no store yet."""
        return backup.make_backup(self.settings, reason)

    def backups(self) -> builtins.list[BackupInfo]:
        """The complete backups, newest first."""
        return backup.list_backups(self.settings)

    def find_backup(self, name: str) -> BackupInfo:
        """A backup by the name `backups()` shows, or by its path."""
        return backup.find_backup(self.settings, name)

    def restore(self, chosen: BackupInfo) -> RestoreResult:
        """Replace the store with a backup; the replaced store is backed up (or set aside)."""
        self.close()
        result = backup.restore_backup(self.settings, chosen)
        self._seeded = self._seed_done = True  # a restored store is never seeded
        self._changed()
        return result

    def inspect(self) -> str | None:
        """What is wrong with the store's files, or None when every one of them reads."""
        return backup.inspect_store(self.settings)

    def close(self) -> None:
        """Flush pending counters; the memory can be used again afterwards (it reopens).
        The team outbox is left for the next share or a running server: closing never
        waits on the pool."""
        try:
            self.flush(drain=False)
        finally:
            self._personal.close()
            if self.team is not None:
                self.team.close()
