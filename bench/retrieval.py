"""Retrieval quality for the README: every recall method and every idea tried, dev and test.

    python bench/retrieval.py [--out bench-results/retrieval.json] [--no-latency]

1. The methods of `mtl_mcp.index.methods.METHODS`, each through `Memory.recall` on the
   shipped evaluation set (leave-one-domain-out, plan as the query, k=3), per split; plus
   the raw task text as the query.
2. Ideas tried on top of the default and dropped unless they won on dev: other texts as the
   embedding key (the paper's title key among them), MMR diversity, a category prior, a
   penalty for domain-specific vocabulary the plan lacks, an embedding-specificity penalty,
   CSLS hubness correction, stemming for BM25, and the full-plan embedding as a third
   ranking. These re-rank from the same throwaway store's snapshot and the same BM25 index.
3. The rating signal: ratings the assistant would leave on the dev queries' results
   (helpful if labelled relevant; in a second run also harmful if not), through
   `Memory.rate`, then the test split recalled again.
4. A paired bootstrap (10,000 resamples over queries) of P@3, default against dense.
5. In-process recall latency at 10,000 insights, dense against the default, for one-sentence
   plans and for the evaluation set's 3-4 sentence plans.

Prints the Markdown tables the README shows and writes the figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the CLI does: see bench/benchmark.py

import numpy as np
import pyarrow as pa

from mtl_mcp import Memory
from mtl_mcp.config import load_settings
from mtl_mcp.index.bm25 import Bm25Index, tokens
from mtl_mcp.index.categories import category_prototypes
from mtl_mcp.index.fusion import rankings_of, rrf_scores
from mtl_mcp.index.methods import METHODS, plan_vector
from mtl_mcp.quality.evaluation import (
    EvalQuery,
    EvalResult,
    EvalStore,
    Ranker,
    load_pool,
    load_queries,
    recall_ranker,
    score_ranker,
    shipped_set,
    throwaway_store,
)

ROOT = Path(__file__).resolve().parent.parent
SPLITS = ("dev", "test", "all")
FIGURES = ("precision_at_k", "hit_at_k", "mrr", "recall_at_10", "ndcg_at_10")
RERANK_DEPTH = 30  # post-processing experiments reorder the fused top 30
# Scores of the (already fused) candidates, for the rows `idx` of the snapshot, best highest.
Scorer = Callable[[str, np.ndarray], np.ndarray]


def figures(result: EvalResult) -> dict[str, float]:
    return {name: getattr(result, name) for name in FIGURES}


class Lab:
    """Re-ranking experiments over one throwaway store's snapshot."""

    def __init__(self, evalset: EvalStore) -> None:
        self.store = evalset.memory
        snapshot = evalset.memory.table.snapshot()
        self.vectors = snapshot.vectors
        self.ids: list[str] = snapshot.rows.column("id").to_pylist()
        self.domains = np.array(snapshot.rows.column("domain").to_pylist(), dtype=object)
        self.categories: list[str] = snapshot.rows.column("category").to_pylist()
        self.texts: list[str] = [
            f"{t}. {d} {c}"
            for t, d, c in zip(
                snapshot.rows.column("title").to_pylist(),
                snapshot.rows.column("description").to_pylist(),
                snapshot.rows.column("content").to_pylist(),
                strict=True,
            )
        ]
        self.titles: list[str] = snapshot.rows.column("title").to_pylist()
        self.descriptions: list[str] = snapshot.rows.column("description").to_pylist()
        self.active = snapshot.active
        self.bm25 = Bm25Index(snapshot.texts())
        self.embedder = evalset.memory.embedder

    def candidates(self, exclude: list[str]) -> np.ndarray:
        mask = self.active & ~np.isin(self.domains, exclude)
        return np.flatnonzero(mask)

    def dense(self, text: str, idx: np.ndarray, split: bool = True) -> np.ndarray:
        return self.vectors[idx] @ plan_vector(self.embedder, text, split=split)

    def fused(
        self,
        text: str,
        idx: np.ndarray,
        dense: np.ndarray | None = None,
        bm25: Bm25Index | None = None,
        query: str | None = None,
    ) -> np.ndarray:
        """The default's fused scores, optionally with another dense score or BM25 index."""
        d = self.dense(text, idx) if dense is None else dense
        b = (bm25 or self.bm25).scores(query or text)[idx]
        return rrf_scores(len(idx), rankings_of(d, b))

    def ranker(self, scorer: Scorer, rerank: Callable[..., list[int]] | None = None) -> Ranker:
        def rank(text: str, k: int, exclude: list[str]) -> list[str]:
            idx = self.candidates(exclude)
            scores = scorer(text, idx)
            order = list(np.lexsort((np.arange(len(idx)), -scores)))
            if rerank is not None:
                order = rerank(text, idx, scores, order[:RERANK_DEPTH]) + order[RERANK_DEPTH:]
            return [self.ids[idx[i]] for i in order[:k]]

        return rank


def stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def stemmed(text: str) -> str:
    return " ".join(stem(w) for w in tokens(text))


def experiments(lab: Lab, evalset: EvalStore) -> dict[str, Ranker]:
    """Every idea tried on top of the default, as rankers."""
    emb = lab.embedder
    title_vectors = emb.embed_documents(lab.titles)
    td_vectors = emb.embed_documents(
        [f"{t}. {d}" for t, d in zip(lab.titles, lab.descriptions, strict=True)]
    )
    stem_index = Bm25Index(pa.array([stemmed(t) for t in lab.texts]))
    prototypes = category_prototypes(emb)
    item_category = np.array(
        [
            prototypes.categories.index(c) if c in prototypes.categories else -1  # type: ignore[arg-type]
            for c in lab.categories
        ]
    )
    # Domain-specific vocabulary: terms used by 2+ insights, all of one domain.
    term_sets = [set(tokens(t)) for t in lab.texts]
    frequency = Counter(w for terms in term_sets for w in terms)
    domains_of: dict[str, set[str]] = {}
    for terms, domain in zip(term_sets, lab.domains, strict=True):
        for w in terms:
            domains_of.setdefault(w, set()).add(str(domain))
    specific = [
        {w for w in terms if frequency[w] >= 2 and len(domains_of[w]) == 1} for terms in term_sets
    ]
    # Embedding specificity: closeness to the own domain's centroid beyond the global one.
    overall = lab.vectors.mean(axis=0)
    overall /= np.linalg.norm(overall)
    centroid = {}
    for domain in set(lab.domains):
        c = lab.vectors[lab.domains == domain].mean(axis=0)
        centroid[domain] = c / np.linalg.norm(c)
    embed_spec = np.array(
        [v @ centroid[d] - v @ overall for v, d in zip(lab.vectors, lab.domains, strict=True)]
    )
    # CSLS: an insight near many others is a hub; its mean similarity to its 10 nearest.
    similar = lab.vectors @ lab.vectors.T
    np.fill_diagonal(similar, -1)
    hubness = np.sort(similar, axis=1)[:, -10:].mean(axis=1)

    def mmr(weight: float) -> Callable[..., list[int]]:
        def rerank(text: str, idx: np.ndarray, scores: np.ndarray, top: list[int]) -> list[int]:
            values = scores[top]
            spread = (values.max() - values.min()) or 1.0
            relevance = dict(zip(top, (values - values.min()) / spread, strict=True))
            chosen: list[int] = []
            left = list(top)
            while left:
                best = max(
                    left,
                    key=lambda i: (
                        weight * relevance[i]
                        - (1 - weight)
                        * max((float(similar[idx[i], idx[j]]) for j in chosen), default=0.0)
                    ),
                )
                chosen.append(best)
                left.remove(best)
            return chosen

        return rerank

    def category_prior(weight: float) -> Scorer:
        def score(text: str, idx: np.ndarray) -> np.ndarray:
            logits = prototypes.matrix @ plan_vector(emb, text, split=True)
            needs = np.exp((logits - logits.max()) / 0.05)
            needs /= needs.sum()
            bonus = np.where(item_category[idx] >= 0, needs[item_category[idx]], 0.0)
            return lab.fused(text, idx) + weight * bonus

        return score

    def vocabulary_penalty(weight: float) -> Scorer:
        def score(text: str, idx: np.ndarray) -> np.ndarray:
            plan_terms = set(tokens(text))
            missing = np.array([len(specific[i] - plan_terms) for i in idx], dtype=float)
            return lab.fused(text, idx) - weight * missing

        return score

    def dense_adjusted(adjust: np.ndarray) -> Scorer:
        return lambda text, idx: lab.fused(text, idx, dense=lab.dense(text, idx) - adjust[idx])

    def third_ranking(text: str, idx: np.ndarray) -> np.ndarray:
        full = lab.dense(text, idx, split=False)
        pooled = lab.dense(text, idx)
        keyword = lab.bm25.scores(text)[idx]
        return rrf_scores(len(idx), [*rankings_of(full, keyword), *rankings_of(pooled, None)])

    def key(vectors: np.ndarray) -> Scorer:
        return lambda text, idx: vectors[idx] @ plan_vector(emb, text, split=False)

    return {
        "embed the title only (the paper's key), dense": lab.ranker(key(title_vectors)),
        "embed title + description, dense": lab.ranker(key(td_vectors)),
        "default + MMR, lambda 0.85": lab.ranker(lab.fused, mmr(0.85)),
        "default + MMR, lambda 0.7": lab.ranker(lab.fused, mmr(0.7)),
        "default + category prior, w 0.002": lab.ranker(category_prior(0.002)),
        "default + category prior, w 0.005": lab.ranker(category_prior(0.005)),
        "default + vocabulary-mismatch penalty, w 0.0005": lab.ranker(vocabulary_penalty(5e-4)),
        "default + vocabulary-mismatch penalty, w 0.002": lab.ranker(vocabulary_penalty(2e-3)),
        "default + embedding-specificity penalty, w 0.1": lab.ranker(
            dense_adjusted(0.1 * embed_spec)
        ),
        "default + CSLS hubness correction, a 0.5": lab.ranker(dense_adjusted(0.5 * hubness)),
        "default with stemmed BM25": lab.ranker(
            lambda text, idx: lab.fused(text, idx, bm25=stem_index, query=stemmed(text))
        ),
        "default + full-plan embedding as a third ranking": lab.ranker(third_ranking),
    }


