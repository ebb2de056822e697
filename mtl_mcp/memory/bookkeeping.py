"""The closed loop's bookkeeping: recalls put in front of a session's model, the judge's
verdicts on them (and retiring what keeps misleading), and the reports built on the
ledger."""

from __future__ import annotations

import builtins
import logging
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING

import numpy as np

import mtl_mcp.memory.loop as loop_reports
from mtl_mcp.errors import (
    NotFoundError,
)
from mtl_mcp.index.gate import UNASKED_TOP_K, unasked
from mtl_mcp.memory.core import REINSTATED_NOTE, VERDICTS_NOTE, appended_note
from mtl_mcp.memory.curation import Curation
from mtl_mcp.schemas import (
    NOTE_MAX,
    GivenInsight,
    Insight,
    InsightHistory,
    RecallHit,
    RecallOrigin,
    SessionReport,
    VerdictEntry,
)
from mtl_mcp.storage.schema import sql_string

if TYPE_CHECKING:
    pass

logger = logging.getLogger(__name__)

NOTES_KEPT = 10


class Bookkeeping(Curation):
    """What reached which session, and how it went."""

    def recall_for_session(
        self,
        plan: str,
        origin: RecallOrigin,
        k: int = UNASKED_TOP_K,
        project: str | None = None,
        min_p: float | None = None,
        exclude_ids: Collection[str] = (),
        on_time: Callable[[], bool] | None = None,
    ) -> builtins.list[RecallHit] | None:
        """A recall put in front of a session's model unasked (the plan-triggered hook): of
        the top k, the one the relevance gate gives the most, if at least `min_p` (default:
        the setting; `index.gate.unasked`); never an insight the session was given
        already, by any trigger (the ledger's, and `exclude_ids` the caller knows of: the
        next best take their place). None when
        `on_time` says the caller has given up meanwhile: then no model sees it and the
        ledger does not record it, but the hits are kept for the session's next try with
        the same plan (a hook that missed its budget while the service warmed), which then
        gets them at once unless one was shown since."""
        shown = self.loop.shown(origin.session_id) if origin.session_id else set()
        left_out = shown | set(exclude_ids)
        late = self.loop.take_late(origin.session_id, plan, project)
        if late is not None and not any(h.id in left_out for h in late) and self._all_active(late):
            top = late
        else:
            top = self.recall(plan, k=k, project=project, exclude_ids=left_out)
        if on_time is not None and not on_time():
            self.loop.keep_late(origin.session_id, plan, project, top)
            return None
        hits = unasked(top, self.settings.auto_recall_min_p if min_p is None else min_p)
        if hits:
            self.loop.note(origin, plan, project, hits, self.clock())
        return hits

    def _all_active(self, hits: Sequence[RecallHit]) -> bool:
        """Whether every hit is still stored and active (a kept late recall outlives a
        forget, a retirement or a consolidation's merge otherwise)."""
        snapshot = self._snapshot()
        active = snapshot.active
        return all(
            (n := snapshot.positions.get(h.id)) is not None and bool(active[n]) for h in hits
        )

    def note_shown(
        self, origin: RecallOrigin, ids: Sequence[str], project: str | None = None
    ) -> None:
        """Record insights put in front of a model without a plan (the session-start
        context): the ledger gets a recall with no plan."""
        hits = [h for h in (self._hit_of(i) for i in ids) if h is not None]
        self.loop.note(origin, "", project, hits, self.clock())

    def _hit_of(self, insight: str) -> RecallHit | None:
        try:
            found = self.get(insight)
        except NotFoundError:
            return None
        return RecallHit.model_validate({**found.model_dump(), "score": 0.0, "similarity": 0.0})

    def given_insights(self, session_id: str) -> builtins.list[GivenInsight]:
        """The insights one session was given (by a tool call, the hook or the session-start
        context), in the order it first got them, each with the latest plan it was
        recalled for. Insights gone since are left out."""
        return loop_reports.given(self, session_id)

    def record_verdicts(self, entries: Sequence[VerdictEntry]) -> None:
        """Store the judge's verdicts, each with the embedding of the plan its insight was
        recalled for (what feedback compares later plans with)."""
        plans = {e.plan for e in entries if e.plan}  # a session's verdicts share its plans
        embedded = {plan: self.plan_embedding(plan, split=True) for plan in plans}
        vectors = [embedded[e.plan] if e.plan else None for e in entries]
        self.loop.add_verdicts(entries, vectors, self.embedder.name)
        feedback = self.loop.feedback(*self._model_info())
        for insight, reason in (feedback.keeps_misleading() if feedback else {}).items():
            self._retire_for(insight, reason)

    def _retire_for(self, insight: str, reason: str) -> None:
        """Retire a personal insight that keeps misleading, saying why in its notes (a team
        one is only left out of this memory's recalls)."""
        snapshot = self._snapshot()
        position = snapshot.positions.get(insight)
        if position is None or not snapshot.active[position]:
            return
        note = sql_string(f"{VERDICTS_NOTE}{reason}"[:NOTE_MAX])
        self.table.update(
            f"id = {sql_string(insight)}",
            {"status": "'retired'", "notes": appended_note(note)},
        )
        logger.info("retired %s: %s", insight, reason)
        self._changed()

    def reinstate(self, insight: str) -> Insight:
        """Undo a retirement (by ratings or session verdicts): the insight is recalled again,
        and verdicts given before now no longer count against it (they stay in its
        history)."""
        current = self.get(insight)
        self.loop.ledger.reinstate(insight)
        if current.source == "personal" and current.status != "active":
            note = sql_string(REINSTATED_NOTE)
            self.table.update(
                f"id = {sql_string(insight)}", {"status": "'active'", "notes": appended_note(note)}
            )
            self._changed()
        return self.get(insight)

    def sessions(self, limit: int = 20) -> builtins.list[SessionReport]:
        """The most recent sessions: what each was given and by which trigger, what was
        learnt from it, and the verdicts."""
        return loop_reports.sessions(self, limit)

    def learnt_in(self, session_id: str) -> builtins.list[Insight]:
        """The insights of your memory that one session produced or confirmed first."""
        snapshot = self._snapshot()
        rows = np.flatnonzero(snapshot.column_mask("session_id", [session_id]))
        return [Insight.model_validate(r) for r in snapshot.records([int(n) for n in rows])]

    def history(self, insight: str) -> InsightHistory:
        """One insight's feedback: its verdicts and the recalls that gave it, newest first."""
        return InsightHistory(
            recalls=self.loop.ledger.recalls(insight=insight, limit=50),
            verdicts=self.loop.ledger.verdicts(insight=insight),
        )
