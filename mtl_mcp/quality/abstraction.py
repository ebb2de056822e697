"""How abstract is a memory? The paper's two measures over embeddings labelled by domain.

- Davies-Bouldin index (DBI): for each domain, the mean distance of its insights to their
  centroid; for each pair of domains, the sum of those spreads over the distance between the
  centroids; averaged over domains, the worst pair each. Low = tight domains far apart, i.e.
  domains easy to tell apart. (The paper reports trajectories 6.50 and insights 2.33; on our
  data trajectory-like texts score lower than insights, as this definition predicts for texts
  that separate by domain: README, "Abstraction". LISI and specificity carry the signal.)
- LISI (local inverse Simpson's index): for each insight, the inverse Simpson index
  1 / sum(p_d^2) of the domains among its k nearest neighbours (cosine). 1 = every neighbour
  from one domain; up to the number of domains when they are evenly mixed. This is the
  simple, perplexity-free version: uniform weights over k neighbours, k = the median domain
  size (at most 30), so that perfectly separated domains can score 1. The paper's
  perplexity-weighted figures (Trajectory 1.70, Insight 4.47) compare in direction and rough
  size only.
- Specificity, per insight: how much more of its neighbourhood comes from its own domain
  than chance would put there, 0 (as mixed as the whole memory) to 1 (only its own domain).

Only insights with a domain count. Neighbourhoods are computed on at most 4,000 insights
(a seeded random sample beyond that), which keeps it to seconds at any store size.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from mtl_mcp.memory import Memory

Matrix = npt.NDArray[np.float32]
NEIGHBOURS = 30  # at most; fewer when domains are smaller
MAX_POINTS = 4000
BLOCK = 1024  # rows per similarity block: 1024 x 4000 floats stay small


class SpecificInsight(BaseModel):
    id: str
    title: str
    domain: str
    specificity: float


class AbstractionReport(BaseModel):
    """The `stats --abstraction` figures."""

    insights: int = Field(description="Insights with a domain, measured.")
    unlabelled: int = Field(description="Active insights without a domain, left out.")
    domains: int
    sampled: int = Field(description="Insights the neighbourhoods were computed on.")
    neighbours: int
    davies_bouldin: float | None = Field(
        description="Standard Davies-Bouldin index: lower = domains more separable."
    )
    mean_lisi: float | None = Field(description="Higher = domains more mixed.")
    mean_specificity: float | None
    most_specific: list[SpecificInsight] = Field(default_factory=list)
    note: str | None = None


def davies_bouldin(vectors: Matrix, labels: Sequence[str]) -> float:
    """The Davies-Bouldin index (Euclidean distances, as in the usual definition)."""
    names = sorted(set(labels))
    if len(names) < 2:
        raise ValueError("the Davies-Bouldin index needs at least two domains")
    codes = np.array([names.index(label) for label in labels])
    centroids = np.stack([vectors[codes == c].mean(axis=0) for c in range(len(names))])
    spread = np.array(
        [
            np.linalg.norm(vectors[codes == c] - centroids[c], axis=1).mean()
            for c in range(len(names))
        ]
    )
    gaps = np.linalg.norm(centroids[:, None, :] - centroids[None, :, :], axis=2)
    np.fill_diagonal(gaps, np.inf)
    ratios = (spread[:, None] + spread[None, :]) / np.maximum(gaps, 1e-12)
    return float(ratios.max(axis=1).mean())


def neighbour_labels(
    vectors: Matrix, codes: npt.NDArray[np.int64], k: int
) -> npt.NDArray[np.int64]:
    """The label codes of each row's k nearest other rows by cosine (rows are unit-norm)."""
    result = np.empty((len(vectors), k), dtype=np.int64)
    for start in range(0, len(vectors), BLOCK):
        block = vectors[start : start + BLOCK] @ vectors.T
        rows = np.arange(len(block))
        block[rows, rows + start] = -np.inf  # not its own neighbour
        nearest = np.argpartition(-block, k - 1, axis=1)[:, :k]
        result[start : start + len(block)] = codes[nearest]
    return result


