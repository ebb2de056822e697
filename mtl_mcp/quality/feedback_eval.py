"""Feedback from session verdicts, measured: the library behind `mtl-mcp eval --feedback`.

The question is whether verdicts left by past sessions keep bad lessons out of later
recalls without pushing good ones out. The evaluation pool holds only good lessons, so
`--planted` adds insights written to be wrong for some kind of plan yet to rank high for
it (`data/eval/planted.jsonl`: too task-specific, plainly wrong, or over-generalised), each
with the queries it misleads and how.

Protocol, in one throwaway store (`evaluation.throwaway_store`):

1. Every query of the *sessions* split (dev) is recalled through `Memory.recall` (top k,
   leave-one-domain-out), as a session would be given its insights.
2. A simulated judge gives one verdict per insight given: `misled` (with the planted item's
   mode) for a planted insight on a query it targets, `helped` for a labelled-relevant one,
   `not-used` for anything else. With `noise`, that fraction of `not-used` verdicts becomes
   `misled` (a random mode) and that fraction of `misled` ones is missed (`not-used`).
3. The *scored* split (test) is recalled again, with and without feedback: feedback leaves
   out `FeedbackIndex.suppressed(plan vector)` and `keeps_misleading()` through
   `exclude_ids`, so the next best insights take their places.

Figures per split: precision@k and hit@k against the labels (a planted insight is never
relevant), planted insights in the top k (all of them, and those on queries they target),
and the share of queries with at least one planted insight in the top k.
"""

from __future__ import annotations

import random
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import get_args

from pydantic import BaseModel, Field, ValidationError

from mtl_mcp.errors import InputError
from mtl_mcp.index.embedder import Vector
from mtl_mcp.index.methods import get_method, plan_vector
from mtl_mcp.memory import feedback
from mtl_mcp.memory.feedback import FeedbackIndex, Verdict
from mtl_mcp.quality.evaluation import (
    EvalQuery,
    EvalStore,
    PoolItem,
    _lines,
    _problem,
    load_pool,
    load_queries,
    select,
    throwaway_store,
)
from mtl_mcp.schemas import InsightDraft, MisledMode, VerdictKind

MODES: tuple[MisledMode, ...] = get_args(MisledMode)


class PlantedItem(PoolItem):
    """A bad insight planted among the pool's good ones: what it misleads and how."""

    mode: MisledMode
    targets: list[str] = Field(min_length=1, description="Query ids it misleads.")
    helps: list[str] = Field(
        default_factory=list,
        description="Query ids it is right for: a best practice that misleads elsewhere.",
    )


def shipped_planted() -> Path:
    """The planted bad insights that ship with mtl-mcp."""
    return Path(str(resources.files("mtl_mcp").joinpath("data/eval/planted.jsonl")))


def load_planted(
    path: Path, pool: Sequence[PoolItem], queries: Sequence[EvalQuery]
) -> list[PlantedItem]:
    """Planted lines: a pool line plus `"mode"` and `"targets": [query ids]`."""
    taken = {item.id for item in pool}
    known = {query.id for query in queries}
    items: list[PlantedItem] = []
    for number, data in _lines(path):
        extra = {
            name: data.pop(name) for name in ("id", "mode", "targets", "helps") if name in data
        }
        try:
            item = PlantedItem.model_validate({"draft": InsightDraft.model_validate(data), **extra})
        except ValidationError as exc:
            raise _problem(path, number, exc) from exc
        if item.id in taken:
            raise InputError(f"{path}:{number}: id {item.id!r} is taken already")
        if unknown := [t for t in [*item.targets, *item.helps] if t not in known]:
            raise InputError(f"{path}:{number}: query ids not among the queries: {unknown}")
        if both := set(item.targets) & set(item.helps):
            raise InputError(f"{path}:{number}: both helped and misled: {sorted(both)}")
        taken.add(item.id)
        items.append(item)
    if not items:
        raise InputError(f"{path} has no planted insights")
    return items


class SplitFigures(BaseModel):
    """One split's recall, with or without feedback (averages over noise seeds)."""

    queries: int
    precision_at_k: float
    hit_at_k: float
    planted_in_top_k: float = Field(
        description="Planted insights among all queries' top k (but where they help)."
    )
    planted_on_targets: float = Field(description="Those on queries they mislead.")
    queries_with_planted: float = Field(description="Share of queries with one in the top k.")
    left_out: float = Field(description="Insights feedback left out, per query.")
    relevant_left_out: float = Field(
        description="Relevant insights of the top k without feedback that it left out."
    )


class FeedbackComparison(BaseModel):
    """Recall of one split without and with the feedback of the sessions split."""

    sessions: str
    scored: str
    off: SplitFigures
    on: SplitFigures
    per_query_precision: dict[str, list[float]] | None = Field(
        default=None, description="Per query, off and on (mean over seeds): for a bootstrap."
    )
    per_query_planted: dict[str, list[float]] | None = None


