"""Reading the memory: recall (and its preview), get, list, export, stats and the vectors
the quality tools measure."""

from __future__ import annotations

import builtins
import contextlib
import logging
import time
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

import mtl_mcp.memory.queries as queries
from mtl_mcp.errors import (
    InputError,
    NotFoundError,
)
from mtl_mcp.index.embedder import Vector
from mtl_mcp.index.gate import UNASKED_TOP_K, unasked
from mtl_mcp.index.methods import RecallMethod, get_method, plan_vector
from mtl_mcp.memory.core import MemoryCore
from mtl_mcp.memory.team import stats_of
from mtl_mcp.schemas import (
    CATEGORIES,
    TEXT_MAX,
    BrowseSort,
    Insight,
    LeftOut,
    RatingState,
    RecallHit,
    RecallOrigin,
    RecallPart,
    RecallPreview,
    Scope,
    Source,
    too_long,
)
from mtl_mcp.storage import reembed
from mtl_mcp.storage.schema import SCHEMA_VERSION
from mtl_mcp.text.redact import redact

if TYPE_CHECKING:
    pass

logger = logging.getLogger(__name__)

NOTES_KEPT = 10


PLAN_NOT_TASK = "the 3-4 sentence plan, not the task text, a transcript or a file"


@dataclass(frozen=True)
class LabelledVectors:
    """The active insights (as stored rows, without vectors) and their embeddings, aligned:
    what the quality tools measure and draw."""

    records: list[dict[str, Any]]
    vectors: npt.NDArray[np.float32]

    def column(self, name: str) -> list[Any]:
        return [record[name] for record in self.records]


