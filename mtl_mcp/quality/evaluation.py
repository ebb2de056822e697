"""Retrieval quality, measured: the library behind `mtl-mcp eval`.

A pool of insights is imported into a throwaway store in a temporary directory, through the
same path as `mtl-mcp import` (lint, deduplication, inference of missing labels), so the
evaluation never sees a label or an id that a live store would not have. Each query then goes
through `Memory.recall`, the code behind the `recall_insights` tool, by default with
the query's own domain left out: the paper's leave-one-domain-out protocol, which measures
transfer across domains rather than lookup within one.

Metrics, averaged over queries (binary relevance):

- precision@k: relevant results among the top k, divided by k;
- hit@k: 1 if any of the top k is relevant;
- MRR: 1 / rank of the first relevant result within the top max(k, 10), else 0;
- recall@10: relevant results in the top 10 over the query's relevant insights;
- nDCG@10: sum of 1/log2(rank + 1) over relevant results in the top 10, divided by its best
  possible value.

Pool ids map to the store's content-derived ids. Pool items that merge into one stored insight
count once; a relevant item the lint rejected still counts in recall@10's denominator.
"""

from __future__ import annotations

import contextlib
import json
import math
import statistics
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mtl_mcp.config import load_settings
from mtl_mcp.errors import InputError
from mtl_mcp.index.methods import METHODS, RecallMethod, get_method
from mtl_mcp.memory import Memory
from mtl_mcp.schemas import InsightDraft, RecordResult, Slug, validation_problems

QueryField = Literal["plan", "task"]
Split = Literal["dev", "test", "all"]
IMPORT_BATCH = 256
DEPTH = 10  # recall@10, nDCG@10 and MRR look this deep
# A ranker: (query text, how many results, domains to leave out) -> store ids, best first.
Ranker = Callable[[str, int, list[str]], list[str]]


class PoolItem(BaseModel):
    """One pool line: an id the queries refer to, and the insight as a draft."""

    id: str
    draft: InsightDraft


class EvalQuery(BaseModel):
    """One query line of an evaluation set."""

    model_config = ConfigDict(extra="forbid")

    id: str
    domain: Slug
    plan: str = Field(min_length=1, description="The 3-4 sentence plan: the paper's query.")
    task: str | None = Field(default=None, description="The raw task text, for comparison.")
    relevant: list[str] = Field(min_length=1, description="Pool ids that would help.")
    split: Literal["dev", "test"] | None = None


class Scores(BaseModel):
    """The ranking figures, for one query or averaged over many."""

    precision_at_k: float
    hit_at_k: float
    mrr: float
    recall_at_10: float
    ndcg_at_10: float


class Metrics(Scores):
    """Averages over a set of queries."""

    queries: int


class QueryScore(Scores):
    """One query's figures and what came back."""

    id: str
    domain: str
    retrieved: list[str] = Field(description="Pool ids of the top results (first of a merge).")


class PoolSummary(BaseModel):
    """What importing the pool did."""

    insights: int
    stored: int
    merged: int
    rejected: int


class EvalResult(Metrics):
    """One method's figures on one evaluation set (the `--json` output)."""

    method: str
    k: int
    query_field: QueryField
    leave_domain_out: bool
    split: Split
    per_domain: dict[str, Metrics]
    skipped: list[str] = Field(
        default_factory=list, description="Queries left with no relevant insight to find."
    )
    pool: PoolSummary
    per_query: list[QueryScore] | None = None


def shipped_set() -> tuple[Path, Path]:
    """The evaluation set that ships with mtl-mcp: (pool, queries)."""
    root = Path(str(resources.files("mtl_mcp").joinpath("data/eval")))
    return root / "pool.jsonl", root / "queries.jsonl"


def _lines(path: Path) -> Iterator[tuple[int, dict[str, object]]]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {path}: {exc}") from exc
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}:{number}: not JSON ({exc.msg})") from exc
        if not isinstance(data, dict):
            raise InputError(f"{path}:{number}: not a JSON object")
        yield number, data


def _problem(path: Path, number: int, exc: ValidationError) -> InputError:
    return InputError(f"{path}:{number}: {'; '.join(validation_problems(exc, 'line')[:3])}")


