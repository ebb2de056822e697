"""How recall ranks insights for a plan: the methods `mtl-mcp eval` compares, and their parts.

The default, `mtl`:

1. The plan is split into sentences, each is embedded, and the mean of those vectors is the
   query. A 3-4 step plan then weighs every step the same; one long embedding lets the
   wordiest step dominate. A one-sentence plan costs exactly what it did before.
2. Two rankings of the candidates: cosine similarity to that vector (plus the rating term),
   and Okapi BM25 over each insight's title, description and content, so rare words the plan
   shares with an insight count even where the small embedding model blurs them.
3. Reciprocal-rank fusion (k=60, equal weights) merges the two: robust to the scores' very
   different scales, and no weight to tune.

How it was chosen (README, "Retrieval quality"): each idea was tried on the dev split of the
shipped evaluation set and kept only if it also won on the test split. On dev, `mtl` and
`hybrid` (the same without sentence pooling) tie within noise; on test `mtl` wins. Ideas that
won on dev but lost on test, or did not win on dev, were dropped: MMR diversity, a category
prior, penalties for domain-specific vocabulary or embedding specificity, CSLS hubness
correction, stemming, other embedding keys, and the full-plan embedding as a third ranking.

The numeric parts are in `mtl_mcp.index.bm25` and `mtl_mcp.index.fusion`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mtl_mcp.errors import InputError

if TYPE_CHECKING:
    from mtl_mcp.index.embedder import Embedder, Vector

# Ratings are query-independent, so a large weight lifts a well-rated lesson into plans it
# does not fit: with 0.1, ratings left on the dev queries cost the test split 3 of 108 relevant
# results; with 0.03 they cost none (bench/retrieval.py, "feedback").
RATING_WEIGHT = 0.03
MAX_SENTENCES = 6  # a longer plan's tail is embedded as one piece, to bound the cost
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\s*\n+\s*")


@dataclass(frozen=True)
class RecallMethod:
    """One way to rank insights for a plan."""

    name: str
    summary: str
    split_plan: bool = False  # query = mean of the plan's sentence embeddings
    dense: bool = True  # rank by cosine similarity (plus the rating term)
    keywords: bool = False  # rank by BM25
    rating_weight: float = 0.0  # cosine + weight * (helpful - harmful) / (helpful + harmful + 2)


METHODS: dict[str, RecallMethod] = {
    m.name: m
    for m in (
        RecallMethod(
            "dense",
            "the paper's method: cosine similarity to the plan's embedding, nothing else",
        ),
        RecallMethod("bm25", "Okapi BM25 keyword ranking only", dense=False, keywords=True),
        RecallMethod(
            "hybrid",
            "dense + BM25, reciprocal-rank fusion",
            keywords=True,
            rating_weight=RATING_WEIGHT,
        ),
        RecallMethod(
            "split",
            "dense on the mean of the plan's sentence embeddings",
            split_plan=True,
            rating_weight=RATING_WEIGHT,
        ),
        RecallMethod(
            "mtl",
            "sentence-pooled dense + BM25, reciprocal-rank fusion, rating term (default)",
            split_plan=True,
            keywords=True,
            rating_weight=RATING_WEIGHT,
        ),
    )
}
DEFAULT_METHOD = "mtl"


def get_method(method: str | RecallMethod | None) -> RecallMethod:
    """A method by name (None: the default)."""
    if isinstance(method, RecallMethod):
        return method
    name = method or DEFAULT_METHOD
    if name not in METHODS:
        raise InputError(f"unknown recall method {name!r}: use one of {', '.join(METHODS)}")
    return METHODS[name]


def plan_sentences(plan: str) -> list[str]:
    """The plan's sentences (or lines); fragments under three words join their neighbour."""
    parts = [p.strip() for p in _SENTENCE_END.split(plan.strip()) if p.strip()]
    merged: list[str] = []
    carry = ""
    for part in parts:
        piece = f"{carry} {part}".strip()
        if len(piece.split()) < 3:
            carry = piece  # "1." or "Then:" belongs to what follows it
            continue
        merged.append(piece)
        carry = ""
    if carry:
        if merged:
            merged[-1] = f"{merged[-1]} {carry}"
        else:
            merged.append(carry)
    if len(merged) > MAX_SENTENCES:
        merged = [*merged[: MAX_SENTENCES - 1], " ".join(merged[MAX_SENTENCES - 1 :])]
    return merged or [plan.strip()]


def plan_vector(embedder: Embedder, plan: str, split: bool) -> Vector:
    """The unit-norm query vector for a plan: its own embedding, or its sentences' mean."""
    sentences = plan_sentences(plan) if split else [plan]
    if len(sentences) == 1:
        return embedder.embed_query(sentences[0])
    # No numpy import in this module: the CLI, so every hook, imports it for METHODS.
    mean = embedder.embed_documents(sentences).mean(axis=0)
    norm = float(mean @ mean) ** 0.5
    vector: Vector = (mean / norm if norm else mean).astype("float32")
    return vector
