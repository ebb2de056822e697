"""The numeric parts of recall: the plan's query vector, BM25, reciprocal-rank fusion.

What the methods are and why is in `mtl_mcp.retrieval`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from mtl_mcp.retrieval import STOPWORDS, TOKEN_SEPARATORS, plan_sentences, tokens

if TYPE_CHECKING:
    import pyarrow as pa

    from mtl_mcp.embed import Embedder, Vector

Floats = npt.NDArray[np.float32]
Indices = npt.NDArray[np.int64]

RRF_K = 60  # the constant of Cormack et al. (2009); it was not tuned
FUSION_DEPTH = 200  # ranks below this in one list add < 1/260 each: not worth sorting for
BM25_K1 = 1.2
BM25_B = 0.75


def plan_vector(embedder: Embedder, plan: str, split: bool) -> Vector:
    """The unit-norm query vector for a plan: its own embedding, or its sentences' mean."""
    sentences = plan_sentences(plan) if split else [plan]
    if len(sentences) == 1:
        return embedder.embed_query(sentences[0])
    mean = embedder.embed_documents(sentences).mean(axis=0)
    norm = float(np.linalg.norm(mean))
    vector: Vector = (mean / norm if norm else mean).astype(np.float32)
    return vector


class Bm25Index:
    """Okapi BM25 over one snapshot's insight texts, as postings in compressed-row form.

    Built with pyarrow kernels and numpy sorts, not a Python loop per token: ~40 ms at
    10,000 insights. A query touches only the postings of its own terms.
    """

    def __init__(self, texts: pa.Array | pa.ChunkedArray) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        if isinstance(texts, pa.ChunkedArray):
            texts = texts.combine_chunks()
        self.size = len(texts)
        split = pc.split_pattern_regex(pc.utf8_lower(texts.fill_null("")), TOKEN_SEPARATORS)
        flat = pc.list_flatten(split)
        parents = pc.list_parent_indices(split).to_numpy(zero_copy_only=False)
        encoded = pc.dictionary_encode(flat)
        codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        vocabulary: list[str] = encoded.dictionary.to_pylist()
        useful = np.array([bool(t) and t not in STOPWORDS for t in vocabulary] or [False])
        keep = useful[codes] if len(codes) else np.zeros(0, dtype=bool)
        codes, parents = codes[keep], parents[keep].astype(np.int64)
        lengths = np.bincount(parents, minlength=self.size).astype(np.float32)
        # Sort by term; stable, so each term's documents stay in ascending order, and equal
        # (term, document) pairs are adjacent: their run lengths are the term frequencies.
        order = np.argsort(codes, kind="stable")
        codes, parents = codes[order], parents[order]
        changes = (codes[1:] != codes[:-1]) | (parents[1:] != parents[:-1])
        starts = np.flatnonzero(np.concatenate([[len(codes) > 0], changes]))
        frequency = np.diff(np.append(starts, len(codes))).astype(np.float32)
        terms, self._documents = codes[starts], parents[starts]
        counts = np.bincount(terms, minlength=len(vocabulary))
        self._offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        idf = np.log1p((self.size - counts + 0.5) / (counts + 0.5)).astype(np.float32)
        average = float(lengths.mean()) if self.size and lengths.any() else 1.0
        norm = BM25_K1 * (1 - BM25_B + BM25_B * lengths[self._documents] / average)
        self._weights = (idf[terms] * frequency * (BM25_K1 + 1) / (frequency + norm)).astype(
            np.float32
        )
        self._terms = {t: i for i, t in enumerate(vocabulary) if useful[i]}

    def scores(self, query: str) -> Floats:
        """BM25 score of every document for `query` (0 where no term matches)."""
        result = np.zeros(self.size, dtype=np.float32)
        for term in set(tokens(query)):
            code = self._terms.get(term)
            if code is not None:
                span = slice(self._offsets[code], self._offsets[code + 1])
                result[self._documents[span]] += self._weights[span]
        return result


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
