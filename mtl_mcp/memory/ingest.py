"""What recording does to drafts before the table sees them: validate, lint, deduplicate.

Pure functions over a snapshot and the drafts' vectors; `Memory.record` runs them under its
write lock and sends the resulting rows and merges to the table.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
from pydantic import ValidationError

from mtl_mcp.index.embedder import Vector
from mtl_mcp.schemas import Insight, InsightDraft, Provenance, RecordResult, validation_problems
from mtl_mcp.storage.schema import sql_string
from mtl_mcp.storage.snapshot import Snapshot
from mtl_mcp.text.cues import Lesson, conflict
from mtl_mcp.text.lint import LintReport, lint


def insight_id(draft: InsightDraft) -> str:
    """A stable id from the lesson's text, so the same lesson written twice is one row."""
    text = " ".join(f"{draft.title}\n{draft.description}\n{draft.content}".lower().split())
    return "ins_" + hashlib.sha256(text.encode()).hexdigest()[:16]


def verdict(title: str, report: LintReport, insight: str | None = None) -> RecordResult:
    """The result for a linted draft: rejected with the lint's errors, else stored."""
    return RecordResult(
        status="rejected" if report.errors else "stored",
        id=insight,
        title=title,
        reasons=report.errors,
        warnings=report.warnings,
        abstraction_score=report.score,
    )


@dataclass
class Accepted:
    """A draft that passed validation and the lint, at its position in the request."""

    position: int
    draft: InsightDraft
    score: float  # the lint's abstraction score


def screen(
    drafts: Sequence[InsightDraft | dict[str, Any]], project_name: str | None
) -> tuple[list[RecordResult], list[Accepted]]:
    """Validate and lint each draft: one result per draft, and the ones worth embedding."""
    results: list[RecordResult] = []
    accepted: list[Accepted] = []
    for position, raw in enumerate(drafts):
        try:
            draft = raw if isinstance(raw, InsightDraft) else InsightDraft.model_validate(raw)
        except ValidationError as exc:
            results.append(RecordResult(status="rejected", reasons=validation_problems(exc)))
            continue
        report = lint(draft, project_name)
        results.append(verdict(draft.title, report))
        if report.ok:
            accepted.append(Accepted(position, draft, report.score))
    return results, accepted


