"""What sharing does to an insight before a team pool sees it. Pure functions.

An insight leaves your memory only through `Memory.share`, and only after a second pass of
the lint (secrets, instructions aimed at the assistant, task detail, each of the insight's
project names), because the recognizers may have grown since it was recorded. What the pool
stores is the lesson itself: project identities become keyed hashes (the pool's random
salt as the key, so they are opaque to anyone without access to the pool yet equal for
teammates on the same repository), your session, client, notes, ratings and counters stay
home, and the member who shared it is a keyed hash too.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from mtl_mcp.index.embedder import Vector
from mtl_mcp.schemas import Insight, InsightDraft, ShareResult
from mtl_mcp.storage.schema import SHARED_BY
from mtl_mcp.storage.snapshot import Snapshot
from mtl_mcp.text.lint import LintReport, lint

# An insight cleared to share: the insight, its vector, its abstraction score (second pass).
Ready = tuple[Insight, Vector, float]


@dataclass(frozen=True)
class SharePolicy:
    """Which insights `share --policy` picks: proven, abstract and never rated harmful."""

    min_abstraction: float = 0.8
    min_support: int = 2

    def refusals(self, insight: Insight, score: float) -> list[str]:
        """Why the policy leaves `insight` out (empty: it qualifies). `score` is the
        abstraction score of the second lint pass."""
        reasons = []
        if insight.status != "active":
            reasons.append("retired: it misled too often to share")
        if score < self.min_abstraction:
            reasons.append(
                f"abstraction score {score:.2f} is below the policy's {self.min_abstraction}"
            )
        if insight.support < self.min_support:
            reasons.append(
                f"support {insight.support} is below the policy's {self.min_support}: "
                "let more sessions confirm it first"
            )
        if insight.harmful:
            reasons.append(f"rated harmful {insight.harmful} times")
        return reasons


def project_name(project: str) -> str:
    """The short name of a project identity (`host/org/repo` or a path): its last part."""
    return project.rstrip("/").rsplit("/", 1)[-1]


def screen(insight: Insight) -> LintReport:
    """The lint once more, against the name of every project the insight came from."""
    draft = InsightDraft.model_validate(insight.model_dump(include=set(InsightDraft.model_fields)))
    names: list[str | None] = [*sorted({project_name(p) for p in insight.projects if p})]
    reports = [lint(draft, name) for name in names or [None]]
    return LintReport(
        errors=list(dict.fromkeys(e for r in reports for e in r.errors)),
        warnings=list(dict.fromkeys(w for r in reports for w in r.warnings)),
        score=min(r.score for r in reports),
    )


def screen_ids(
    snapshot: Snapshot, ids: Sequence[str], policy: SharePolicy | None
) -> tuple[dict[str, ShareResult], list[Ready]]:
    """A result per id (`would-share` or `rejected` with the reasons), and the insights
    cleared to share, from your memory's snapshot."""
    results: dict[str, ShareResult] = {}
    ready: list[Ready] = []
    for insight_id in ids:
        position = snapshot.positions.get(insight_id)
        if position is None:
            reason = "no insight in your memory has this id (see `mtl-mcp list`)"
            results[insight_id] = ShareResult(id=insight_id, status="rejected", reasons=[reason])
            continue
        insight = Insight.model_validate(snapshot.records([position])[0])
        report = screen(insight)
        reasons = report.errors + (policy.refusals(insight, report.score) if policy else [])
        results[insight_id] = ShareResult(
            id=insight_id,
            title=insight.title,
            status="rejected" if reasons else "would-share",
            reasons=reasons,
            warnings=report.warnings,
        )
        if not reasons:
            ready.append((insight, snapshot.vectors[position], report.score))
    return results, ready


def candidates(snapshot: Snapshot, shared: set[str], policy: SharePolicy) -> list[str]:
    """Ids of the snapshot's active insights the policy admits, less those in `shared`
    (the stored abstraction score decides here; sharing lints them again)."""
    chosen = []
    for record in snapshot.records([int(n) for n in np.flatnonzero(snapshot.active)]):
        insight = Insight.model_validate(record)
        if insight.id not in shared and not policy.refusals(insight, insight.abstraction_score):
            chosen.append(insight.id)
    return chosen


def keyed_hash(salt: str, kind: str, value: str) -> str:
    """An opaque, stable stand-in for `value` in one team pool (`kind`: p, m)."""
    digest = hmac.new(salt.encode(), f"{kind}:{value}".encode(), hashlib.sha256).hexdigest()
    return f"{kind}_{digest[:20]}"


def team_row(
    insight: Insight, vector: Vector, salt: str, member: str, score: float
) -> dict[str, Any]:
    """The team pool's row for a shared insight: the lesson, hashed projects, one member."""
    now = datetime.now(UTC)
    projects = [keyed_hash(salt, "p", p) for p in insight.projects]
    kept = insight.model_dump(include={"title", "description", "content", "polarity"})
    kept |= insight.model_dump(include={"category", "domain", "languages", "tags", "id"})
    return {
        **kept,
        "project": keyed_hash(salt, "p", insight.project) if insight.project else None,
        "projects": projects,
        "created_at": now,
        "updated_at": now,
        "support": 1,
        "helpful": 0,
        "harmful": 0,
        "recall_count": 0,
        "status": "active",
        "abstraction_score": score,
        "notes": [],
        "vector": vector.tolist(),
        SHARED_BY: [member],
    }
