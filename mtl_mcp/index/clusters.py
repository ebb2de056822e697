"""Paraphrases among insight vectors, as clusters: the maths of consolidation, no I/O.

`close_pairs` finds every pair of rows at or above a cosine similarity, in blocks (bounded
memory: BLOCK rows against all at a time). `paraphrase_clusters` joins them by centroid
linkage: pairs are taken from the most similar down, and two clusters join only when their
centroids (the normalized sums of their members) are at least `threshold` apart in cosine,
and no pair `apart` says they must stay separate (a contradiction, a superseded lesson).
Centroid linkage rather than single linkage: a chain of paraphrases, each close to the
next, cannot creep from one lesson into a neighbouring one, since every member must sit
near the cluster's centre. Rows left alone then join the nearest centroid if close enough.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import numpy as np
import numpy.typing as npt

BLOCK = 1024

Pairs = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float32]]


def close_pairs(vectors: npt.NDArray[np.float32], floor: float, block: int = BLOCK) -> Pairs:
    """Every pair (i < j) of unit-norm rows whose cosine similarity is at least `floor`:
    (rows, columns, similarities)."""
    rows: list[npt.NDArray[np.int64]] = []
    cols: list[npt.NDArray[np.int64]] = []
    sims: list[npt.NDArray[np.float32]] = []
    for start in range(0, len(vectors), block):
        part = vectors[start : start + block] @ vectors[start:].T
        # Only pairs to the right of the diagonal: each pair once, no row with itself.
        part[np.tril_indices(len(part), 0, part.shape[1])] = -np.inf
        i, j = np.nonzero(part >= floor)
        rows.append(i.astype(np.int64) + start)
        cols.append(j.astype(np.int64) + start)
        sims.append(part[i, j].astype(np.float32))
    if not rows:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0, dtype=np.float32)
    return np.concatenate(rows), np.concatenate(cols), np.concatenate(sims)


def paraphrase_clusters(
    vectors: npt.NDArray[np.float32],
    pairs: Pairs,
    threshold: float,
    *,
    floor: float,
    attach_at: float,
    apart: Collection[tuple[int, int]] = (),
    seeds: Mapping[int, npt.NDArray[np.float32]] | None = None,
) -> list[list[int]]:
    """Groups of two or more rows that say one thing (see the module docstring), each
    sorted, the largest group first.

    Pairs at `floor` or more are taken from the most similar down; two clusters join when
    their centroids are at `threshold` or more. Then a row left alone joins the cluster
    whose centroid it is closest to, if that is at `attach_at` or more (a cluster's
    centroid is a steadier estimate of its lesson than any one wording). `apart` holds
    pairs (i < j) never to be joined. `seeds` gives some rows a centroid of their own: the
    sum of the wordings they already stand for (a kept insight and those merged into it).
    """
    rows, cols, sims = pairs
    parent = list(range(len(vectors)))
    members: dict[int, list[int]] = {}
    sums: dict[int, npt.NDArray[np.float64]] = {
        row: np.asarray(total, dtype=np.float64) for row, total in (seeds or {}).items()
    }
    blocked = set(apart)

    def root(node: int) -> int:
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    def separate(group_a: list[int], group_b: list[int]) -> bool:
        return bool(blocked) and any(
            (min(x, y), max(x, y)) in blocked for x in group_a for y in group_b
        )

    for k in np.argsort(-sims, kind="stable"):
        if sims[k] < floor:
            break
        a, b = root(int(rows[k])), root(int(cols[k]))
        if a == b:
            continue
        group_a, group_b = members.get(a, [a]), members.get(b, [b])
        sum_a = sums.get(a, vectors[a].astype(np.float64))
        sum_b = sums.get(b, vectors[b].astype(np.float64))
        if _cosine(sum_a, sum_b) < threshold or separate(group_a, group_b):
            continue
        if len(group_a) < len(group_b):
            a, b, group_a, group_b, sum_a, sum_b = b, a, group_b, group_a, sum_b, sum_a
        parent[b] = a
        members[a] = group_a + group_b
        sums[a] = sum_a + sum_b
        members.pop(b, None)
        sums.pop(b, None)
    # A row standing for merged wordings is a cluster already, of one active row.
    roots = sorted({root(n) for n in members} | {n for n in sums if root(n) == n})
    if roots:
        centres = np.asarray([sums.get(n, vectors[n]) for n in roots], dtype=np.float64)
        centres /= np.linalg.norm(centres, axis=1, keepdims=True)
        alone = [n for n in range(len(vectors)) if root(n) == n and n not in members]
        for n in alone:
            if n in sums:  # clusters join at `threshold` only
                continue
            closeness = centres @ vectors[n]
            best = int(np.argmax(closeness))
            home = roots[best]
            group = members.get(home, [home])
            if closeness[best] >= attach_at and not separate(group, [n]):
                members[home] = [*group, n]
                parent[n] = home
    groups = [sorted(group) for node, group in members.items() if parent[node] == node]
    return sorted(groups, key=lambda g: (-len(g), g[0]))


def _cosine(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> float:
    return float(a @ b) / float(np.linalg.norm(a) * np.linalg.norm(b))


def centrality(vectors: npt.NDArray[np.float32], group: list[int]) -> npt.NDArray[np.float32]:
    """Each member's mean cosine similarity to the others of its group: the highest is the
    medoid, the wording closest to all the others."""
    block = vectors[group]
    sims = block @ block.T
    result: npt.NDArray[np.float32] = (sims.sum(axis=1) - 1.0) / max(len(group) - 1, 1)
    return result
