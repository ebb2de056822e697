"""Reciprocal-rank fusion of a dense and a keyword ranking (what and why: `index.methods`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float32]
Indices = npt.NDArray[np.int64]
# The names (insight ids) of candidates at some positions: ties between equal scores are
# broken by name, never by where a row happens to be stored, so that one store or two tiers
# holding the same rows rank them the same.
Names = Callable[[Indices], Sequence[str] | npt.NDArray[np.str_]]

RRF_K = 60  # the constant of Cormack et al. (2009); it was not tuned
FUSION_DEPTH = 200  # ranks below this in one list add < 1/260 each: not worth sorting for


def _name_order(positions: Indices, names: Names | None) -> Indices:
    """A sort key for `positions` that orders them by name (by position without names)."""
    if names is None or len(positions) == 0:
        return positions
    return np.argsort(np.argsort(np.array(names(positions), dtype=str), kind="stable"))


def _top(scores: Floats, depth: int, names: Names | None, tie: Floats | None = None) -> Indices:
    """Positions of the `depth` best scores, best first; ties go to the better `tie` score,
    then to the first name. Every row tied at the cut is considered, so which one makes it
    does not depend on storage order."""
    if len(scores) > depth:
        cut = np.partition(scores, len(scores) - depth)[len(scores) - depth]
        part = np.flatnonzero(scores >= cut)
    else:
        part = np.arange(len(scores))
    keys: list[npt.NDArray[np.generic]] = [_name_order(part, names)]
    if tie is not None:
        keys.append(-tie[part])
    keys.append(-scores[part])
    order = np.lexsort(keys)
    return part[order][:depth].astype(np.int64)


def fuse(
    dense: Floats | None,
    keyword: Floats | None,
    k: int,
    depth: int = FUSION_DEPTH,
    names: Names | None = None,
) -> Indices:
    """Candidate positions of the `k` best, best first, by reciprocal-rank fusion.

    With one ranking this is that ranking's top k. Keyword scores of 0 (no shared word) do
    not rank. Ties break on the dense score, then on `names` (else position), so a shorter
    `k` always gives a prefix of a longer one.
    """
    source = dense if dense is not None else keyword
    if source is None:
        raise ValueError("a recall method needs at least one ranking")
    size = len(source)
    rankings = rankings_of(dense, keyword, max(depth, k), names)
    if len(rankings) == 1:
        # Keyword-only: documents that share no word follow in name order, so k is met.
        only = rankings[0]
        if len(only) < k:
            rest = np.setdiff1d(np.arange(size), only, assume_unique=True)
            only = np.concatenate([only, rest[np.argsort(_name_order(rest, names))]])
        return only[:k].astype(np.int64)
    fused = rrf_scores(size, rankings)
    ranked = np.flatnonzero(fused > 0)
    tie = dense[ranked] if dense is not None else np.zeros(len(ranked))
    order = np.lexsort((_name_order(ranked, names), -tie, -fused[ranked]))
    return ranked[order][:k].astype(np.int64)


def rrf_scores(size: int, rankings: list[Indices]) -> npt.NDArray[np.float64]:
    """Sum over rankings of 1 / (RRF_K + rank), rank counted from 1; 0 where none ranks it."""
    fused = np.zeros(size, dtype=np.float64)
    for ranking in rankings:
        fused[ranking] += 1.0 / (RRF_K + 1 + np.arange(len(ranking)))
    return fused


def rankings_of(
    dense: Floats | None,
    keyword: Floats | None,
    depth: int = FUSION_DEPTH,
    names: Names | None = None,
) -> list[Indices]:
    """The top `depth` of each ranking that is present (keyword: only documents that match;
    its ties go to the better dense score)."""
    rankings = []
    if dense is not None:
        rankings.append(_top(dense, depth, names))
    if keyword is not None:
        matched = np.flatnonzero(keyword > 0)

        def matched_names(positions: Indices) -> Sequence[str] | npt.NDArray[np.str_]:
            assert names is not None
            return names(matched[positions])

        tie = dense[matched] if dense is not None else None
        best = _top(keyword[matched], depth, matched_names if names else None, tie)
        rankings.append(matched[best])
    return rankings