def lisi(vectors: Matrix, labels: Sequence[str], k: int = NEIGHBOURS) -> npt.NDArray[np.float64]:
    """Per row, the inverse Simpson index of the labels among its k nearest neighbours."""
    names = sorted(set(labels))
    codes = np.array([names.index(label) for label in labels], dtype=np.int64)
    k = min(k, len(vectors) - 1)
    if k < 1:
        raise ValueError("LISI needs at least two insights")
    near = neighbour_labels(vectors, codes, k)
    shares = np.stack([(near == c).mean(axis=1) for c in range(len(names))], axis=1)
    result: npt.NDArray[np.float64] = 1.0 / (shares**2).sum(axis=1)
    return result


def specificity(
    vectors: Matrix, labels: Sequence[str], k: int = NEIGHBOURS
) -> npt.NDArray[np.float64]:
    """Per row: (own-domain share of its neighbours - chance share) / (1 - chance share)."""
    names = sorted(set(labels))
    codes = np.array([names.index(label) for label in labels], dtype=np.int64)
    k = min(k, len(vectors) - 1)
    near = neighbour_labels(vectors, codes, k)
    own = (near == codes[:, None]).mean(axis=1)
    sizes = np.bincount(codes)
    chance = (sizes[codes] - 1) / (len(codes) - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        lift = np.where(chance < 1, (own - chance) / (1 - chance), 0.0)
    result: npt.NDArray[np.float64] = np.clip(lift, 0.0, 1.0)
    return result


def measure(
    vectors: Matrix,
    domains: Sequence[str | None],
    ids: Sequence[str] | None = None,
    titles: Sequence[str] | None = None,
    k: int | None = None,
    max_points: int = MAX_POINTS,
    top: int = 10,
) -> AbstractionReport:
    """DBI, mean LISI and specificity of labelled `vectors` (unit-norm rows).

    `k` defaults to the median domain size, at least 3 and at most 30.
    """
    ids = list(ids) if ids is not None else [str(n) for n in range(len(vectors))]
    titles = list(titles) if titles is not None else ids
    keep = [n for n, d in enumerate(domains) if d]
    labels = [str(domains[n]) for n in keep]
    counts = Counter(labels)
    report = AbstractionReport(
        insights=len(keep),
        unlabelled=len(domains) - len(keep),
        domains=len(counts),
        sampled=0,
        neighbours=0,
        davies_bouldin=None,
        mean_lisi=None,
        mean_specificity=None,
    )
    if len(counts) < 2 or len(keep) < 3:
        report.note = "needs at least two domains and three insights with a domain"
        return report
    matrix = vectors[keep]
    report.davies_bouldin = round(davies_bouldin(matrix, labels), 3)
    sample = np.arange(len(keep))
    if len(keep) > max_points:
        sample = np.sort(np.random.default_rng(0).choice(len(keep), max_points, replace=False))
    sub = matrix[sample]
    sub_labels = [labels[n] for n in sample]
    if k is None:
        k = int(min(NEIGHBOURS, max(3, np.median(list(Counter(sub_labels).values())))))
    report.sampled = len(sample)
    report.neighbours = min(k, len(sample) - 1)
    report.mean_lisi = round(float(lisi(sub, sub_labels, k).mean()), 3)
    spec = specificity(sub, sub_labels, k)
    report.mean_specificity = round(float(spec.mean()), 3)
    for n in np.argsort(-spec, kind="stable")[:top]:
        row = keep[int(sample[n])]
        report.most_specific.append(
            SpecificInsight(
                id=ids[row],
                title=titles[row],
                domain=str(domains[row]),
                specificity=round(float(spec[n]), 3),
            )
        )
    return report


def memory_abstraction(memory: Memory, k: int | None = None) -> AbstractionReport:
    """The measures over a memory's active insights."""
    labelled = memory.vectors()
    return measure(
        labelled.vectors,
        labelled.column("domain"),
        labelled.column("id"),
        labelled.column("title"),
        k=k,
    )