@dataclass
class WritePlan:
    """New rows to insert, and existing insights a draft merges into."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    merges: list[tuple[str, InsightDraft]] = field(default_factory=list)
    drafts: dict[str, Accepted] = field(default_factory=dict)  # by the id of each new row

    def raced(self, stored: list[dict[str, Any]], results: list[RecordResult]) -> None:
        """Turn the new rows another process stored first into merges.

        `stored` holds the id and created_at of the rows found under the new ids after the
        insert: one not created with ours is another writer's, and the unenforced primary
        key kept it instead of ours, so this draft merges into it (support + 1).
        """
        ours = {row["id"]: row["created_at"] for row in self.rows}
        for row in stored:
            if row["id"] in ours and row["created_at"] != ours[row["id"]]:
                item = self.drafts[row["id"]]
                self.merges.append((row["id"], item.draft))
                results[item.position].status = "merged"


def plan_writes(
    accepted: list[Accepted],
    vectors: Vector,
    snapshot: Snapshot,
    provenance: Provenance,
    threshold: float,
    results: list[RecordResult],
    now: datetime | None = None,
) -> WritePlan:
    """Decide, per accepted draft, a new row or a merge; fill in `results` accordingly.

    A draft merges into an active insight (or an earlier draft of the same batch) whose
    cosine similarity is at least `threshold`, or whose id it shares, unless the two give
    opposite advice or one says the other's flag changed (`text.cues`): those are two
    lessons, however close their words. `now` stamps new rows (default: the clock's now).
    """
    plan = WritePlan()
    pending_vectors: list[Vector] = []
    # One matrix product for the batch; retired rows can never be merge targets.
    similar = snapshot.vectors @ vectors.T
    similar[~snapshot.active] = -np.inf
    known = snapshot.positions
    for column, item in enumerate(accepted):
        vector = vectors[column]
        own = insight_id(item.draft)
        target = duplicate_of(
            own,
            vector,
            similar[:, column],
            snapshot,
            plan.rows,
            pending_vectors,
            threshold,
            lesson_of(item.draft.model_dump()),
        )
        result = results[item.position]
        if target is None:
            plan.rows.append(new_row(item.draft, provenance, item.score, vector, now))
            plan.drafts[own] = item
            pending_vectors.append(vector)
            result.id = own
            continue
        result.status, result.id = "merged", target
        # The same text again changes nothing, unless another project wrote it.
        if target != own or _new_project_for(snapshot, known.get(target), provenance):
            plan.merges.append((target, item.draft))
    return plan


def duplicate_of(
    own: str,
    vector: Vector,
    similar: Vector,
    snapshot: Snapshot,
    pending: list[dict[str, Any]],
    pending_vectors: list[Vector],
    threshold: float,
    lesson: Lesson | None = None,
) -> str | None:
    """The id of an existing (or earlier in this batch) near-identical insight, if any.

    `similar` holds the draft's cosine similarity to every snapshot row (-inf if retired);
    `pending` are the batch's new rows so far, `pending_vectors` their vectors. With the
    draft's `lesson`, a candidate it contradicts or supersedes (or is superseded by) is no
    duplicate: the next closest one above `threshold` is tried.
    """
    if own in snapshot.positions or any(row["id"] == own for row in pending):
        return own
    if pending_vectors:
        sims = np.asarray(pending_vectors) @ vector
        for n in np.flatnonzero(sims >= threshold)[np.argsort(-sims[sims >= threshold])]:
            if lesson is None or conflict(lesson, lesson_of(pending[int(n)])) is None:
                return str(pending[int(n)]["id"])
    if len(similar):
        above = np.flatnonzero(similar >= threshold)
        for n in above[np.argsort(-similar[above])][:8]:
            row = snapshot.records([int(n)], ["id", "title", "description", "content"])[0]
            if lesson is None or conflict(lesson, lesson_of(row)) is None:
                return str(row["id"])
    return None


def lesson_of(row: dict[str, Any]) -> Lesson:
    """What `text.cues` reads of a draft or a row: its title and its embedding text."""
    return Lesson(row["title"], f"{row['title']}. {row['description']} {row['content']}")


def _new_project_for(snapshot: Snapshot, position: int | None, provenance: Provenance) -> bool:
    """Whether `provenance` names a project the stored insight at `position` lacks."""
    if not provenance.project or position is None:
        return False
    projects = snapshot.rows.column("projects")[position].as_py() or []
    return provenance.project not in projects


def new_row(
    draft: InsightDraft,
    provenance: Provenance,
    score: float,
    vector: Vector,
    now: datetime | None = None,
) -> dict[str, Any]:
    """The table row for a new insight, created `now` (default: the clock's now)."""
    now = now or datetime.now(UTC)
    insight = Insight(
        **draft.model_dump(),
        id=insight_id(draft),
        project=provenance.project,
        projects=[provenance.project] if provenance.project else [],
        session_id=provenance.session_id,
        client=provenance.client,
        distilled_by=provenance.distilled_by,
        created_at=now,
        updated_at=now,
        abstraction_score=score,
    )
    return {**insight.model_dump(), "vector": vector.tolist()}


def union_sql(column: str, values: Sequence[str]) -> str:
    """An SQL expression: the list column with `values` added, each once."""
    if not values:
        return column
    return (
        f"array_distinct(array_concat(coalesce({column}, make_array()), "
        f"make_array({', '.join(sql_string(v) for v in values)})))"
    )


def merge_updates(
    merges: Sequence[tuple[str, InsightDraft]], provenance: Provenance, now: datetime | None = None
) -> list[tuple[list[str], dict[str, str]]]:
    """The merges of one batch as few SQL updates as can be: each target's drafts together
    (support + their number, the union of their labels), targets with the same change in
    one update. An import's merges were one commit each: 5,291 of them at 10k insights."""
    drafts: dict[str, list[InsightDraft]] = {}
    for target, draft in merges:
        drafts.setdefault(target, []).append(draft)
    groups: dict[tuple[int, tuple[str, ...], tuple[str, ...]], list[str]] = {}
    for target, mine in drafts.items():
        tags = tuple(dict.fromkeys(t for d in mine for t in d.tags))
        languages = tuple(dict.fromkeys(lang for d in mine for lang in d.languages))
        groups.setdefault((len(mine), tags, languages), []).append(target)
    return [
        (targets, merge_sql(count, tags, languages, provenance, now))
        for (count, tags, languages), targets in groups.items()
    ]


def confirm_sql(
    provenance: Provenance, now: datetime | None = None, count: int = 1
) -> dict[str, str]:
    """support + `count` and the provenance's project, as one atomic SQL update; updated_at
    becomes `now` (default: the clock's now): the lesson was confirmed then."""
    when = (now or datetime.now(UTC)).isoformat()
    return {
        "support": f"support + {count}",
        "updated_at": f"arrow_cast({sql_string(when)}, 'Timestamp(Microsecond, Some(\"UTC\"))')",
        "projects": union_sql("projects", [provenance.project] if provenance.project else []),
    }


def merge_sql(
    count: int,
    tags: Sequence[str],
    languages: Sequence[str],
    provenance: Provenance,
    now: datetime | None = None,
) -> dict[str, str]:
    """`confirm_sql` for `count` drafts, and the union of their tags and languages."""
    return {
        **confirm_sql(provenance, now, count),
        "tags": union_sql("tags", tags),
        "languages": union_sql("languages", languages),
    }