class Reading(MemoryCore):
    """Recall and browse; every read works on the in-memory snapshot."""

    def recall(
        self,
        plan: str,
        k: int = 3,
        scope: Scope = "all",
        project: str | None = None,
        domains: Sequence[str] | None = None,
        min_score: float | None = None,
        exclude_domains: Sequence[str] | None = None,
        method: str | RecallMethod | None = None,
        exclude_ids: Collection[str] = (),
        origin: RecallOrigin | None = None,
    ) -> list[RecallHit]:
        """The top-k active insights for a short plan, best first.

        `exclude_domains` leaves those domains out (the evaluation's leave-one-domain-out);
        `method` picks a ranking from `index.methods.METHODS` (default: the evaluated best);
        `exclude_ids` leaves out insights already shown (the next best take their place).
        A recall with an `origin` reaches a model: the ledger records it (`flush` writes it).
        """
        hits = self._ranked(
            plan, k, scope, project, domains, min_score, exclude_domains, method, exclude_ids
        )
        with self._recalls_lock:  # the team pool's counters are not written: reads stay reads
            self._pending_recalls.update(h.id for h in hits if h.source == "personal")
        if origin is not None:
            self.loop.note(origin, plan, project, hits, self.clock())
        return hits

    def preview(
        self,
        plan: str,
        k: int = 3,
        scope: Scope = "all",
        project: str | None = None,
        domains: Sequence[str] | None = None,
        min_score: float | None = None,
        exclude_domains: Sequence[str] | None = None,
    ) -> RecallPreview:
        """What `recall` gives for a plan, through the same ranking, and why: each hit's
        dense and keyword parts, the gate's signals, and what session verdicts left out. A
        preview reaches no model: it counts no recall and the ledger does not record it.
        `unasked` is what the plan hook would inject for it, chosen among the top
        UNASKED_TOP_K whatever `k` is."""
        parts: list[RecallPart] = []
        left: dict[str, str] = {}
        start = time.perf_counter()
        depth = max(k, UNASKED_TOP_K)
        hits = self._ranked(
            plan,
            depth,
            scope,
            project,
            domains,
            min_score,
            exclude_domains,
            parts=parts,
            left_out=left,
        )
        seconds = time.perf_counter() - start
        feedback = self.loop.feedback(*self._model_info())
        retired = feedback.keeps_misleading() if feedback else {}
        chosen = unasked(hits[:UNASKED_TOP_K], self.settings.auto_recall_min_p)
        hits, parts = hits[:k], parts[:k]
        left_out = []
        for insight, reason in left.items():
            with contextlib.suppress(NotFoundError):
                title = self.get(insight).title
                left_out.append(
                    LeftOut(id=insight, title=title, reason=reason, retired=insight in retired)
                )
        method = get_method(None).name
        return RecallPreview(
            hits=hits,
            parts=parts,
            left_out=left_out,
            method=method,
            seconds=seconds,
            min_p=self.settings.auto_recall_min_p,
            unasked=[h.id for h in chosen],
        )

    def _ranked(
        self,
        plan: str,
        k: int,
        scope: Scope,
        project: str | None,
        domains: Sequence[str] | None,
        min_score: float | None,
        exclude_domains: Sequence[str] | None = None,
        method: str | RecallMethod | None = None,
        exclude_ids: Collection[str] = (),
        parts: builtins.list[RecallPart] | None = None,
        left_out: dict[str, str] | None = None,
    ) -> builtins.list[RecallHit]:
        """Recall's ranking (`recall` and `preview` both run it); `parts` and `left_out`, when
        given, get why each hit ranked there and what feedback left out."""
        ranking = get_method(method)
        if not plan.strip():
            raise InputError(
                "plan is empty: pass the 3-4 sentence plan you intend to follow for the task"
            )
        if len(plan) > TEXT_MAX:
            raise InputError(f"{too_long('plan', len(plan), TEXT_MAX)} ({PLAN_NOT_TASK})")
        if not 1 <= k <= 20:
            raise InputError(f"k={k} is out of range: ask for 1 to 20 insights")
        if scope == "this-project" and not project:
            raise InputError(
                "scope 'this-project' needs a project: pass project=<repo path or id>, "
                "or use scope='all'"
            )
        self._check_model()
        query = self.plan_embedding(plan, split=ranking.split_plan)
        if (feedback := self.loop.feedback(self.embedder.name, len(query))) is not None:
            # Lessons that misled plans like this one, or keep misleading: left out.
            suppressed = feedback.suppressed(query) | feedback.keeps_misleading()
            exclude_ids = set(exclude_ids) | set(suppressed)
            if left_out is not None:
                left_out.update(suppressed)
        pools = self._pools(scope, project, domains, exclude_domains, exclude_ids, ranking.keywords)
        gate = self.gate.current()
        return queries.recall_hits(pools, query, plan, k, ranking, min_score, gate, parts)

    def _pools(
        self,
        scope: Scope,
        project: str | None,
        domains: Sequence[str] | None,
        exclude_domains: Sequence[str] | None,
        exclude_ids: Collection[str],
        keywords: bool,
    ) -> builtins.list[queries.Pool]:
        """The candidates of a recall: the personal store's, and the team pool's if any."""
        snapshot = self._snapshot()
        mask = queries.recall_mask(snapshot, scope, project, domains, exclude_domains, exclude_ids)
        index = self._personal.keywords(snapshot) if keywords else None
        pools = [queries.Pool("personal", snapshot, mask, index)]
        team = self._team_snapshot()
        if self.team is not None and team is not None:
            team_project = self.team.project(project)
            team_mask = queries.recall_mask(
                team, scope, team_project, domains, exclude_domains, exclude_ids
            )
            pool = self.team.pool(team, snapshot, team_mask)
            pools.append(pool if keywords else replace(pool, keywords=None))
        return pools

    def gate_signals(
        self, plan: str, ids: Collection[str], vector: Vector | None = None
    ) -> dict[str, builtins.list[float]]:
        """The relevance gate's signals of some insights for a plan (`vector`: its query
        vector, if known), against every active insight as a recall with no filter would
        consider them: what `tune gate` fits on. Insights gone since are left out."""
        self._check_model()
        query = plan_vector(self.embedder, plan, split=True) if vector is None else vector
        pools = self._pools("all", None, None, None, (), keywords=True)
        return queries.signals_of(pools, query, plan, ids)

    def get(self, insight: str) -> Insight:
        """One insight by id (retired ones too)."""
        snapshot = self._snapshot()
        position = snapshot.positions.get(insight)
        if position is None and self.team is not None and (found := self.team.get(insight)):
            return found
        if position is None:
            raise NotFoundError(
                f"no insight has id {redact(insight)!r}: list ids with `mtl-mcp list` or "
                "list_memories"
            )
        return Insight.model_validate(snapshot.records([position])[0])

    def list(
        self,
        query: str | None = None,
        domain: str | None = None,
        project: str | None = None,
        polarity: str | None = None,
        category: str | None = None,
        sort: BrowseSort = "recent",
        limit: int = 20,
        offset: int = 0,
        include_retired: bool = False,
        text: str | None = None,
        source: Source | None = None,
        rating: RatingState | None = None,
    ) -> tuple[list[Insight], int]:
        """A page of insights matching the filters, and how many match in all.

        `query` ranks by meaning; `text` keeps only insights holding each of its words;
        `source` keeps one tier; `rating` one rating state ("retired": only retired ones)."""
        if category and category not in CATEGORIES:
            raise InputError(f"unknown category {category!r}: use one of {', '.join(CATEGORIES)}")
        for name, value in (("query", query), ("text", text)):
            if value and len(value) > TEXT_MAX:
                raise InputError(f"{too_long(name, len(value), TEXT_MAX)} (a few words)")
        snapshot = self._snapshot()
        vector: Vector | None = None
        if query and query.strip():
            self._check_model()
            vector = self.embedder.embed_query(query)
        filters = {"domain": domain, "polarity": polarity, "category": category}
        pools = []
        if source != "team":
            mask = queries.filter_mask(snapshot, filters, project, include_retired, text, rating)
            pools.append(queries.Pool("personal", snapshot, mask))
        if (
            source != "personal"
            and self.team is not None
            and (team := self._team_snapshot()) is not None
        ):
            team_project = self.team.project(project) if project else None
            team_mask = queries.filter_mask(
                team, filters, team_project, include_retired, text, rating
            )
            pools.append(self.team.pool(team, snapshot, team_mask))
        if not pools:
            return [], 0
        return queries.list_page(pools, vector, sort, limit, offset)

    def export(self) -> Iterator[Insight]:
        """Every insight, retired ones included, as stored."""
        for row in self._snapshot().rows.to_pylist():
            yield Insight.model_validate(row)

    def stats(self) -> dict[str, Any]:
        """Counts by domain, category, polarity and project, with the store's model and
        paths, and the loop's figures (recalls by trigger, sessions, verdicts)."""
        snapshot = self._snapshot()
        numbers = queries.counts(snapshot)
        meta = self.table.meta
        result = {
            **numbers,
            "embed_model": snapshot.model or meta.get("embed_model"),
            "schema_version": int(meta.get("schema_version", SCHEMA_VERSION)),
            "data_dir": str(self.settings.home),
            "store_uri": self.settings.store_uri,
            "loop": self.loop.ledger.figures(),
        }
        if self._upgrading():
            done, total = reembed.progress(self.table)
            result["reembedding"] = {
                "model": self.settings.embed_model,
                "done": done,
                "total": total,
            }
        if self.team is not None:
            team = self.team.snapshot()
            counts = queries.counts(team) if team is not None else None
            result["team"] = stats_of(self.team, self._model_name, counts)
        return result

    def vectors(self, columns: Sequence[str] | None = None) -> LabelledVectors:
        """The active insights' embeddings and labels (the in-memory matrix, not a re-read);
        only `columns` of each record, if given (a map of 100k needs four)."""
        snapshot = self._snapshot()
        active = [int(n) for n in np.flatnonzero(snapshot.active)]
        return LabelledVectors(snapshot.records(active, columns), snapshot.vectors[active])
