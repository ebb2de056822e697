"""Labels a draft left out: its polarity and its category, inferred when it is recorded.

Both are deliberately simple, and measured on the 81 labelled items of the shipped
evaluation pool (`mtl_mcp/data/eval/pool.jsonl`), which neither was designed on:

- Polarity, by a rule: a lesson learned from a failure is told as a story, so its first
  sentence opens with a noun phrase or a gerund and has a verb in the past tense ("A retried
  request produced two records"); a success is an imperative ("Bind values as parameters").
  A title that starts with "Do not", "Never" or "Avoid" is a failure. 55/58 right on the
  starter pack it was written against, 75/81 (93%) on the evaluation pool.
- Category, by the nearest centroid: the starter pack's insights, embedded and averaged per
  category, are ten prototypes; a draft takes the category whose prototype its embedding is
  closest to. 48/81 (59%) on the evaluation pool, against 10% by chance; the labels
  themselves are a judgement call between neighbouring kinds.
"""

from __future__ import annotations

import hashlib
import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING, cast

import numpy as np

from mtl_mcp.models import Category, InsightDraft, Polarity

if TYPE_CHECKING:
    from mtl_mcp.embed import Embedder, Vector

_NEGATIVE_TITLE = re.compile(r"^(?:do not|don't|never|avoid|stop)\b", re.I)
_FIRST_SENTENCE = re.compile(r"(?<=[.!?])\s")
# Words a story starts with; an imperative starts with its verb instead.
_NARRATIVE_OPENERS_TEXT = (
    "a an the one two several some our my we i each every its their "
    "this that these those after when while hours days"
)
_NARRATIVE_OPENERS = frozenset(_NARRATIVE_OPENERS_TEXT.split())
_NOT_NOUNS = frozenset({"always", "unless", "as", "is", "does", "has"})
_IRREGULAR_PAST = (
    "was|were|had|did|got|went|broke|hid|lost|made|left|ran|took|kept|let|put|set|came|became|"
    "found|gave|held|led|meant|sent|stood|thought|told|wrote|spent|fell|froze|brought|caught"
)
_PAST = re.compile(rf"\b(?:\w{{3,}}(?<!e)ed|{_IRREGULAR_PAST})\b", re.I)


def infer_polarity(draft: InsightDraft) -> Polarity:
    """'failure' for a lesson told as what went wrong, else 'success'."""
    if _NEGATIVE_TITLE.match(draft.title.strip()):
        return "failure"
    first = _FIRST_SENTENCE.split(draft.content.strip(), maxsplit=1)[0]
    words = first.split()
    opener = words[0].lower().strip(",;:\"'()") if words else ""
    narrative = opener in _NARRATIVE_OPENERS or (
        opener not in _NOT_NOUNS
        and (opener.endswith("ing") or (opener.endswith("s") and not opener.endswith("ss")))
    )
    return "failure" if narrative and _PAST.search(first) else "success"


class CategoryPrototypes:
    """One unit vector per category: the mean embedding of its starter-pack insights."""

    def __init__(self, embedder: Embedder, cache_dir: Path | None = None) -> None:
        from mtl_mcp.store import starter_drafts

        drafts = [d for d in starter_drafts() if d.category not in (None, "other")]
        labels = [cast(str, d.category) for d in drafts]
        self.categories: list[Category] = sorted(set(labels))  # type: ignore[arg-type]
        texts = [d.embedding_text() for d in drafts]
        # Embedding the starter pack costs about a second: a one-shot CLI `add` would pay it
        # on every run, so the prototypes are kept on disk, keyed by model and pack content.
        key = hashlib.sha256("\n".join([embedder.name, *labels, *texts]).encode()).hexdigest()
        cached = cache_dir / f"category-prototypes-{key[:16]}.npy" if cache_dir else None
        if cached is not None and cached.is_file():
            self.matrix = np.load(cached)
            return
        vectors = embedder.embed_documents(texts)
        rows = [
            vectors[[n for n, label in enumerate(labels) if label == c]].mean(axis=0)
            for c in self.categories
        ]
        matrix = np.asarray(rows, dtype=np.float32)
        self.matrix = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
        if cached is not None:
            cached.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            np.save(cached, self.matrix)

    def nearest(self, vectors: Vector) -> list[Category]:
        """The category of the prototype closest to each row of `vectors`."""
        if not len(vectors):
            return []
        return [self.categories[int(i)] for i in (vectors @ self.matrix.T).argmax(axis=1)]


_PROTOTYPES: dict[str, CategoryPrototypes] = {}
_LOCK = threading.Lock()


def category_prototypes(embedder: Embedder, cache_dir: Path | None = None) -> CategoryPrototypes:
    """The prototypes for this embedding model, computed once per process (and cached in
    `cache_dir` across processes)."""
    with _LOCK:
        if embedder.name not in _PROTOTYPES:
            _PROTOTYPES[embedder.name] = CategoryPrototypes(embedder, cache_dir)
        return _PROTOTYPES[embedder.name]


def fill_labels(
    drafts: list[InsightDraft], vectors: Vector, embedder: Embedder, cache_dir: Path | None = None
) -> list[InsightDraft]:
    """The drafts with any missing polarity or category inferred (`vectors` are theirs)."""
    missing = [n for n, d in enumerate(drafts) if d.category is None]
    prototypes = category_prototypes(embedder, cache_dir) if missing else None
    categories = prototypes.nearest(vectors[missing]) if prototypes else []
    inferred = dict(zip(missing, categories, strict=True))
    filled = []
    for n, draft in enumerate(drafts):
        update: dict[str, str] = {}
        if draft.polarity is None:
            update["polarity"] = infer_polarity(draft)
        if n in inferred:
            update["category"] = inferred[n]
        filled.append(draft.model_copy(update=update) if update else draft)
    return filled
