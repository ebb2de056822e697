"""Reading a snapshot: recall for a plan, a filtered page, counts. Pure, in memory.

Filters are boolean masks over the snapshot's rows; rankings come from `mtl_mcp.index`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from mtl_mcp.index.bm25 import Bm25Index
from mtl_mcp.index.embedder import Vector
from mtl_mcp.index.fusion import fuse
from mtl_mcp.index.methods import RecallMethod
from mtl_mcp.schemas import Insight, ListSort, RecallHit, Scope
from mtl_mcp.storage.snapshot import Mask, Snapshot


def recall_mask(
    snapshot: Snapshot,
    scope: Scope,
    project: str | None,
    domains: Sequence[str] | None,
    exclude_domains: Sequence[str] | None,
) -> Mask:
    """The active rows a recall may return."""
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
    return mask


def recall_hits(
    snapshot: Snapshot,
    keywords: Bm25Index | None,
    query: Vector,
    plan: str,
    mask: Mask,
    k: int,
    method: RecallMethod,
    min_score: float | None,
) -> list[RecallHit]:
    """The top k rows under `mask` for a plan, fused from its dense and keyword rankings."""
    indices, sims = snapshot.similarities(query, mask)
    scores = (sims + method.rating_weight * snapshot.rating[indices]).astype(np.float32)
    if min_score is not None:
        keep = scores >= min_score
        indices, sims, scores = indices[keep], sims[keep], scores[keep]
    keyword = None
    if keywords is not None:
        scores_by_row = keywords.scores(plan)
        if len(scores_by_row) < len(snapshot):  # rows appended since the index was built
            tail = snapshot.texts(len(scores_by_row)).to_pylist()
            scores_by_row = np.concatenate([scores_by_row, keywords.scores_of(plan, tail)])
        keyword = scores_by_row[indices]
    best = fuse(scores if method.dense else None, keyword, k)
    records = snapshot.records([int(indices[i]) for i in best])
    return [
        RecallHit.model_validate(
            {**r, "score": round(float(scores[i]), 4), "similarity": round(float(sims[i]), 4)}
        )
        for r, i in zip(records, best, strict=True)
    ]


def list_page(
    snapshot: Snapshot,
    query: Vector | None,
    filters: dict[str, str | None],
    project: str | None,
    sort: ListSort,
    limit: int,
    offset: int,
    include_retired: bool,
) -> tuple[list[Insight], int]:
    """A page of rows matching column `filters`, by similarity to `query` or by `sort`."""
    mask = np.ones(len(snapshot), dtype=bool)
    if not include_retired:
        mask &= snapshot.active
    for column, value in filters.items():
        if value:
            mask &= snapshot.column_mask(column, [value])
    if project:
        mask &= snapshot.project_mask(project)
    indices = np.flatnonzero(mask)
    if query is not None:
        _, sims = snapshot.similarities(query, mask)
        order = np.argsort(-sims, kind="stable")
    else:
        key = {"recent": "updated_at", "support": "support", "helpful": "helpful"}[sort]
        values = snapshot.rows.column(key).to_numpy(zero_copy_only=False)[indices]
        order = np.argsort(-values.astype(np.float64), kind="stable")
    page = indices[order][offset : offset + limit]
    items = [Insight.model_validate(r) for r in snapshot.records([int(i) for i in page])]
    return items, len(indices)


def counts(snapshot: Snapshot) -> dict[str, Any]:
    """Active and retired totals, and active insights by domain, category, polarity, project."""
    rows, active = snapshot.rows, snapshot.active

    def by(column: str) -> dict[str, int]:
        values = rows.column(column).to_pylist()
        return dict(Counter(v or "(none)" for v, a in zip(values, active, strict=True) if a))

    return {
        "total": int(active.sum()),
        "retired": int(len(snapshot) - active.sum()),
        "by_domain": by("domain"),
        "by_category": by("category"),
        "by_polarity": by("polarity"),
        "by_project": by("project"),
    }
