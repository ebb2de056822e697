"""The closed loop of one memory: what reached a model (the ledger), and how it went.

A recall with an origin (a tool call, the plan-triggered hook, the session-start context)
is noted here and written to the ledger later, by `flush`: in the shared service every
couple of seconds, off the recall's path, so the ledger costs a recall nothing it waits on.
At session end the judge's verdicts on what the session was given come back through
`add_verdicts`, each with the plan the insight was recalled for.

A forget or a purge reaches what waits to be written too (`forget`, `scrub`), and waits for
a flush under way: nothing it removed is written back afterwards.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Collection, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol

from mtl_mcp.config import Settings
from mtl_mcp.errors import NotFoundError, StoreError, StoreReadOnly
from mtl_mcp.index.methods import plan_vector
from mtl_mcp.memory.feedback import FeedbackIndex, Verdict
from mtl_mcp.schemas import (
    GivenInsight,
    Insight,
    LearntInsight,
    LedgerHit,
    RecallEntry,
    RecallHit,
    RecallOrigin,
    SessionReport,
    Trigger,
    VerdictEntry,
)
from mtl_mcp.storage.ledger import LEDGER_FILE, Ledger
from mtl_mcp.text.redact import redact

logger = logging.getLogger(__name__)

PENDING_MAX = 1000  # recalls kept for the ledger while it cannot be written
LATE_SECONDS = 600.0  # how long a recall its hook gave up on is kept for the next try
LATE_MAX = 100

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from mtl_mcp.index.embedder import Embedder


class Loop:
    """The ledger of one data directory, with the recalls not yet written to it."""

    def __init__(self, settings: Settings) -> None:
        self.ledger = Ledger(settings.home / LEDGER_FILE)
        self._lock = threading.Lock()
        self._writing = threading.Lock()  # a flush under way; forget and scrub wait for it
        self._pending: list[RecallEntry] = []
        self._unwritable = False  # a read-only data directory refused the ledger (logged)
        self._unreadable_logged = False  # the ledger failed (said once until it works again)
        # ((verdicts' stamp, model, dim), index)
        self._feedback: tuple[tuple[int, str, int], FeedbackIndex | None] | None = None
        self._set_aside_logged = False  # verdicts of another model were left out (said once)
        # (session, plan, project) -> (when, hits): recalls done after their hook gave up
        self._late: dict[tuple[str, str, str | None], tuple[float, list[RecallHit]]] = {}

    def note(
        self,
        origin: RecallOrigin,
        plan: str,
        project: str | None,
        hits: Sequence[RecallHit],
        at: datetime | None = None,
    ) -> None:
        """Remember a recall that reached a model `at` (default now), written by the next
        `flush`."""
        entry = RecallEntry(
            at=at or datetime.now(UTC),
            session_id=origin.session_id,
            client=origin.client,
            trigger=origin.trigger,
            plan=redact(plan),
            project=project,
            hits=[LedgerHit(id=h.id, score=round(h.score, 4)) for h in hits],
        )
        with self._lock:
            self._pending.append(entry)

    def keep_late(
        self, session: str | None, plan: str, project: str | None, hits: Sequence[RecallHit]
    ) -> None:
        """Keep a recall whose hook gave up before it was done, for that session's next try
        with the same plan (no model saw it: the ledger does not record it)."""
        if session is None:
            return
        now = time.monotonic()
        with self._lock:
            for key in [k for k, (at, _) in self._late.items() if now - at > LATE_SECONDS]:
                del self._late[key]
            self._late[session, plan, project] = (now, list(hits))
            while len(self._late) > LATE_MAX:
                del self._late[next(iter(self._late))]

    def take_late(
        self, session: str | None, plan: str, project: str | None
    ) -> list[RecallHit] | None:
        """The recall `keep_late` kept for this session and plan, once; None if none."""
        if session is None:
            return None
        with self._lock:
            found = self._late.pop((session, plan, project), None)
        if found is None or time.monotonic() - found[0] > LATE_SECONDS:
            return None
        return found[1]

    def flush(self) -> None:
        """Write the recalls noted since the last flush; kept for the next one while the
        ledger cannot take them (at most PENDING_MAX; said once, not at every flush),
        dropped when the data directory is read-only (said once)."""
        with self._writing:
            self._flush()

    def _flush(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, []
        try:
            self.ledger.add_recalls(pending)
        except StoreReadOnly as exc:
            if not self._unwritable:
                logger.info("the recall ledger is not written: %s", exc)
            self._unwritable = True
        except BaseException as exc:
            with self._lock:
                self._pending[:0] = pending
                del self._pending[:-PENDING_MAX]
            if not isinstance(exc, StoreError):
                raise
            if not self._unreadable_logged:
                logger.warning("the recall ledger is not written now (kept for later): %s", exc)
            self._unreadable_logged = True
        else:
            if pending:  # written: a problem from now on is said again
                self._unreadable_logged = False

    def _unwritten(self, session_id: str | None) -> list[RecallEntry]:
        with self._lock:
            return [e for e in self._pending if e.session_id == session_id]

    def session_recalls(self, session_id: str) -> list[RecallEntry]:
        """Every recall of one session, newest first, those not yet written included."""
        unwritten = list(reversed(self._unwritten(session_id)))
        return unwritten + self.ledger.recalls(session_id=session_id)

    def latest_plan(self, project: str) -> str | None:
        """The newest plan recalled for in a project (a tool call or the hook), those not
        yet written included; None while the ledger cannot be read (`_unreadable`)."""
        with self._lock:
            for entry in reversed(self._pending):
                if entry.project == project and entry.plan and entry.trigger != "session-start":
                    return entry.plan
        try:
            return self.ledger.latest_plan(project)
        except StoreError as exc:
            self._unreadable(exc)
            return None

    def recent_sessions(self, limit: int) -> list[str]:
        """The most recent sessions with a recall or a verdict, newest first, those whose
        recalls are not yet written included."""
        with self._lock:
            unwritten = [e.session_id for e in reversed(self._pending) if e.session_id]
        found = list(dict.fromkeys([*unwritten, *self.ledger.sessions(limit)]))
        return found[:limit]

    def shown(self, session_id: str) -> set[str]:
        """The insights already put in front of the model in one session (those this
        process knows of, while the ledger cannot be read: `_unreadable`)."""
        try:
            recalls = self.session_recalls(session_id)
        except StoreError as exc:
            self._unreadable(exc)
            recalls = self._unwritten(session_id)
        return {hit.id for entry in recalls for hit in entry.hits}

    def add_verdicts(
        self,
        entries: Sequence[VerdictEntry],
        vectors: Sequence[npt.NDArray[np.float32] | None],
        model: str,
    ) -> None:
        self.ledger.add_verdicts(entries, vectors, model)

    def feedback(self, model: str, dim: int) -> FeedbackIndex | None:
        """The verdicts that count, indexed for recall with embedding model `model` of `dim`
        dimensions (None when there are none): those with a plan embedded by that model,
        less those given before a person reinstated their insight. Rebuilt only when
        verdicts changed, in any process. None too while the ledger cannot be read
        (`_unreadable`): feedback is left out, recall goes on."""
        stamp = (self.ledger.verdict_stamp(), model, dim)
        cached = self._feedback
        if cached is not None and cached[0] == stamp:
            return cached[1]
        try:
            reinstated = self.ledger.reinstatements()
            rows = self.ledger.verdict_vectors(model, dim)
            verdicts = [
                Verdict(e.insight, e.verdict, vector, e.session_id, e.mode)
                for e, vector in rows
                if vector is not None
                and not (e.insight in reinstated and e.at <= reinstated[e.insight])
            ]
            index = FeedbackIndex(verdicts) if verdicts else None
        except (StoreError, ValueError) as exc:  # ValueError: rows numpy cannot stack
            self._unreadable(exc)
            return None  # not cached: once the ledger reads again, so does feedback
        if skipped := sum(vector is None and e.plan is not None for e, vector in rows):
            self._set_aside(skipped, model)
        self._feedback = (stamp, index)
        return index

    def _set_aside(self, count: int, model: str) -> None:
        """Verdicts whose plans another model embedded count for nothing until `reindex`
        embeds them again with this one: said once per process."""
        if not self._set_aside_logged:
            logger.warning(
                "%d session verdicts were embedded with another model than %s and are left "
                "out of feedback: run `mtl-mcp reindex` to embed their plans again",
                count,
                model,
            )
        self._set_aside_logged = True

    def reembed(self, embedder: Embedder, progress: Callable[[int], None] | None = None) -> int:
        """Embed the verdicts' plans again with `embedder`, where another model made them
        (`Ledger.reembed`): after a change of model, feedback counts them again. How many."""
        count = self.ledger.reembed(
            lambda plan: plan_vector(embedder, plan, split=True), embedder.name, progress
        )
        self._feedback = None
        self._set_aside_logged = False
        return count

    def _unreadable(self, exc: Exception) -> None:
        """The ledger holds only history: a damaged or busy one must not take recall down
        with it (`sessions`, `stats` and `show` still say what to do). Logged once."""
        if not self._unreadable_logged:
            logger.warning("recall goes on without the ledger's verdicts and history: %s", exc)
        self._unreadable_logged = True

    def forget(self, ids: Collection[str]) -> int:
        """Remove every ledger row about these insights, written or not: as in the ledger,
        a recall that gave nothing else goes too (its plan matched them)."""
        with self._writing:
            with self._lock:
                kept = []
                for entry in self._pending:
                    hits = [h for h in entry.hits if h.id not in ids]
                    if hits or not entry.hits:
                        kept.append(entry.model_copy(update={"hits": hits}))
                self._pending = kept
                self._late = {
                    key: (at, hits)
                    for key, (at, hits) in self._late.items()
                    if not any(h.id in ids for h in hits)
                }
            return self.ledger.forget(ids)

    def scrub(self, pattern: re.Pattern[str]) -> int:
        """Remove the recalls and verdicts whose text matches `pattern`, written or not;
        returns how many."""
        with self._writing:
            with self._lock:
                before = len(self._pending)
                self._pending = [
                    e
                    for e in self._pending
                    if not (pattern.search(e.plan or "") or pattern.search(e.project or ""))
                ]
                dropped = before - len(self._pending)
                self._late = {
                    (session, plan, project): kept
                    for (session, plan, project), kept in self._late.items()
                    if not (pattern.search(plan) or pattern.search(project or ""))
                }
            return dropped + self.ledger.scrub(pattern)


class Reports(Protocol):
    """What the reports below read: `Memory`."""

    loop: Loop

    def get(self, insight: str) -> Insight: ...

    def learnt_in(self, session_id: str) -> list[Insight]: ...


def given(memory: Reports, session_id: str) -> list[GivenInsight]:
    """`Memory.given_insights`."""
    plans: dict[str, tuple[str | None, Trigger]] = {}
    for entry in reversed(memory.loop.session_recalls(session_id)):  # oldest first
        for hit in entry.hits:
            if entry.plan or hit.id not in plans:  # the latest plan it was recalled for
                plans[hit.id] = (entry.plan or None, entry.trigger)
    found = []
    for insight_id, (plan, trigger) in plans.items():
        try:
            insight = memory.get(insight_id)
        except NotFoundError:  # forgotten since
            continue
        found.append(
            GivenInsight(
                id=insight.id,
                title=insight.title,
                content=insight.content,
                plan=plan,
                trigger=trigger,
            )
        )
    return found


def sessions(memory: Reports, limit: int) -> list[SessionReport]:
    """`Memory.sessions`."""
    ledger = memory.loop.ledger
    reports = []
    for session_id in memory.loop.recent_sessions(limit):
        recalls = list(reversed(memory.loop.session_recalls(session_id)))
        verdicts = ledger.verdicts(session_id=session_id)
        recalled = {hit.id for entry in recalls for hit in entry.hits}
        titles = {}
        for insight_id in sorted(recalled | {v.insight for v in verdicts}):
            try:
                titles[insight_id] = memory.get(insight_id).title
            except NotFoundError:
                titles[insight_id] = "(forgotten)"
        times = [e.at for e in recalls] + [v.at for v in verdicts]
        reports.append(
            SessionReport(
                session_id=session_id,
                client=next((e.client for e in recalls if e.client), None),
                project=next((e.project for e in recalls if e.project), None),
                first_at=min(times) if times else None,
                last_at=max(times) if times else None,
                recalls=recalls,
                titles=titles,
                learnt=[
                    LearntInsight(id=i.id, title=i.title) for i in memory.learnt_in(session_id)
                ],
                verdicts=verdicts,
            )
        )
    return reports
