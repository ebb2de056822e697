"""What one consolidation pass would change, decided over a snapshot: a pure function.

1. **Paraphrases** (`index.clusters`): active insights whose centroids sit at cosine
   MERGE_AT or more are one lesson. The one kept is the best wording: the highest
   abstraction score (the lint's), then the most support, then the most representative
   (the highest mean similarity to the others: the medoid), then the shortest.
2. **Opposite advice and superseded flags** (`text.cues`), checked on every pair at
   CHECK_AT or more: such a pair is never merged. A superseded lesson is retired in favour
   of the one that says its flag changed; a contradiction is flagged for the user, once,
   and never resolved here.
3. **Unused**: a lesson no session recalled for a plan, found helpful or distilled again
   (support + 1) for `retire_days` days is retired. The starter pack is exempt: it is what
   a new memory holds before it has learnt anything, and was chosen by hand; it retires
   by ratings and session verdicts like the rest.
4. **Learnt again after it was condemned**: a wording of a lesson that session verdicts,
   harmful ratings or a person retired (`condemned`) is retired too, with the reason: a
   distiller that keeps writing a wrong lesson must not bring it back through a paraphrase
   (one user found 668 copies of one hallucination). A wording joins a condemned lesson as
   it would join a cluster (its centroid at MERGE_AT, a lone wording at ATTACH_AT), unless
   the two give opposite advice: "Commit the lock file" stays when "Do not commit the lock
   file" was condemned.

The constants were chosen on the simulated year (bench/year.py, docs/memory-health.md):
at 0.78 every paraphrase cluster of the year held one lesson only, and every planted
contradiction and superseded flag was caught with no false flag.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from mtl_mcp.index.clusters import centrality, close_pairs, paraphrase_clusters
from mtl_mcp.memory.core import HAND_NOTE, REINSTATED_NOTE, VERDICTS_NOTE
from mtl_mcp.storage.snapshot import Snapshot
from mtl_mcp.text.cues import Lesson, conflict

MERGE_AT = 0.78  # centroid cosine at which two clusters of wordings are one lesson
ATTACH_AT = 0.72  # ... and at which a wording left alone joins the nearest cluster
CHECK_AT = 0.62  # pairs this close are checked for opposite advice (0.65 left a planted
# contradiction of the small year, at 0.647 under the int8-r2 runtime, unchecked)
STARTER_PROJECT = "starter"
_STATUS_NOTES = (VERDICTS_NOTE, HAND_NOTE, REINSTATED_NOTE, "consolidation ")
COLUMNS = (
    "id",
    "title",
    "description",
    "content",
    "project",
    "support",
    "abstraction_score",
    "created_at",
    "updated_at",
)


@dataclass
class Merge:
    kept: str
    members: list[str]
    why: str


@dataclass
class Plan:
    """The changes of one pass, by insight id."""

    merges: list[Merge] = field(default_factory=list)
    superseded: list[tuple[str, str, str]] = field(default_factory=list)  # old, new, why
    retired: list[tuple[str, str]] = field(default_factory=list)  # id, why
    conflicts: list[tuple[str, str, str]] = field(default_factory=list)  # a, b, why
    titles: dict[str, str] = field(default_factory=dict)
    more: bool = False  # merges were left for the next pass

    def __bool__(self) -> bool:
        return bool(self.merges or self.superseded or self.retired or self.conflicts)


def plan(
    snapshot: Snapshot,
    *,
    now: datetime,
    last_used: Mapping[str, datetime],
    retire_days: int,
    flagged: Collection[frozenset[str]] = (),
    absorbed: Mapping[str, Sequence[str]] | None = None,
    condemned: Mapping[str, str] | None = None,
    limit: int | None = None,
) -> Plan:
    """The pass's changes (see the module docstring). `flagged`: conflicts flagged by
    earlier runs; `absorbed`: the insights earlier runs merged into each kept one (its
    cluster's centroid counts them: a new wording joins the lesson, not one wording of
    it); `condemned`: retired insights whose wordings are retired with them, and why
    (`condemned_in`); `limit`: at most this many merges (the largest clusters first)."""
    positions = np.flatnonzero(snapshot.active)
    result = Plan()
    if not len(positions):
        return result
    rows: list[dict[str, Any]] = snapshot.records([int(p) for p in positions], COLUMNS)
    vectors = snapshot.vectors[positions]
    lessons = [Lesson(r["title"], f"{r['title']}. {r['description']} {r['content']}") for r in rows]
    pairs = close_pairs(vectors, CHECK_AT)
    apart: set[tuple[int, int]] = set()
    relations: list[tuple[str, int, int, str]] = []  # (kind, i, j, why): i supersedes j...
    for i, j in zip(pairs[0].tolist(), pairs[1].tolist(), strict=True):
        found = conflict(lessons[i], lessons[j])
        if found is None:
            continue
        apart.add((i, j))
        kind, why = found
        if kind == "superseded":
            kind, i, j = "supersedes", j, i
        relations.append((kind, i, j, why))
    seeds = {}
    for n, row in enumerate(rows):
        absorbed_ids = (absorbed or {}).get(row["id"], ())
        known = [snapshot.positions[m] for m in absorbed_ids if m in snapshot.positions]
        if known:
            seeds[n] = vectors[n] + snapshot.vectors[known].sum(axis=0)
    groups = paraphrase_clusters(
        vectors, pairs, MERGE_AT, floor=CHECK_AT, attach_at=ATTACH_AT, apart=apart, seeds=seeds
    )
    if limit is not None and len(groups) > limit:
        groups, result.more = groups[:limit], True
    unit = list(range(len(rows)))  # each row's representative after the merges
    members_of: dict[int, list[int]] = {}
    for group in groups:
        kept = _best(rows, vectors, group)
        others = [n for n in group if n != kept]
        for n in group:
            unit[n] = kept
        members_of[kept] = others
        sims = vectors[others] @ vectors[kept]
        result.merges.append(
            Merge(
                rows[kept]["id"],
                [rows[n]["id"] for n in others],
                f"{len(group)} wordings of one lesson (similarity {float(sims.min()):.2f}-"
                f"{float(sims.max()):.2f} to the one kept, the best of them: the most abstract, "
                "supported and representative)",
            )
        )
    superseded: set[int] = set()
    seen: set[frozenset[int]] = set()
    for kind, i, j, why in relations:
        a, b = unit[i], unit[j]
        if a == b or frozenset((a, b)) in seen:
            continue
        seen.add(frozenset((a, b)))
        if kind == "supersedes":
            if b not in superseded:
                superseded.add(b)
                result.superseded.append((rows[b]["id"], rows[a]["id"], why))
        elif frozenset((rows[a]["id"], rows[b]["id"])) not in flagged:
            result.conflicts.append((rows[a]["id"], rows[b]["id"], why))
    gone = set(superseded)
    for n, why in _condemned_wordings(
        snapshot, rows, vectors, lessons, members_of, seeds, superseded, absorbed, condemned
    ):
        gone.add(n)
        result.retired.append((rows[n]["id"], why))
    result.conflicts = [
        c for c in result.conflicts if not {c[0], c[1]} & {rows[n]["id"] for n in gone}
    ]
    if retire_days > 0:
        cutoff = now - timedelta(days=retire_days)
        for n in sorted(set(unit)):
            if n in gone or rows[n]["project"] == STARTER_PROJECT:
                continue
            last = max(_last_use(rows[m], last_used) for m in [n, *members_of.get(n, [])])
            if last < cutoff:
                result.retired.append(
                    (
                        rows[n]["id"],
                        f"no session recalled it for a plan, found it helpful or learnt it "
                        f"again in {retire_days} days (last on {last:%Y-%m-%d})",
                    )
                )
    named = {rows[n]["id"] for n in range(len(rows)) if unit[n] != n or n in members_of} | {
        i for pair in result.superseded for i in pair[:2]
    }
    named |= {i for c in result.conflicts for i in c[:2]} | {i for i, _ in result.retired}
    result.titles = {r["id"]: r["title"] for r in rows if r["id"] in named}
    return result


def _positions(snapshot: Snapshot, ids: Collection[str]) -> list[int]:
    return [snapshot.positions[i] for i in ids if i in snapshot.positions]


def _condemned_wordings(
    snapshot: Snapshot,
    rows: list[dict[str, Any]],
    vectors: Any,
    lessons: list[Lesson],
    members_of: Mapping[int, list[int]],
    seeds: Mapping[int, Any],
    superseded: Collection[int],
    absorbed: Mapping[str, Sequence[str]] | None,
    condemned: Mapping[str, str] | None,
) -> list[tuple[int, str]]:
    """The lessons after the merges (by their kept row) that are wordings of a condemned
    one (see the module docstring), each with why."""
    condemned = condemned or {}
    known = [i for i in condemned if i in snapshot.positions]
    if not known:
        return []
    texts = snapshot.records(_positions(snapshot, known), ["title", "description", "content"])
    judged = [Lesson(r["title"], f"{r['title']}. {r['description']} {r['content']}") for r in texts]
    centres = np.asarray(
        [
            snapshot.vectors[_positions(snapshot, [i, *(absorbed or {}).get(i, ())])].sum(axis=0)
            for i in known
        ],
        dtype=np.float64,
    )
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    found = []
    for n in sorted({n for n in range(len(rows)) if n not in superseded} - _merged(members_of)):
        members = members_of.get(n, [])
        centre = np.asarray(seeds.get(n, vectors[n]), dtype=np.float64)
        centre = centre + vectors[members].sum(axis=0) if members else centre
        lone = not members and n not in seeds
        closeness = centres @ (centre / np.linalg.norm(centre))
        for k in np.argsort(-closeness):
            if closeness[k] < (ATTACH_AT if lone else MERGE_AT):
                break
            if conflict(lessons[n], judged[k]) is None:
                title = texts[k]["title"]
                why = f"a wording of {known[k]} ({title!r}), which {condemned[known[k]]}"
                found.append((n, why[:400]))
                break
    return found


def _merged(members_of: Mapping[int, list[int]]) -> set[int]:
    return {m for members in members_of.values() for m in members}


def condemned_in(snapshot: Snapshot, retire_after_harmful: int) -> dict[str, str]:
    """The retired insights whose wordings are retired with them, and why: retired by
    session verdicts, by harmful ratings or by hand, and not brought back since. An
    insight consolidation retired (merged, superseded, unused) condemns nothing: a new
    wording of an unused lesson is a new use of it."""
    retired = [int(n) for n in np.flatnonzero(~snapshot.active)]
    found: dict[str, str] = {}
    for row in snapshot.records(retired, ["id", "status", "notes", "helpful", "harmful"]):
        if row["status"] != "retired":
            continue
        last = next((n for n in reversed(row["notes"] or []) if n.startswith(_STATUS_NOTES)), "")
        if last.startswith(VERDICTS_NOTE):
            found[row["id"]] = f"session verdicts retired ({last[len(VERDICTS_NOTE) :]})"
        elif last.startswith(HAND_NOTE):
            found[row["id"]] = f"was retired by hand ({last[len(HAND_NOTE) :]})"
        elif not last and _rated_out(row, retire_after_harmful):
            found[row["id"]] = (
                f"ratings retired (harmful {row['harmful']}, helpful {row['helpful']})"
            )
    return found


def _best(rows: list[dict[str, Any]], vectors: Any, group: list[int]) -> int:
    """The member whose wording is kept: most abstract, most supported, most central,
    shortest."""
    central = centrality(vectors, group)

    def key(k: int) -> tuple[float, int, float, int]:
        row = rows[group[k]]
        score = round(float(row["abstraction_score"] or 0.0), 2)
        text = len(row["title"]) + len(row["description"]) + len(row["content"])
        return score, int(row["support"] or 1), round(float(central[k]), 4), -text

    return group[max(range(len(group)), key=key)]


def _last_use(row: dict[str, Any], last_used: Mapping[str, datetime]) -> datetime:
    """When a session last used or confirmed an insight: its creation, its last update (a
    merge of a new distillation, a rating), its last recall for a plan or helped verdict."""
    times = [t for t in (row["created_at"], row["updated_at"], last_used.get(row["id"])) if t]
    return max(times)


def absorbed_by(runs: Sequence[tuple[Any, Any]]) -> dict[str, list[str]]:
    """The insights merged into each kept one by `runs` (ConsolidationRun, undo; newest
    first) not undone, through later runs that merged a kept one into another."""
    into: dict[str, str] = {}
    for run, _ in reversed(runs):  # oldest first
        if run.undone_at is None:
            for kept, members in run.merged:
                into.update(dict.fromkeys(members, kept))
    found: dict[str, list[str]] = {}
    for member in into:
        kept, hops = into[member], 0
        while kept in into and hops < len(into):  # merged on, into a later kept one
            kept, hops = into[kept], hops + 1
        found.setdefault(kept, []).append(member)
    return found


def flagged_by(runs: Sequence[tuple[Any, Any]]) -> set[frozenset[str]]:
    """The conflicts `runs` not undone flagged: never flagged twice."""
    return {frozenset(pair) for run, _ in runs if run.undone_at is None for pair in run.conflicts}


def _rated_out(row: dict[str, Any], retire_after_harmful: int) -> bool:
    """Whether ratings retired an insight (`Curation.rate`'s rule)."""
    harmful, helpful = int(row["harmful"] or 0), int(row["helpful"] or 0)
    return harmful >= max(retire_after_harmful, 1) and harmful > 2 * helpful
