"""Reciprocal-rank fusion of a dense and a keyword ranking (what and why: `index.methods`)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float32]
Indices = npt.NDArray[np.int64]

RRF_K = 60  # the constant of Cormack et al. (2009); it was not tuned
FUSION_DEPTH = 200  # ranks below this in one list add < 1/260 each: not worth sorting for


def _top(scores: Floats, depth: int) -> Indices:
    """Positions of the `depth` best scores, best first; ties go to the lower position."""
    if len(scores) > depth:
        part = np.argpartition(-scores, depth - 1)[:depth]
    else:
        part = np.arange(len(scores))
    order = np.lexsort((part, -scores[part]))
    return part[order].astype(np.int64)


def fuse(
    dense: Floats | None, keyword: Floats | None, k: int, depth: int = FUSION_DEPTH
) -> Indices:
    """Candidate positions of the `k` best, best first, by reciprocal-rank fusion.

    With one ranking this is that ranking's top k. Keyword scores of 0 (no shared word) do
    not rank. Ties break on the dense score, then on position, so a shorter `k` always gives
    a prefix of a longer one.
    """
    source = dense if dense is not None else keyword
    if source is None:
        raise ValueError("a recall method needs at least one ranking")
    size = len(source)
    rankings = rankings_of(dense, keyword, max(depth, k))
    if len(rankings) == 1:
        # Keyword-only: documents that share no word follow in position order, so k is met.
        only = rankings[0]
        if len(only) < k:
            rest = np.setdiff1d(np.arange(size), only, assume_unique=True)
            only = np.concatenate([only, rest])
        return only[:k]
    fused = rrf_scores(size, rankings)
    ranked = np.flatnonzero(fused > 0)
    tie = dense[ranked] if dense is not None else np.zeros(len(ranked))
    order = np.lexsort((ranked, -tie, -fused[ranked]))
    return ranked[order][:k].astype(np.int64)


def rrf_scores(size: int, rankings: list[Indices]) -> npt.NDArray[np.float64]:
    """Sum over rankings of 1 / (RRF_K + rank), rank counted from 1; 0 where none ranks it."""
    fused = np.zeros(size, dtype=np.float64)
    for ranking in rankings:
        fused[ranking] += 1.0 / (RRF_K + 1 + np.arange(len(ranking)))
    return fused


def rankings_of(
    dense: Floats | None, keyword: Floats | None, depth: int = FUSION_DEPTH
) -> list[Indices]:
    """The top `depth` of each ranking that is present (keyword: only documents that match)."""
    rankings = []
    if dense is not None:
        rankings.append(_top(dense, depth))
    if keyword is not None:
        matched = np.flatnonzero(keyword > 0)
        rankings.append(matched[_top(keyword[matched], depth)])
    return rankings
