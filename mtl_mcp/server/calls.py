"""Library calls over the service socket, for the CLI and the hooks: the same `Memory`
methods, without loading the model, the store or the MCP SDK in the calling process.

The service answers `{"ok": true, "result": ...}` or `{"ok": false, "error": {"type": ...,
"message": ...}}`; `ServiceMemory` turns those back into models and our own errors.
"""

from __future__ import annotations

import builtins
import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import anyio

from mtl_mcp import errors
from mtl_mcp.config import Settings, private_umask
from mtl_mcp.errors import MtlError
from mtl_mcp.operations.context import write_project_context
from mtl_mcp.operations.service import ServiceUnavailable, ensure_service, request
from mtl_mcp.project import resolve_project
from mtl_mcp.schemas import (
    GivenInsight,
    Insight,
    InsightDraft,
    InsightHistory,
    NearInsight,
    Provenance,
    RecallHit,
    RecallOrigin,
    RecordResult,
    SessionReport,
    VerdictEntry,
)
from mtl_mcp.text.render import plan_notes_text

if TYPE_CHECKING:
    from mtl_mcp.memory import Memory
    from mtl_mcp.server.keeper import MemoryKeeper

logger = logging.getLogger(__name__)


def _recall(memory: Memory, params: dict[str, Any]) -> Any:
    return [hit.model_dump(mode="json") for hit in memory.recall(**params)]


def _session_recall(memory: Memory, params: dict[str, Any]) -> Any:
    """The plan-triggered hook's recall: the hits, and the notes to show, framed. Past the
    hook's `deadline` (epoch seconds) the hook has given up: the answer is `late`, and the
    ledger does not record a recall no model saw."""
    origin = RecallOrigin.model_validate(params.pop("origin"))
    deadline = params.pop("deadline", None)
    on_time = (lambda: time.time() <= deadline) if isinstance(deadline, int | float) else None
    hits = memory.recall_for_session(origin=origin, on_time=on_time, **params)
    if hits is None:
        return {"late": True}
    return {"ids": [h.id for h in hits], "notes": plan_notes_text(hits) if hits else ""}


def _given(memory: Memory, params: dict[str, Any]) -> Any:
    return [g.model_dump(mode="json") for g in memory.given_insights(params["session_id"])]


def _sessions(memory: Memory, params: dict[str, Any]) -> Any:
    return [r.model_dump(mode="json") for r in memory.sessions(int(params.get("limit", 20)))]


def _history(memory: Memory, params: dict[str, Any]) -> Any:
    return memory.history(params["insight"]).model_dump(mode="json")


def _verdicts(memory: Memory, params: dict[str, Any]) -> Any:
    memory.record_verdicts([VerdictEntry.model_validate(v) for v in params["verdicts"]])
    return None


def _list(memory: Memory, params: dict[str, Any]) -> Any:
    items, total = memory.list(**params)
    return [[item.model_dump(mode="json") for item in items], total]


def _get(memory: Memory, params: dict[str, Any]) -> Any:
    return memory.get(params["insight"]).model_dump(mode="json")


def _stats(memory: Memory, params: dict[str, Any]) -> Any:
    return memory.stats()


def _team_notice(memory: Memory, params: dict[str, Any]) -> Any:
    return memory.team_notice()


def _record(memory: Memory, params: dict[str, Any]) -> Any:
    provenance = Provenance.model_validate(params["provenance"])
    results = memory.record(params["drafts"], provenance, params.get("project_name"))
    return [result.model_dump(mode="json") for result in results]


def _rate(memory: Memory, params: dict[str, Any]) -> Any:
    insight = memory.rate(params["insight"], params["helpful"], params.get("note"))
    return insight.model_dump(mode="json")


def _reinstate(memory: Memory, params: dict[str, Any]) -> Any:
    return memory.reinstate(params["insight"]).model_dump(mode="json")


def _forget(memory: Memory, params: dict[str, Any]) -> Any:
    return memory.forget(params["insight"]).model_dump(mode="json")


def _nearest(memory: Memory, params: dict[str, Any]) -> Any:
    return [n.model_dump(mode="json") for n in memory.nearest(params["text"], int(params["k"]))]


def _confirm(memory: Memory, params: dict[str, Any]) -> Any:
    provenance = Provenance.model_validate(params["provenance"])
    return [r.model_dump(mode="json") for r in memory.confirm(params["ids"], provenance)]


def _context(memory: Memory, params: dict[str, Any]) -> Any:
    project = resolve_project(params.get("project_dir") or ".")
    min_p = params.get("min_p")
    context = write_project_context(
        memory, project, float(min_p) if isinstance(min_p, int | float) else None
    )
    if origin := params.get("origin"):
        memory.note_shown(RecallOrigin.model_validate(origin), context.ids, project.id)
    return {"text": context.text, "ids": context.ids}


# method -> what the service does with its memory and the call's params (JSON in, JSON out).
_METHODS: dict[str, Callable[[Memory, dict[str, Any]], Any]] = {
    "recall": _recall,
    "session_recall": _session_recall,
    "given": _given,
    "verdicts": _verdicts,
    "sessions": _sessions,
    "history": _history,
    "list": _list,
    "get": _get,
    "stats": _stats,
    "team_notice": _team_notice,
    "record": _record,
    "rate": _rate,
    "reinstate": _reinstate,
    "forget": _forget,
    "context": _context,
    "nearest": _nearest,
    "confirm": _confirm,
}


