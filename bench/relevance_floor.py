"""The relevance floor of plan-triggered recall, measured on the shipped evaluation set.

A hook puts notes in front of the model without being asked, so a note must be likely to
help: every top-3 hit of every query (leave-one-domain-out, the default method) is labelled
relevant or not, and each candidate floor is scored by the precision of the notes it keeps,
the share of relevant top-3 notes it keeps, and the share of plans that still get a note.
The floor is chosen on the dev split and reported on the test split.

    python bench/relevance_floor.py            # writes bench-results/relevance_floor.json
"""

from __future__ import annotations

import json
from pathlib import Path

from mtl_mcp.quality.evaluation import load_pool, load_queries, shipped_set, throwaway_store

ROOT = Path(__file__).resolve().parent.parent
FLOORS = [round(0.20 + 0.025 * n, 3) for n in range(13)]  # 0.20 .. 0.50


def labelled_hits(split: str) -> list[list[tuple[float, bool]]]:
    """Per query of `split`: its top-3 hits as (score, relevant)."""
    pool_path, queries_path = shipped_set()
    pool = load_pool(pool_path)
    queries = [q for q in load_queries(queries_path, pool) if q.split == split]
    with throwaway_store(pool) as evalset:
        found = []
        for query in queries:
            relevant = {evalset.store_ids[r] for r in query.relevant if r in evalset.store_ids}
            hits = evalset.memory.recall(query.plan, k=3, exclude_domains=[query.domain])
            found.append([(hit.score, hit.id in relevant) for hit in hits])
        return found


def figures(queries: list[list[tuple[float, bool]]], floor: float) -> dict[str, float]:
    kept = [[(s, r) for s, r in hits if s >= floor] for hits in queries]
    notes = [r for hits in kept for _, r in hits]
    relevant = sum(r for hits in queries for _, r in hits)
    precision = sum(notes) / len(notes) if notes else 0.0
    recall = sum(notes) / relevant if relevant else 0.0
    return {
        "floor": floor,
        "precision": round(precision, 3),
        "relevant_kept": round(recall, 3),
        "f1": round(2 * precision * recall / (precision + recall), 3) if notes else 0.0,
        "plans_with_a_note": round(sum(bool(h) for h in kept) / len(kept), 3),
        "notes_per_plan": round(len(notes) / len(kept), 2),
    }


def main() -> None:
    result = {}
    for split in ("dev", "test"):
        hits = labelled_hits(split)
        result[split] = [figures(hits, floor) for floor in FLOORS]
    best = max(result["dev"], key=lambda row: row["f1"])
    result["chosen"] = {
        "floor": best["floor"],
        "why": "the highest F1 of precision and relevant notes kept, on the dev split",
        "test": next(row for row in result["test"] if row["floor"] == best["floor"]),
    }
    out = ROOT / "bench-results" / "relevance_floor.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    for split in ("dev", "test"):
        print(split)
        for row in result[split]:
            print("  ", row)
    print("chosen", result["chosen"])


if __name__ == "__main__":
    main()