def load_pool(path: Path) -> list[PoolItem]:
    """Pool lines: `{"id", "title", "description", "content", "domain", ...}`."""
    items: list[PoolItem] = []
    seen: set[str] = set()
    for number, data in _lines(path):
        pool_id = data.pop("id", None)
        if not isinstance(pool_id, str) or not pool_id:
            raise InputError(f"{path}:{number}: every pool line needs a string `id`")
        if pool_id in seen:
            raise InputError(f"{path}:{number}: id {pool_id!r} appears twice")
        seen.add(pool_id)
        try:
            items.append(PoolItem(id=pool_id, draft=InsightDraft.model_validate(data)))
        except ValidationError as exc:
            raise _problem(path, number, exc) from exc
    if not items:
        raise InputError(f"{path} has no insights")
    return items


def load_queries(path: Path, pool: Sequence[PoolItem]) -> list[EvalQuery]:
    """Query lines: `{"id", "domain", "task", "plan", "relevant": [pool ids], "split"}`."""
    known = {item.id for item in pool}
    queries: list[EvalQuery] = []
    for number, data in _lines(path):
        try:
            query = EvalQuery.model_validate(data)
        except ValidationError as exc:
            raise _problem(path, number, exc) from exc
        if unknown := [r for r in query.relevant if r not in known]:
            raise InputError(f"{path}:{number}: relevant ids not in the pool: {unknown}")
        queries.append(query)
    if not queries:
        raise InputError(f"{path} has no queries")
    return queries


@dataclass
class EvalStore:
    """A throwaway store holding the pool, and how pool ids map onto its ids."""

    memory: Memory
    pool: list[PoolItem]
    store_ids: dict[str, str]  # pool id -> store id (absent: rejected)
    summary: PoolSummary
    pool_ids: dict[str, str] = field(init=False)  # store id -> its first pool id
    domains: dict[str, str | None] = field(init=False)  # pool id -> its domain

    def __post_init__(self) -> None:
        self.pool_ids = {}
        for pool_id, store_id in self.store_ids.items():
            self.pool_ids.setdefault(store_id, pool_id)
        self.domains = {item.id: item.draft.domain for item in self.pool}


@contextlib.contextmanager
def throwaway_store(
    pool: Sequence[PoolItem], embed_model: str | None = None
) -> Iterator[EvalStore]:
    """Import `pool` into a store in a temporary directory, removed afterwards.

    The store URI is set explicitly, so an MTL_MCP_STORE_URI in the environment can never
    point the evaluation at real data.
    """
    with tempfile.TemporaryDirectory(prefix="mtl-eval-") as scratch:
        home = Path(scratch)
        settings = load_settings(
            home, starter=False, store_uri=str(home / "store"), embed_model=embed_model
        )
        memory = Memory(settings)
        try:
            results: list[RecordResult] = []
            for start in range(0, len(pool), IMPORT_BATCH):
                batch = pool[start : start + IMPORT_BATCH]
                results += memory.import_insights([item.draft for item in batch])
            store_ids = {
                item.id: r.id
                for item, r in zip(pool, results, strict=True)
                if r.status != "rejected" and r.id
            }
            summary = PoolSummary(
                insights=len(pool),
                stored=sum(r.status == "stored" for r in results),
                merged=sum(r.status == "merged" for r in results),
                rejected=sum(r.status == "rejected" for r in results),
            )
            yield EvalStore(memory=memory, pool=list(pool), store_ids=store_ids, summary=summary)
        finally:
            memory.close()


def score_query(
    ranked: Sequence[str], relevant: set[str], k: int, relevant_count: int
) -> dict[str, float]:
    """The five figures for one ranking (store ids, best first, at least max(k, 10) deep)."""
    top = list(ranked[:k])
    deep = list(ranked[: max(k, DEPTH)])
    first = next((n for n, r in enumerate(deep, 1) if r in relevant), None)
    gains = [1.0 / math.log2(n + 1) for n, r in enumerate(deep[:DEPTH], 1) if r in relevant]
    ideal = sum(1.0 / math.log2(n + 1) for n in range(1, min(relevant_count, DEPTH) + 1))
    return {
        "precision_at_k": sum(r in relevant for r in top) / k,
        "hit_at_k": float(any(r in relevant for r in top)),
        "mrr": 1.0 / first if first else 0.0,
        "recall_at_10": sum(r in relevant for r in deep[:DEPTH]) / relevant_count,
        "ndcg_at_10": sum(gains) / ideal if ideal else 0.0,
    }


def _average(scores: Sequence[QueryScore]) -> Metrics:
    def mean(name: str) -> float:
        return round(statistics.fmean(getattr(s, name) for s in scores), 4)

    return Metrics(
        queries=len(scores),
        precision_at_k=mean("precision_at_k"),
        hit_at_k=mean("hit_at_k"),
        mrr=mean("mrr"),
        recall_at_10=mean("recall_at_10"),
        ndcg_at_10=mean("ndcg_at_10"),
    )