async def answer_call(keeper: MemoryKeeper, method: Any, params: Any) -> dict[str, Any]:
    """Run one library call against the service's memory."""
    if method not in _METHODS or not isinstance(params, dict):
        return {"ok": False, "error": {"type": "InputError", "message": f"no call {method!r}"}}
    work = _METHODS[method]
    try:
        with keeper.asked():
            result = await anyio.to_thread.run_sync(lambda: work(keeper.get(), params))
    except MtlError as exc:
        return {"ok": False, "error": {"type": type(exc).__name__, "message": str(exc)}}
    return {"ok": True, "result": result}


class ServiceMemory:
    """The queries and small writes of `Memory`, answered by the running service."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    @classmethod
    def running(cls, settings: Settings) -> ServiceMemory | None:
        """A handle on the service for these settings if one runs now (this never starts
        one; a service with other settings refuses, and this is None)."""
        reply = request(settings, "status", timeout=2.0)
        return cls(settings) if reply and reply.get("ok") else None

    @classmethod
    def started(cls, settings: Settings) -> ServiceMemory | None:
        """A handle on the service for these settings, started if none runs: detached,
        behind the spawn lock, as a window starts it (so the first call pays the start, and
        later ones find the model warm). None if it cannot start: the caller works
        in-process, as with MTL_MCP_SERVICE=off."""
        private_umask()  # the run folders and the log it may create are the owner's only
        try:
            sock, _ = ensure_service(settings, "status")
        except ServiceUnavailable as exc:
            logger.info("working in-process: %s", exc)
            return None
        sock.close()
        return cls(settings)

    def _call(self, method: str, **params: Any) -> Any:
        reply = request(self.settings, "call", method=method, params=params)
        if reply is None:
            raise MtlError("the mtl-mcp service stopped while answering: run the command again")
        if not reply.get("ok"):
            error = reply.get("error") or {}
            if not isinstance(error, dict):  # the service refused the hello itself
                raise MtlError(f"the mtl-mcp service refused: {error}; run the command again")
            kind = getattr(errors, str(error.get("type")), MtlError)
            raise (kind if isinstance(kind, type) and issubclass(kind, MtlError) else MtlError)(
                str(error.get("message", "the service failed"))
            )
        return reply["result"]

    def recall(
        self,
        plan: str,
        k: int = 3,
        scope: str = "all",
        project: str | None = None,
        domains: Sequence[str] | None = None,
    ) -> list[RecallHit]:
        hits = self._call(
            "recall", plan=plan, k=k, scope=scope, project=project, domains=list(domains or [])
        )
        return [RecallHit.model_validate(h) for h in hits]

    def list(self, **filters: Any) -> tuple[list[Insight], int]:
        items, total = self._call("list", **filters)
        return [Insight.model_validate(i) for i in items], int(total)

    def get(self, insight: str) -> Insight:
        return Insight.model_validate(self._call("get", insight=insight))

    def stats(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("stats")
        return result

    def team_notice(self) -> str | None:
        notice: str | None = self._call("team_notice")
        return notice

    def record(
        self,
        drafts: Sequence[InsightDraft | dict[str, Any]],
        provenance: Provenance | None = None,
        project_name: str | None = None,
    ) -> builtins.list[RecordResult]:
        results = self._call(
            "record",
            drafts=[
                d.model_dump(mode="json") if isinstance(d, InsightDraft) else d for d in drafts
            ],
            provenance=(provenance or Provenance()).model_dump(mode="json"),
            project_name=project_name,
        )
        return [RecordResult.model_validate(r) for r in results]

    def rate(self, insight: str, helpful: bool, note: str | None = None) -> Insight:
        return Insight.model_validate(
            self._call("rate", insight=insight, helpful=helpful, note=note)
        )

    def forget(self, insight: str) -> Insight:
        return Insight.model_validate(self._call("forget", insight=insight))

    def reinstate(self, insight: str) -> Insight:
        return Insight.model_validate(self._call("reinstate", insight=insight))

    def sessions(self, limit: int = 20) -> builtins.list[SessionReport]:
        return [SessionReport.model_validate(r) for r in self._call("sessions", limit=limit)]

    def history(self, insight: str) -> InsightHistory:
        return InsightHistory.model_validate(self._call("history", insight=insight))

    def given_insights(self, session_id: str) -> builtins.list[GivenInsight]:
        given = self._call("given", session_id=session_id)
        return [GivenInsight.model_validate(g) for g in given]

    def record_verdicts(self, entries: Sequence[VerdictEntry]) -> None:
        self._call("verdicts", verdicts=[e.model_dump(mode="json") for e in entries])

    def nearest(self, text: str, k: int = 5) -> builtins.list[NearInsight]:
        return [NearInsight.model_validate(n) for n in self._call("nearest", text=text, k=k)]

    def confirm(
        self, ids: Sequence[str], provenance: Provenance | None = None
    ) -> builtins.list[RecordResult]:
        results = self._call(
            "confirm",
            ids=list(ids),
            provenance=(provenance or Provenance()).model_dump(mode="json"),
        )
        return [RecordResult.model_validate(r) for r in results]
