"""The relevance gate's search: signals and rules tried beyond the shipped gate, and how far
any gate over them could go on the test split.

    python bench/gate_search.py   # writes bench-results/gate_search.json

Every query's top 3 (leave-one-domain-out, the default method) is labelled, as in
`bench/relevance_floor.py`. Each family below is a set of signals; for each, on the dev
split only, out-of-fold by domain (each dev domain scored by a fit without it):

- the L2 penalty with the lowest log loss (`gate_fit.L2_GRID`);
- both rules for a plan's notes: every note that reaches the threshold, or the most probable
  one only (the hook's rule, `index.gate.UNASKED_PER_PLAN`); the one whose chosen dev point
  is more precise (then: more plans covered) is the family's;
- the threshold, as `--fit` chooses it (`gate_fit.choose_threshold`).

The test split is then scored once per family, by a fit on all of dev. `ceiling` fits each
family on the test split itself (in-sample, at every penalty of the grid): the best
precision any of those fits gives there at any threshold with half of the plans covered.
No gate chosen without the test labels can be expected to do better; it says whether the
target is within the signals' reach, not what ships.

The extra signals, each measured against the query's candidates (every insight the recall
considered), as the shipped ones are:

- `rare terms`: the summed idf of the plan's words that occur in the insight, counting only
  words rare in the candidates (idf >= 3.0, about 1 in 20 insights or fewer); `rare count`,
  log(1 + how many words of idf >= 2.5 it shares);
- `failure`: the insight is a mistake to avoid (polarity);
- `sentence z`: the mean over the plan's sentences of the insight's cosine to that sentence,
  in standard deviations above the candidates' (the plan is split as for the query vector);
- `title z`: the same for the cosine of the plan to the insight's title alone;
- `category`: the cosine of the plan to the prototype of the insight's category
  (`index.categories`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from mtl_mcp.index.bm25 import query_terms, tokens
from mtl_mcp.index.categories import category_prototypes
from mtl_mcp.index.methods import plan_sentences, plan_vector
from mtl_mcp.quality.evaluation import (
    EvalStore,
    load_pool,
    load_queries,
    shipped_set,
    throwaway_store,
)
from mtl_mcp.quality.gate_fit import (
    L2_GRID,
    MIN_COVERAGE,
    Labelled,
    choose_threshold,
    curve,
    figures,
    fit_logistic,
    gate_keeps,
    labelled_hits,
    log_loss,
    out_of_fold,
)

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench-results" / "gate_search.json"

Extra = dict[str, float]


def extras(evalset: EvalStore, hits: Sequence[Labelled]) -> list[Extra]:
    """The extra signals of every labelled hit, aligned with `hits`."""
    memory = evalset.memory
    snapshot = memory._snapshot()
    rows = snapshot.rows
    domains = np.array(rows.column("domain").to_pylist(), dtype=object)
    titles = rows.column("title").to_pylist()
    categories = rows.column("category").to_pylist()
    failure = [p == "failure" for p in rows.column("polarity").to_pylist()]
    texts = zip(
        titles,
        rows.column("description").to_pylist(),
        rows.column("content").to_pylist(),
        strict=True,
    )
    words = [set(tokens(" ".join(parts))) for parts in texts]
    title_vectors = memory.embedder.embed_documents(titles)
    prototypes = category_prototypes(memory.embedder)
    queries = {q.id: q for q in load_queries(shipped_set()[1], evalset.pool)}
    found: list[Extra] = []
    cache: dict[str, Any] = {}
    for hit in hits:
        query = queries[hit.query]
        if query.id not in cache:
            candidates = np.flatnonzero((domains != query.domain) & snapshot.active)
            sentences = memory.embedder.embed_documents(plan_sentences(query.plan))
            vector = plan_vector(memory.embedder, query.plan, split=True)
            by_sentence = sentences @ snapshot.vectors[candidates].T
            to_titles = title_vectors[candidates] @ vector
            held = {t: sum(t in words[i] for i in candidates) for t in query_terms(query.plan)}
            idf = {t: math.log1p((len(candidates) - d + 0.5) / (d + 0.5)) for t, d in held.items()}
            cache[query.id] = (
                sentences,
                by_sentence,
                vector,
                to_titles,
                idf,
                prototypes.matrix @ vector,
            )
        sentences, by_sentence, vector, to_titles, idf, to_prototypes = cache[query.id]
        row = snapshot.positions[hit.parts["id"]]
        shared = [idf[t] for t in idf if t in words[row]]
        z = (sentences @ snapshot.vectors[row] - by_sentence.mean(1)) / by_sentence.std(1)
        category = categories[row]
        found.append(
            {
                "rare terms": sum(w for w in shared if w >= 3.0),
                "rare count": math.log1p(sum(w >= 2.5 for w in shared)),
                "failure": float(failure[row]),
                "sentence z": float(z.mean()),
                "title z": float(
                    (title_vectors[row] @ vector - to_titles.mean()) / to_titles.std()
                ),
                "category": float(to_prototypes[prototypes.categories.index(category)])
                if category in prototypes.categories
                else 0.0,
            }
        )
    return found


SHIPPED = ("similarity_z", "keyword")
FAMILIES: dict[str, tuple[str, ...]] = {
    "the shipped signals": SHIPPED,
    "+ sentence z": (*SHIPPED, "sentence z"),
    "+ title z": (*SHIPPED, "title z"),
    "+ category": (*SHIPPED, "category"),
    "+ failure": (*SHIPPED, "failure"),
    "+ rare count": (*SHIPPED, "rare count"),
    "similarity_z + rare terms": ("similarity_z", "rare terms"),
    "similarity_z + rare terms + failure": ("similarity_z", "rare terms", "failure"),
    "everything": (*SHIPPED, "rare count", "failure", "sentence z", "category", "title z"),
}


def with_signals(
    hits: Sequence[Labelled], more: Sequence[Extra], names: Sequence[str]
) -> list[Labelled]:
    def value(hit: Labelled, extra: Extra, name: str) -> float:
        return hit.signals[SHIPPED.index(name)] if name in SHIPPED else extra[name]

    return [
        replace(h, signals=tuple(value(h, e, n) for n in names))
        for h, e in zip(hits, more, strict=True)
    ]


def _auc(chances: Any, hits: Sequence[Labelled]) -> float:
    good = np.array([h.relevant for h in hits])
    wins = chances[good][:, None] > chances[~good][None, :]
    ties = chances[good][:, None] == chances[~good][None, :]
    return round(float((wins + 0.5 * ties).mean()), 3)


def _design(hits: Sequence[Labelled]) -> tuple[Any, Any]:
    return (
        np.array([h.signals for h in hits], dtype=np.float64),
        np.array([h.relevant for h in hits], dtype=np.float64),
    )


def _at(points: Sequence[dict[str, float]], min_p: float) -> dict[str, float]:
    return next(p for p in points if p["min_p"] == min_p)


def family(hits: Sequence[Labelled]) -> dict[str, Any]:
    """One family, chosen on dev (out-of-fold), scored on test once; and its ceiling."""
    dev = [h for h in hits if h.split == "dev"]
    test = [h for h in hits if h.split == "test"]
    _, y = _design(dev)
    loss, l2 = min((log_loss(out_of_fold(dev, c), y), c) for c in L2_GRID)
    chances = out_of_fold(dev, l2)
    rules: dict[str, Any] = {}
    for rule, per_plan in (("every note", False), ("one note a plan", True)):
        points = curve(dev, chances, per_plan)
        min_p = choose_threshold(points)
        rules[rule] = {"min_p": min_p, "per_plan": per_plan, "dev": _at(points, min_p)}
    rule = max(
        rules, key=lambda r: (rules[r]["dev"]["precision"], rules[r]["dev"]["plans_with_a_note"])
    )
    chosen = rules[rule]
    x, y = _design(dev)
    tx, ty = _design(test)
    test_chances = fit_logistic(x, y, l2).probabilities(tx)
    best: dict[str, Any] = {}
    ceiling_auc = 0.0
    for penalty in L2_GRID:  # the most generous: every penalty, every threshold
        ceiling = fit_logistic(tx, ty, penalty).probabilities(tx)
        ceiling_auc = max(ceiling_auc, _auc(ceiling, test))
        for name, per_plan in (("every note", False), ("one note a plan", True)):
            for min_p in sorted(set(ceiling.tolist())):
                found = figures(test, gate_keeps(test, ceiling, min_p, per_plan))
                if found["plans_with_a_note"] < MIN_COVERAGE:
                    continue
                if name not in best or found["precision"] > best[name]["precision"]:
                    best[name] = {**found, "l2": penalty}
    return {
        "dev_log_loss": round(loss, 4),
        "l2": l2,
        "dev_auc": _auc(chances, dev),
        "rules_on_dev": rules,
        "chosen_rule": rule,
        "min_p": chosen["min_p"],
        "dev": chosen["dev"],
        "test": _at(curve(test, test_chances, chosen["per_plan"]), chosen["min_p"]),
        "test_auc": _auc(test_chances, test),
        "ceiling_on_test": {"auc": round(ceiling_auc, 3), "best_with_half_the_plans": best},
    }


def main() -> None:
    pool_path, queries_path = shipped_set()
    pool = load_pool(pool_path)
    queries = load_queries(queries_path, pool)
    with throwaway_store(pool) as evalset:
        hits = labelled_hits(evalset, queries)
        more = extras(evalset, hits)
    result: dict[str, Any] = {"families": {}}
    for name, signals in FAMILIES.items():
        found = family(with_signals(hits, more, signals))
        result["families"][name] = {"signals": list(signals), **found}
        print(
            f"{name:40}",
            {k: found[k] for k in ("dev_log_loss", "chosen_rule", "min_p", "dev", "test")},
        )
    test = [h for h in hits if h.split == "test"]
    by_query: dict[str, list[Labelled]] = {}
    for hit in test:
        by_query.setdefault(hit.query, []).append(hit)
    result["test_plans"] = {
        "plans": len(by_query),
        "with_a_relevant_top_3_note": sum(any(h.relevant for h in v) for v in by_query.values()),
        "rank_1_relevant": sum(h.relevant for h in test if h.rank == 1),
    }
    OUT.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
