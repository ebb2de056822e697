"""Recording: new drafts through the lint and deduplication, imports of exported
insights and JSONL files, and the starter pack."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, Field

import mtl_mcp.memory.ingest as ingest
from mtl_mcp.index.categories import fill_labels
from mtl_mcp.memory.jsonl import read_import
from mtl_mcp.memory.reading import Reading
from mtl_mcp.schemas import (
    TEXT_MAX,
    Insight,
    InsightDraft,
    NearInsight,
    Provenance,
    RecordResult,
)
from mtl_mcp.storage.schema import ids_predicate
from mtl_mcp.text.lint import lint
from mtl_mcp.text.starter import starter_drafts

if TYPE_CHECKING:
    pass

logger = logging.getLogger(__name__)

NOTES_KEPT = 10


IMPORT_BATCH = 256
NEAREST_SHOWN = 5  # insights the distiller sees, to confirm one rather than write it again


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


class Recording(Reading):
    """Record drafts, import insights, seed the starter pack."""

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
            now = self.clock()
            plan = ingest.plan_writes(
                accepted,
                vectors,
                self._snapshot(),
                provenance,
                self.settings.dedup_threshold,
                results,
                now,
            )
            if self.table.insert(plan.rows) < len(plan.rows):  # another process was first
                stored = self.table.read(ids_predicate(plan.drafts), ["id", "created_at"])
                plan.raced(stored, results)
            # After the insert: a target may be a new row.
            for targets, sql in ingest.merge_updates(plan.merges, provenance, now):
                self.table.update_rows(ids_predicate(targets), sql)
        self._changed()
        return results

    def nearest(self, text: str, k: int = NEAREST_SHOWN) -> list[NearInsight]:
        """The active insights of your memory closest in meaning to `text` (a session's
        digest: its first part, which the model reads), best first: what the distiller is
        shown so that it confirms a lesson rather than writes it again."""
        if not text.strip() or k < 1:
            return []
        self._check_model()
        snapshot = self._snapshot()
        if not len(snapshot):
            return []
        similar = snapshot.vectors @ self.embedder.embed_query(text[:TEXT_MAX])
        similar[~snapshot.active] = -np.inf
        best = [int(n) for n in np.argsort(-similar)[:k] if np.isfinite(similar[n])]
        return [
            NearInsight(id=row["id"], title=row["title"], similarity=round(float(similar[n]), 4))
            for n, row in zip(best, snapshot.records(best, ["id", "title"]), strict=True)
        ]

    def confirm(
        self, ids: Sequence[str], provenance: Provenance | None = None
    ) -> list[RecordResult]:
        """A session confirmed these insights instead of writing them again: each gains
        support + 1 and the session's project, as a merged draft would. One result per
        id, in order: `merged`, or `rejected` for an id that is not an active insight of
        your memory."""
        provenance = provenance or Provenance()
        snapshot = self._snapshot()
        results = []
        with self._lock:
            for insight in ids:
                position = snapshot.positions.get(insight)
                if position is None or not snapshot.active[position]:
                    results.append(
                        RecordResult(
                            status="rejected",
                            id=insight,
                            reasons=[f"{insight} is not an active insight of this memory"],
                        )
                    )
                    continue
                sql = ingest.confirm_sql(provenance, self.clock())
                self.table.update_rows(ids_predicate([insight]), sql)
                title = snapshot.records([position], ["title"])[0]["title"]
                results.append(RecordResult(status="merged", id=insight, title=title))
        if any(r.status == "merged" for r in results):
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