def feedback(
    pool_path: Path, queries: list[EvalQuery], harmful: bool, weight: float = 0.1
) -> dict[str, Any]:
    """Rate the default's top 3 on every dev query (helpful if labelled relevant; with
    `harmful`, every other result as harmful), then recall the test split again: does the
    rating term carry over to unseen plans?"""
    pool = load_pool(pool_path)
    with throwaway_store(pool) as evalset:
        store = evalset.memory
        ranker = recall_ranker(store, replace(METHODS["mtl"], rating_weight=weight))
        before = score_ranker(evalset, queries, ranker, name="mtl", split="test")
        ratings = Counter[str]()
        for query in queries:
            if query.split != "dev":
                continue
            relevant = {evalset.store_ids[r] for r in query.relevant}
            for hit in store.recall(query.plan, k=3, exclude_domains=[query.domain]):
                if hit.id in relevant or harmful:
                    store.rate(hit.id, helpful=hit.id in relevant)
                    ratings["helpful" if hit.id in relevant else "harmful"] += 1
        retired = sum(1 for i in store.export() if i.status == "retired")
        after = score_ranker(evalset, queries, ranker, name="mtl + dev ratings", split="test")
    return {
        "ratings": dict(ratings),
        "retired": retired,
        "test_before": figures(before),
        "test_after": figures(after),
    }