def select(queries: Sequence[EvalQuery], split: Split) -> list[EvalQuery]:
    """The queries of one split ('all': every query)."""
    if split == "all":
        return list(queries)
    chosen = [q for q in queries if q.split == split]
    if not chosen:
        raise InputError(f"no query is in the {split!r} split: use --split all")
    return chosen


def score_ranker(
    evalset: EvalStore,
    queries: Sequence[EvalQuery],
    ranker: Ranker,
    *,
    name: str,
    k: int = 3,
    query_field: QueryField = "plan",
    leave_domain_out: bool = True,
    split: Split = "all",
    details: bool = False,
) -> EvalResult:
    """Score any ranker on the queries of `split`."""
    scores: list[QueryScore] = []
    skipped: list[str] = []
    for query in select(queries, split):
        text = query.plan if query_field == "plan" else query.task
        if not text:
            raise InputError(f"query {query.id} has no {query_field!r} text")
        # Under leave-one-domain-out an insight of the query's own domain cannot come back.
        eligible = [
            r
            for r in query.relevant
            if not (leave_domain_out and evalset.domains.get(r) == query.domain)
        ]
        if not eligible:
            skipped.append(query.id)
            continue
        relevant = {evalset.store_ids[r] for r in eligible if r in evalset.store_ids}
        count = len(relevant) + sum(r not in evalset.store_ids for r in eligible)
        exclude = [query.domain] if leave_domain_out else []
        top = ranker(text, k, exclude)
        deep = top if k >= DEPTH else ranker(text, DEPTH, exclude)
        figures = score_query(deep, relevant, k, count)
        # P@k and hit@k from a call for k results, as an assistant would make it.
        head = score_query(top, relevant, k, count)
        figures.update(precision_at_k=head["precision_at_k"], hit_at_k=head["hit_at_k"])
        scores.append(
            QueryScore(
                id=query.id,
                domain=query.domain,
                retrieved=[evalset.pool_ids.get(i, i) for i in top],
                **{metric: round(value, 4) for metric, value in figures.items()},
            )
        )
    if not scores:
        raise InputError("no query has a relevant insight it could retrieve")
    by_domain: dict[str, list[QueryScore]] = defaultdict(list)
    for score in scores:
        by_domain[score.domain].append(score)
    overall = _average(scores)
    return EvalResult(
        method=name,
        k=k,
        query_field=query_field,
        leave_domain_out=leave_domain_out,
        split=split,
        queries=overall.queries,
        precision_at_k=overall.precision_at_k,
        hit_at_k=overall.hit_at_k,
        mrr=overall.mrr,
        recall_at_10=overall.recall_at_10,
        ndcg_at_10=overall.ndcg_at_10,
        per_domain={d: _average(s) for d, s in sorted(by_domain.items())},
        skipped=skipped,
        pool=evalset.summary,
        per_query=scores if details else None,
    )


def recall_ranker(memory: Memory, method: RecallMethod) -> Ranker:
    """A ranker that is exactly `Memory.recall` with one method."""

    def rank(text: str, k: int, exclude: list[str]) -> list[str]:
        hits = memory.recall(text, k=k, exclude_domains=exclude, method=method)
        return [hit.id for hit in hits]

    return rank


def evaluate(
    pool_path: Path,
    queries_path: Path,
    *,
    methods: Sequence[str] = ("mtl",),
    k: int = 3,
    query_field: QueryField = "plan",
    leave_domain_out: bool = True,
    split: Split = "all",
    embed_model: str | None = None,
    details: bool = False,
) -> list[EvalResult]:
    """Build a throwaway store from the pool once and score each method on the queries."""
    if not 1 <= k <= 20:
        raise InputError(f"k={k} is out of range: use 1 to 20, as recall does")
    chosen = [get_method(m) for m in methods]
    pool = load_pool(pool_path)
    queries = select(load_queries(queries_path, pool), split)
    with throwaway_store(pool, embed_model) as evalset:
        return [
            score_ranker(
                evalset,
                queries,
                recall_ranker(evalset.memory, method),
                name=method.name,
                k=k,
                query_field=query_field,
                leave_domain_out=leave_domain_out,
                split=split,
                details=details,
            )
            for method in chosen
        ]


__all__ = [
    "METHODS",
    "EvalQuery",
    "EvalResult",
    "EvalStore",
    "Metrics",
    "PoolItem",
    "evaluate",
    "load_pool",
    "load_queries",
    "score_query",
    "score_ranker",
    "shipped_set",
    "throwaway_store",
]