class FeedbackResult(BaseModel):
    """What `mtl-mcp eval --feedback` prints with `--json`."""

    k: int
    planted: int
    noise: float
    seeds: int
    constants: dict[str, float]
    verdicts: dict[str, float] = Field(description="Verdicts of the sessions split, by kind.")
    retired: dict[str, str] = Field(description="Pool id -> reason (first seed).")
    comparisons: list[FeedbackComparison]


@dataclass
class TallyRow:
    precision: float
    hit: float
    planted: int
    on_targets: int
    left_out: int
    relevant_left_out: int


@dataclass
class FeedbackLab:
    """Recall and simulated verdicts over one throwaway store; results are cached."""

    evalset: EvalStore
    planted: dict[str, PlantedItem]  # pool id -> item
    k: int = 3
    leave_domain_out: bool = True
    _vectors: dict[str, Vector] = field(default_factory=dict)
    _tops: dict[tuple[str, frozenset[str]], list[str]] = field(default_factory=dict)

    def vector(self, query: EvalQuery) -> Vector:
        """The query's plan vector, as a verdict would store it."""
        if query.id not in self._vectors:
            embedder = self.evalset.memory.embedder
            self._vectors[query.id] = plan_vector(embedder, query.plan, split=True)
        return self._vectors[query.id]

    def top(self, query: EvalQuery, exclude: frozenset[str] = frozenset()) -> list[str]:
        """Store ids of the top k for the query's plan, `exclude` left out."""
        exclude = exclude & self._reachable(query)  # same answer, more cache hits
        key = (query.id, exclude)
        if key not in self._tops:
            hits = self.evalset.memory.recall(
                query.plan,
                k=self.k,
                exclude_domains=[query.domain] if self.leave_domain_out else None,
                exclude_ids=exclude,
                method=get_method(None),
            )
            self._tops[key] = [hit.id for hit in hits]
        return self._tops[key]

    def _reachable(self, query: EvalQuery) -> frozenset[str]:
        if not self.leave_domain_out:
            return frozenset(self.evalset.pool_ids)
        domains = self.evalset.domains
        return frozenset(
            store_id
            for store_id, pool_id in self.evalset.pool_ids.items()
            if domains.get(pool_id) != query.domain
        )

    def relevant(self, query: EvalQuery) -> set[str]:
        """Store ids of the query's relevant insights it can reach (planted ones that help
        it included)."""
        store_ids, domains = self.evalset.store_ids, self.evalset.domains
        helping = [p.id for p in self.planted.values() if query.id in p.helps]
        return {
            store_ids[r]
            for r in [*query.relevant, *helping]
            if r in store_ids and not (self.leave_domain_out and domains.get(r) == query.domain)
        }

    def misleads(self, store_id: str, query: EvalQuery) -> MisledMode | None:
        item = self.planted.get(self.evalset.pool_ids.get(store_id, ""))
        return item.mode if item is not None and query.id in item.targets else None

    def is_planted(self, store_id: str) -> bool:
        return self.evalset.pool_ids.get(store_id, "") in self.planted

    def verdicts(
        self, sessions: Sequence[EvalQuery], noise: float = 0.0, seed: int = 0
    ) -> list[Verdict]:
        """The simulated judge's verdicts on each session's top k (see the module doc)."""
        rng = random.Random(seed)
        verdicts: list[Verdict] = []
        for query in sessions:
            relevant = self.relevant(query)
            for store_id in self.top(query):
                mode = self.misleads(store_id, query)
                if mode is not None and noise and rng.random() < noise:
                    mode = None  # the judge missed it
                elif mode is None and store_id not in relevant and noise and rng.random() < noise:
                    mode = rng.choice(MODES)  # the judge blamed a lesson that did no harm
                kind: VerdictKind = (
                    "misled" if mode else "helped" if store_id in relevant else "not-used"
                )
                verdicts.append(
                    Verdict(store_id, kind, self.vector(query), query.id, mode if mode else None)
                )
        return verdicts

    def score(
        self, queries: Sequence[EvalQuery], index: FeedbackIndex | None
    ) -> dict[str, TallyRow]:
        """Per query: recall with the feedback of `index` applied (None: without)."""
        retired = frozenset(index.keeps_misleading()) if index is not None else frozenset()
        rows: dict[str, TallyRow] = {}
        for query in queries:
            relevant = self.relevant(query)
            if not relevant:
                continue
            left_out = retired
            if index is not None:
                left_out = left_out | frozenset(index.suppressed(self.vector(query)))
            top = self.top(query, left_out)
            unfiltered = self.top(query)
            rows[query.id] = TallyRow(
                precision=sum(i in relevant for i in top) / self.k,
                hit=float(any(i in relevant for i in top)),
                planted=sum(self.is_planted(i) and i not in relevant for i in top),
                on_targets=sum(self.misleads(i, query) is not None for i in top),
                left_out=len(left_out & self._reachable(query)),
                relevant_left_out=sum(i in relevant and i in left_out for i in unfiltered),
            )
        return rows