def bootstrap(a: list[float], b: list[float], resamples: int = 10_000) -> dict[str, float]:
    """Mean paired difference a - b and its 95% percentile interval."""
    diff = np.array(a) - np.array(b)
    rng = np.random.default_rng(0)
    means = diff[rng.integers(0, len(diff), (resamples, len(diff)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return {"mean": round(float(diff.mean()), 4), "low": round(low, 4), "high": round(high, 4)}


def latency(size: int, reps: int) -> dict[str, Any]:
    """In-process recall p50 at `size` insights: dense against the default."""
    sys.path.insert(0, str(ROOT / "bench"))
    from benchmark import PLANS, fill_store

    _, queries_path = shipped_set()
    long_plans = [json.loads(line)["plan"] for line in queries_path.read_text().splitlines()]
    with tempfile.TemporaryDirectory() as scratch:
        home = Path(scratch)
        fill_store(home, size)
        store = Memory(load_settings(home, starter=False))
        store.warm()
        result: dict[str, Any] = {"insights": size}
        for label, plans in (("one_sentence", PLANS), ("eval_plans", long_plans[:12])):
            times: dict[str, list[float]] = {"dense": [], "mtl": []}
            for _ in range(reps):
                for plan in plans:
                    for method in times:  # interleaved, so drift hits both alike
                        start = time.perf_counter()
                        store.recall(plan, method=method)
                        times[method].append(time.perf_counter() - start)
            result[label] = {m: round(statistics.median(t) * 1000, 2) for m, t in times.items()}
        texts = store.table.snapshot().texts()
        start = time.perf_counter()
        Bm25Index(texts)  # what the first recall after a write builds
        result["bm25_build_ms"] = round((time.perf_counter() - start) * 1000, 1)
        store.close()
    return result


def table(rows: list[tuple[str, dict[str, float], dict[str, float]]]) -> str:
    head = (
        "| method | dev P@3 | dev hit@3 | dev nDCG@10 "
        "| test P@3 | test hit@3 | test MRR | test R@10 | test nDCG@10 |"
    )
    lines = [head, "|---|---|---|---|---|---|---|---|---|"]
    for name, dev, test in rows:
        lines.append(
            f"| {name} | {dev['precision_at_k']:.3f} | {dev['hit_at_k']:.3f} | "
            f"{dev['ndcg_at_10']:.3f} | {test['precision_at_k']:.3f} | {test['hit_at_k']:.3f} | "
            f"{test['mrr']:.3f} | {test['recall_at_10']:.3f} | {test['ndcg_at_10']:.3f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "retrieval.json")
    parser.add_argument("--no-latency", action="store_true", help="Skip the latency part.")
    parser.add_argument(
        "--latency-only", action="store_true", help="Only (re)measure latency into --out."
    )
    args = parser.parse_args()
    if args.latency_only:
        saved = json.loads(args.out.read_text()) if args.out.exists() else {}
        saved["latency"] = latency(10_000, reps=8)
        args.out.write_text(json.dumps(saved, indent=2) + "\n")
        print("latency", json.dumps(saved["latency"]))
        return
    pool_path, queries_path = shipped_set()
    pool = load_pool(pool_path)
    queries = load_queries(queries_path, pool)
    results: dict[str, Any] = {"methods": {}, "task_as_query": {}, "experiments": {}}
    with throwaway_store(pool) as evalset:
        results["pool"] = evalset.summary.model_dump()
        per_query: dict[str, list[float]] = {}
        for name, method in METHODS.items():
            ranker = recall_ranker(evalset.memory, method)
            scores = {
                split: score_ranker(
                    evalset, queries, ranker, name=name, split=split, details=split == "all"
                )
                for split in SPLITS
            }
            results["methods"][name] = {s: figures(r) for s, r in scores.items()}
            per_query[name] = [q.precision_at_k for q in scores["all"].per_query or []]
            task = score_ranker(evalset, queries, ranker, name=name, query_field="task")
            results["task_as_query"][name] = figures(task)
            print(name, json.dumps(results["methods"][name]["test"]), flush=True)
        results["bootstrap_p_at_3_mtl_minus_dense_all"] = bootstrap(
            per_query["mtl"], per_query["dense"]
        )
        lab = Lab(evalset)
        for name, ranker in experiments(lab, evalset).items():
            results["experiments"][name] = {
                split: figures(score_ranker(evalset, queries, ranker, name=name, split=split))
                for split in ("dev", "test")
            }
            print(name, json.dumps(results["experiments"][name]), flush=True)
    results["feedback"] = {
        f"{'helpful_and_harmful' if harmful else 'helpful_only'}_weight_{weight}": feedback(
            pool_path, queries, harmful=harmful, weight=weight
        )
        for harmful in (True, False)
        for weight in (0.1, 0.03)
    }
    print("feedback", json.dumps(results["feedback"]), flush=True)
    if not args.no_latency:
        results["latency"] = latency(10_000, reps=8)
        print("latency", json.dumps(results["latency"]), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    methods = results["methods"]
    print("\nMethods (test split unless marked):\n")
    print(table([(n, methods[n]["dev"], methods[n]["test"]) for n in METHODS]))
    print("\nTried on top of the default:\n")
    print(
        table(
            [("default (mtl)", methods["mtl"]["dev"], methods["mtl"]["test"])]
            + [(n, e["dev"], e["test"]) for n, e in results["experiments"].items()]
        )
    )
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
