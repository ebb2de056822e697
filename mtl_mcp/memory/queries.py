"""Reading snapshots: recall for a plan, a filtered page, counts. Pure, in memory.

Filters are boolean masks over a snapshot's rows; rankings come from `mtl_mcp.index`. Recall
and pages read one or two snapshots (the personal store and a team pool) as one: their
candidates are scored together and ranked once.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from mtl_mcp.index.bm25 import Bm25Index, CorpusStatistics, LooseDocuments, query_terms
from mtl_mcp.index.embedder import Vector
from mtl_mcp.index.fusion import FUSION_DEPTH, RRF_K, Floats, Indices, fuse, rankings_of
from mtl_mcp.index.gate import SIGNALS, Gate, hit_signals
from mtl_mcp.index.methods import RecallMethod
from mtl_mcp.schemas import BrowseSort, Insight, RatingState, RecallHit, RecallPart, Scope, Source
from mtl_mcp.storage.snapshot import Mask, Snapshot


@dataclass(frozen=True)
class Pool:
    """One snapshot's rows that a query may return (`mask`), and where they are stored.

    `hidden` rows are not part of the corpus searched at all (a team row that your own
    memory holds too): they neither rank nor count in the keyword statistics.
    """

    source: Source
    snapshot: Snapshot
    mask: Mask
    keywords: Bm25Index | None = None
    hidden: Mask | None = None

    def records(self, indices: Sequence[int]) -> list[dict[str, Any]]:
        """The rows at `indices`, each saying its source."""
        return [{**r, "source": self.source} for r in self.snapshot.records(indices)]


def recall_mask(
    snapshot: Snapshot,
    scope: Scope,
    project: str | None,
    domains: Sequence[str] | None,
    exclude_domains: Sequence[str] | None,
    exclude_ids: Collection[str] = (),
) -> Mask:
    """The active rows a recall may return (none of `exclude_ids`)."""
    mask = snapshot.active.copy()
    if exclude_ids:
        mask &= ~snapshot.column_mask("id", exclude_ids)
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
    pools: Sequence[Pool],
    query: Vector,
    plan: str,
    k: int,
    method: RecallMethod,
    min_score: float | None,
    gate: Gate,
    parts: list[RecallPart] | None = None,
) -> list[RecallHit]:
    """The top k rows under the pools' masks for a plan, fused from the dense and keyword
    rankings of all pools' candidates together: exactly as one store holding every pool's
    rows would rank them (cosine similarities compare across pools; BM25 scores use the
    statistics of all pools' corpora at once; ties break by id, not by storage order).

    Each hit has its probability `p` of helping the plan, by `gate`, from signals measured
    against every candidate considered (before `min_score`).
    `parts`, when given, gets why each hit ranked there, in the same order (`explain`), with
    the gate's signals."""
    keyword_scores = _keyword_scores(pools, plan) if method.keywords else None
    owners, rows, sims, scores, keyword = [], [], [], [], []
    considered, considered_keyword = [], []  # every candidate, before `min_score`: the gate's
    for number, pool in enumerate(pools):
        indices, similar = pool.snapshot.similarities(query, pool.mask)
        considered.append(similar)
        if keyword_scores is not None:
            considered_keyword.append(keyword_scores[number][indices])
        rated = similar + method.rating_weight * pool.snapshot.rating[indices]
        if min_score is not None:
            keep = rated >= min_score
            indices, similar, rated = indices[keep], similar[keep], rated[keep]
        owners.append(np.full(len(indices), number, dtype=np.int64))
        rows.append(indices)
        sims.append(similar)
        scores.append(rated.astype(np.float32))
        if keyword_scores is not None:
            keyword.append(keyword_scores[number][indices])
    all_scores = np.concatenate(scores)
    all_keyword = np.concatenate(keyword) if keyword_scores is not None else None
    owner, row, similarity = np.concatenate(owners), np.concatenate(rows), np.concatenate(sims)
    names = functools.partial(_ids_at, pools, owner, row)
    dense = all_scores if method.dense else None
    best = fuse(dense, all_keyword, k, names=names)
    signals = hit_signals(
        np.concatenate(considered),
        np.concatenate(considered_keyword) if all_keyword is not None else None,
        similarity[best],
        all_keyword[best] if all_keyword is not None else None,
    )
    chances = gate.probabilities(signals)
    if parts is not None:
        found = explain(best, dense, all_keyword, similarity, k, names, pools, owner, row)
        parts += [
            part.model_copy(
                update={
                    "p": round(float(chance), 4),
                    "signals": dict(
                        zip(SIGNALS, (round(float(v), 4) for v in values), strict=True)
                    ),
                }
            )
            for part, values, chance in zip(found, signals, chances, strict=True)
        ]
    return [
        RecallHit.model_validate(
            {
                **record,
                "score": round(float(all_scores[i]), 4),
                "similarity": round(float(similarity[i]), 4),
                "p": round(float(chance), 4),
            }
        )
        for i, record, chance in zip(
            best, _records(pools, owner[best], row[best]), chances, strict=True
        )
    ]


def signals_of(
    pools: Sequence[Pool], query: Vector, plan: str, ids: Collection[str]
) -> dict[str, list[float]]:
    """The gate's signals of the insights `ids` (wherever they are, retired ones too) for a
    plan, against every candidate under the pools' masks."""
    keyword_scores = _keyword_scores(pools, plan)
    sims, keywords, hit_sims, hit_keywords, names = [], [], [], [], []
    for number, pool in enumerate(pools):
        indices, similar = pool.snapshot.similarities(query, pool.mask)
        sims.append(similar)
        keywords.append(keyword_scores[number][indices])
        positions = pool.snapshot.positions
        for insight in ids:
            row = positions.get(insight)
            if row is not None and insight not in names:
                names.append(insight)
                hit_sims.append(float(pool.snapshot.vectors[row] @ query))
                hit_keywords.append(float(keyword_scores[number][row]))
    found = hit_signals(
        np.concatenate(sims),
        np.concatenate(keywords),
        np.array(hit_sims, dtype=np.float32),
        np.array(hit_keywords, dtype=np.float32),
    )
    return {name: [float(v) for v in row] for name, row in zip(names, found, strict=True)}


def explain(
    best: Indices,
    dense: Floats | None,
    keyword: Floats | None,
    similarity: Floats,
    k: int,
    names: Any,
    pools: Sequence[Pool],
    owner: Indices,
    row: Indices,
) -> list[RecallPart]:
    """Why each candidate in `best` ranked there: its rank in the dense and keyword
    rankings `fuse` merged (the same rankings, recomputed), and its fused score."""
    rankings = rankings_of(dense, keyword, max(FUSION_DEPTH, k), names)
    ranks = [{int(c): n + 1 for n, c in enumerate(r)} for r in rankings]
    dense_ranks = ranks[0] if dense is not None else {}
    keyword_ranks = ranks[-1] if keyword is not None else {}
    found = []
    for i in (int(b) for b in best):
        pool = pools[int(owner[i])]
        rating = float(dense[i] - similarity[i]) if dense is not None else 0.0
        ranked = [r for r in (dense_ranks.get(i), keyword_ranks.get(i)) if r is not None]
        found.append(
            RecallPart(
                id=pool.snapshot.rows.column("id")[int(row[i])].as_py(),
                similarity=round(float(similarity[i]), 4),
                rating=round(rating, 4),
                dense_rank=dense_ranks.get(i),
                keyword_score=round(float(keyword[i]), 4) if keyword is not None else None,
                keyword_rank=keyword_ranks.get(i),
                fused=round(sum(1.0 / (RRF_K + r) for r in ranked), 6),
            )
        )
    return found


def _keyword_scores(pools: Sequence[Pool], plan: str) -> list[Floats]:
    """Each pool's BM25 scores for every one of its rows, against the statistics of all
    pools' corpora together. Rows a snapshot gained since its index was built are scored
    one by one, with the same numbers a rebuilt index would give them."""
    terms = query_terms(plan)
    parts: list[tuple[Bm25Index, LooseDocuments | None]] = []
    corpus = CorpusStatistics()
    for pool in pools:
        index = pool.keywords
        assert index is not None, "a keyword ranking needs every pool's index"
        hidden = pool.hidden
        loose = None
        if len(pool.snapshot) > index.size:
            loose = LooseDocuments(pool.snapshot.texts(index.size).to_pylist())
            corpus += loose.statistics(terms, None if hidden is None else hidden[index.size :])
        corpus += index.statistics(terms, None if hidden is None else hidden[: index.size])
        parts.append((index, loose))
    return [
        np.concatenate([index.scores(plan, corpus), loose.scores(plan, corpus)])
        if loose is not None
        else index.scores(plan, corpus)
        for index, loose in parts
    ]


def _ids_at(
    pools: Sequence[Pool], owner: Indices, row: Indices, at: Indices
) -> npt.NDArray[np.str_]:
    """The ids of the candidates at positions `at` of the concatenated (owner, row) lists."""
    if len(pools) == 1:
        return pools[0].snapshot.ids[row[at]]
    owners, rows = owner[at], row[at]
    found = np.empty(len(at), dtype=object)
    for number, pool in enumerate(pools):
        mine = owners == number
        found[mine] = pool.snapshot.ids[rows[mine]]
    return found.astype(str)


def _records(pools: Sequence[Pool], owner: Indices, row: Indices) -> list[dict[str, Any]]:
    """The rows at (pool, position) pairs, in that order: one take per pool."""
    found: dict[tuple[int, int], dict[str, Any]] = {}
    for number, pool in enumerate(pools):
        positions = [int(r) for r, o in zip(row, owner, strict=True) if o == number]
        records = pool.records(positions) if positions else []
        found.update(((number, r), x) for r, x in zip(positions, records, strict=True))
    return [found[int(o), int(r)] for o, r in zip(owner, row, strict=True)]


# What each order sorts by, largest first (a minus: smallest first).
_SORT_COLUMNS = {
    "recent": "updated_at",
    "support": "support",
    "helpful": "helpful",
    "harmful": "harmful",
    "recalled": "recall_count",
    "oldest": "-created_at",
    "relevance": "updated_at",  # without a query to rank by: the most recent first
}


def list_page(
    pools: Sequence[Pool],
    query: Vector | None,
    sort: BrowseSort,
    limit: int,
    offset: int,
) -> tuple[list[Insight], int]:
    """A page of the pools' rows under their masks, by similarity to `query` or by `sort`."""
    owners, rows, keys = [], [], []
    column = _SORT_COLUMNS[sort]
    for number, pool in enumerate(pools):
        indices = np.flatnonzero(pool.mask)
        if query is not None:
            _, values = pool.snapshot.similarities(query, pool.mask)
        else:
            raw = pool.snapshot.rows.column(column.lstrip("-")).to_numpy(zero_copy_only=False)
            values = raw[indices].astype(np.float64)
            values = -values if column.startswith("-") else values
        owners.append(np.full(len(indices), number, dtype=np.int64))
        rows.append(indices)
        keys.append(values.astype(np.float64))
    owner, row = np.concatenate(owners), np.concatenate(rows)
    page = _page(pools, owner, row, -np.concatenate(keys), offset, limit)
    items = [Insight.model_validate(r) for r in _records(pools, owner[page], row[page])]
    return items, len(row)


def _page(
    pools: Sequence[Pool],
    owner: npt.NDArray[np.int64],
    row: npt.NDArray[np.int64],
    keyed: npt.NDArray[np.float64],
    offset: int,
    limit: int,
) -> npt.NDArray[np.int64]:
    """Positions of the page, smallest `keyed` first and ties by id: rows written in one
    batch share their time, and a snapshot's row order (a service's, patched in place, or
    one read afresh) must not decide the order a door shows. Only the rows that can reach
    the page are sorted by id."""
    import pyarrow as pa

    end = offset + limit
    if end <= 0 or not len(keyed):
        return np.zeros(0, dtype=np.int64)
    if end < len(keyed):
        last = np.partition(keyed, end - 1)[end - 1]
        candidates = np.flatnonzero(keyed <= last)
    else:
        candidates = np.arange(len(keyed))
    ids = np.empty(len(candidates), dtype=object)
    for number, pool in enumerate(pools):
        mine = np.flatnonzero(owner[candidates] == number)
        if len(mine):
            taken = pool.snapshot.rows.column("id").take(pa.array(row[candidates][mine]))
            ids[mine] = taken.to_pylist()
    order = np.lexsort((ids.astype(str), keyed[candidates]))
    return candidates[order][offset:end]


def filter_mask(
    snapshot: Snapshot,
    filters: dict[str, str | None],
    project: str | None,
    include_retired: bool,
    text: str | None = None,
    rating: RatingState | None = None,
) -> Mask:
    """Rows matching column `filters` (and produced by `project`, if given), holding every
    word of `text` (case-insensitive, in the title, description or content), and in the
    `rating` state."""
    mask = np.ones(len(snapshot), dtype=bool)
    if rating == "retired":
        mask &= ~snapshot.active
    elif not include_retired:
        mask &= snapshot.active
    for column, value in filters.items():
        if value:
            mask &= snapshot.column_mask(column, [value])
    if project:
        mask &= snapshot.project_mask(project)
    if rating in ("unrated", "helpful", "harmful"):
        helpful, harmful = snapshot.counts("helpful"), snapshot.counts("harmful")
        if rating == "unrated":
            mask &= (helpful == 0) & (harmful == 0)
        elif rating == "helpful":
            mask &= helpful > harmful
        else:
            mask &= (harmful > 0) & (harmful >= helpful)
    for word in (text or "").lower().split():
        if not mask.any():
            break
        mask &= snapshot.contains(word)
    return mask


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