def _figures(runs: Sequence[dict[str, TallyRow]]) -> SplitFigures:
    def mean(values: Sequence[float]) -> float:
        return round(statistics.fmean(values), 4)

    def over(pick: str) -> float:
        return mean([mean([float(getattr(r, pick)) for r in run.values()]) for run in runs])

    return SplitFigures(
        queries=len(runs[0]),
        precision_at_k=over("precision"),
        hit_at_k=over("hit"),
        planted_in_top_k=mean([sum(r.planted for r in run.values()) for run in runs]),
        planted_on_targets=mean([sum(r.on_targets for r in run.values()) for run in runs]),
        queries_with_planted=mean(
            [mean([float(r.planted > 0) for r in run.values()]) for run in runs]
        ),
        left_out=over("left_out"),
        relevant_left_out=mean([sum(r.relevant_left_out for r in run.values()) for run in runs]),
    )


FORM_KEYS = ("floor", "full", "suppress_at", "retire_kinds")


def feedback_index(verdicts: Sequence[Verdict], form: Mapping[str, float] | None) -> FeedbackIndex:
    """A `FeedbackIndex` with the constants of `form` (missing ones: the defaults)."""
    form = form or {}
    if unknown := sorted(set(form) - set(FORM_KEYS)):
        raise InputError(f"unknown feedback constants {unknown}: use {', '.join(FORM_KEYS)}")
    return FeedbackIndex(
        verdicts,
        floor=form.get("floor", feedback.FLOOR),
        full=form.get("full", feedback.FULL),
        suppress_at=form.get("suppress_at", feedback.SUPPRESS_AT),
        retire_kinds=int(form.get("retire_kinds", feedback.RETIRE_KINDS)),
    )


def compare(
    lab: FeedbackLab,
    sessions: Sequence[EvalQuery],
    scored: Sequence[EvalQuery],
    *,
    noise: float = 0.0,
    seeds: int = 1,
    names: tuple[str, str] = ("dev", "test"),
    details: bool = False,
    form: Mapping[str, float] | None = None,
) -> tuple[FeedbackComparison, list[list[Verdict]], list[FeedbackIndex]]:
    """Recall `scored` without and with the feedback of `sessions`, over `seeds` noise draws."""
    off = lab.score(scored, None)
    verdict_runs = [lab.verdicts(sessions, noise, seed) for seed in range(seeds)]
    indexes = [feedback_index(v, form) for v in verdict_runs]
    on = [lab.score(scored, index) for index in indexes]
    comparison = FeedbackComparison(
        sessions=names[0],
        scored=names[1],
        off=_figures([off]),
        on=_figures(on),
    )
    if details:
        comparison.per_query_precision = {
            q: [off[q].precision, statistics.fmean(run[q].precision for run in on)] for q in off
        }
        comparison.per_query_planted = {
            q: [off[q].planted, statistics.fmean(run[q].planted for run in on)] for q in off
        }
    return comparison, verdict_runs, indexes


def evaluate_feedback(
    pool_path: Path,
    queries_path: Path,
    planted_path: Path | None = None,
    *,
    k: int = 3,
    noise: float = 0.0,
    seeds: int = 1,
    leave_domain_out: bool = True,
    embed_model: str | None = None,
    details: bool = False,
    form: Mapping[str, float] | None = None,
) -> FeedbackResult:
    """Sessions on the dev split, scored on test (and on dev itself, in sample)."""
    if not 1 <= k <= 20:
        raise InputError(f"k={k} is out of range: use 1 to 20, as recall does")
    if not 0.0 <= noise < 1.0:
        raise InputError(f"noise={noise} is out of range: use 0 to 1")
    if not 1 <= seeds <= 100:
        raise InputError(f"seeds={seeds} is out of range: use 1 to 100")
    pool = load_pool(pool_path)
    queries = load_queries(queries_path, pool)
    planted = load_planted(planted_path, pool, queries) if planted_path else []
    dev, test = select(queries, "dev"), select(queries, "test")
    with throwaway_store([*pool, *planted], embed_model) as evalset:
        lab = FeedbackLab(evalset, {p.id: p for p in planted}, k, leave_domain_out)
        out_of_sample, verdict_runs, indexes = compare(
            lab, dev, test, noise=noise, seeds=seeds, details=details, form=form
        )
        in_sample, _, _ = compare(
            lab, dev, dev, noise=noise, seeds=seeds, names=("dev", "dev"), form=form
        )
        tally = Counter(v.verdict for run in verdict_runs for v in run)
        first = indexes[0]
        return FeedbackResult(
            k=k,
            planted=len(planted),
            noise=noise,
            seeds=seeds,
            constants={
                "floor": first.floor,
                "full": first.full,
                "suppress_at": first.suppress_at,
                "retire_kinds": first.retire_kinds,
            },
            verdicts={kind: round(n / seeds, 2) for kind, n in sorted(tally.items())},
            retired={
                evalset.pool_ids.get(i, i): why for i, why in first.keeps_misleading().items()
            },
            comparisons=[out_of_sample, in_sample],
        )


__all__ = [
    "FeedbackLab",
    "FeedbackResult",
    "PlantedItem",
    "compare",
    "evaluate_feedback",
    "load_planted",
    "shipped_planted",
]
