"""Okapi BM25 over insight texts, the keyword half of recall (what and why: `index.methods`).

A score needs two kinds of numbers: each document's own (how often a term occurs in it, its
length) and the corpus's (how many documents there are, their average length, how many hold
each term). The index keeps the first kind; the second is a `CorpusStatistics`, which adds
up over several indexes. Recall over the personal store and a team pool sums the two tiers'
statistics, so every document is scored as one index over both would score it: a pool's
own small corpus would otherwise give its rows idf values that no personal row could match
(a one-row pool scored 2.6 where one index over both gave 31.5).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import pyarrow as pa

BM25_K1 = 1.2
BM25_B = 0.75
_TOKEN = re.compile(r"[a-z0-9]+")
TOKEN_SEPARATORS = r"[^a-z0-9]+"  # the same tokens as _TOKEN, for pyarrow's splitter
_STOPWORDS_TEXT = (
    "a an the and or of to in on for with by is are be it its this that as at from into when "
    "if not no your you before after then than so do does can will should"
)
STOPWORDS = frozenset(_STOPWORDS_TEXT.split())

Floats = npt.NDArray[np.float32]
Mask = npt.NDArray[np.bool_]


def tokens(text: str) -> list[str]:
    """Lower-case alphanumeric words without stopwords, as the BM25 index sees them."""
    return [w for w in _TOKEN.findall(text.lower()) if w not in STOPWORDS]


def query_terms(query: str) -> list[str]:
    """A query's distinct terms, in a fixed order (scores add up in this order)."""
    return sorted(set(tokens(query)))


@dataclass(frozen=True)
class CorpusStatistics:
    """What BM25 needs to know of the whole corpus for some terms: the number of documents,
    their total length, and how many documents hold each term. Corpora add up."""

    documents: int = 0
    length: float = 0.0
    holding: Mapping[str, int] = field(default_factory=dict)

    def __add__(self, other: CorpusStatistics) -> CorpusStatistics:
        holding = Counter(self.holding)
        holding.update(other.holding)
        return CorpusStatistics(
            self.documents + other.documents, self.length + other.length, dict(holding)
        )

    @property
    def average_length(self) -> float:
        return self.length / self.documents if self.documents and self.length else 1.0

    def idf(self, term: str) -> float:
        held = self.holding.get(term, 0)
        return math.log1p((self.documents - held + 0.5) / (held + 0.5))

    def weights(self, term: str, frequency: Floats, lengths: Floats) -> Floats:
        """The term's BM25 contribution for documents with these term frequencies and
        lengths."""
        norm = BM25_K1 * (1 - BM25_B + BM25_B * lengths / self.average_length)
        weights: Floats = (self.idf(term) * frequency * (BM25_K1 + 1) / (frequency + norm)).astype(
            np.float32
        )
        return weights


class Bm25Index:
    """The documents' side of BM25 over one snapshot's texts: postings in compressed-row
    form (document and term frequency per term), and each document's length.

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
        self.lengths: Floats = np.bincount(parents, minlength=self.size).astype(np.float32)
        # Sort by term; stable, so each term's documents stay in ascending order, and equal
        # (term, document) pairs are adjacent: their run lengths are the term frequencies.
        order = np.argsort(codes, kind="stable")
        codes, parents = codes[order], parents[order]
        changes = (codes[1:] != codes[:-1]) | (parents[1:] != parents[:-1])
        starts = np.flatnonzero(np.concatenate([[len(codes) > 0], changes]))
        self._frequency = np.diff(np.append(starts, len(codes))).astype(np.float32)
        terms, self._documents = codes[starts], parents[starts]
        counts = np.bincount(terms, minlength=len(vocabulary))
        self._offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self._terms = {t: i for i, t in enumerate(vocabulary) if useful[i]}

    def _postings(self, term: str) -> tuple[npt.NDArray[np.int64], Floats]:
        """The documents holding `term` and its frequency in each."""
        code = self._terms.get(term)
        if code is None:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        span = slice(self._offsets[code], self._offsets[code + 1])
        return self._documents[span], self._frequency[span]

    def statistics(self, terms: Iterable[str], hidden: Mask | None = None) -> CorpusStatistics:
        """The corpus statistics of the indexed documents, less those `hidden` (rows that
        are not part of the corpus being searched, e.g. a team row your memory holds)."""
        lengths = self.lengths
        documents, length = self.size, float(lengths.sum(dtype=np.float64))
        if hidden is not None and hidden.any():
            documents -= int(hidden.sum())
            length -= float(lengths[hidden].sum(dtype=np.float64))
        holding = {}
        for term in terms:
            held, _ = self._postings(term)
            holding[term] = len(held) - (int(hidden[held].sum()) if hidden is not None else 0)
        return CorpusStatistics(documents, length, holding)

    def scores(self, query: str, corpus: CorpusStatistics | None = None) -> Floats:
        """BM25 score of every document for `query` (0 where no term matches), against the
        `corpus` statistics (default: this index's own)."""
        terms = query_terms(query)
        corpus = corpus if corpus is not None else self.statistics(terms)
        result = np.zeros(self.size, dtype=np.float32)
        for term in terms:
            documents, frequency = self._postings(term)
            if len(documents):
                result[documents] += corpus.weights(term, frequency, self.lengths[documents])
        return result


class LooseDocuments:
    """A few documents outside an index (rows appended since it was built): the same
    numbers, counted one by one, so that they score exactly as after a rebuild."""

    def __init__(self, texts: Sequence[str]) -> None:
        self._words = [Counter(tokens(text)) for text in texts]
        self.lengths: Floats = np.array([sum(w.values()) for w in self._words], np.float32)

    def statistics(self, terms: Iterable[str], hidden: Mask | None = None) -> CorpusStatistics:
        """As `Bm25Index.statistics`."""
        counted = [w for n, w in enumerate(self._words) if hidden is None or not hidden[n]]
        length = sum(sum(w.values()) for w in counted)
        holding = {term: sum(term in words for words in counted) for term in terms}
        return CorpusStatistics(len(counted), float(length), holding)

    def scores(self, query: str, corpus: CorpusStatistics) -> Floats:
        result = np.zeros(len(self._words), dtype=np.float32)
        for term in query_terms(query):
            held = np.array([n for n, w in enumerate(self._words) if term in w], np.int64)
            if len(held):
                frequency = np.array([self._words[n][term] for n in held], np.float32)
                result[held] += corpus.weights(term, frequency, self.lengths[held])
        return result
