"""What the insight page's buttons do: one `Memory` call each, with the request's body
checked first (our error, in our words, for a wrong one). Forget and purge need the
insight's id repeated as `confirm`: the page asks the person before it sends it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mtl_mcp.dashboard.views import told
from mtl_mcp.errors import InputError

if TYPE_CHECKING:
    from mtl_mcp.memory import Memory


def edit(memory: Memory, insight_id: str, data: dict[str, Any]) -> Any:
    fields = data.get("fields")
    if not isinstance(fields, dict):
        raise InputError("send the fields to change as an object: {'fields': {...}}")
    return memory.revise(insight_id, fields)


def rate(memory: Memory, insight_id: str, data: dict[str, Any]) -> Any:
    helpful = data.get("helpful")
    if not isinstance(helpful, bool):
        raise InputError("say whether it helped: {'helpful': true} or false")
    note = data.get("note")
    return memory.rate(insight_id, helpful, note if isinstance(note, str) else None)


def retire(memory: Memory, insight_id: str, data: dict[str, Any]) -> Any:
    reason = data.get("reason")
    return memory.retire(insight_id, reason if isinstance(reason, str) else None)


def restore(memory: Memory, insight_id: str, data: dict[str, Any]) -> Any:
    return memory.reinstate(insight_id)


def confirmed(insight_id: str, data: dict[str, Any], deed: str) -> None:
    if data.get("confirm") != insight_id:
        raise InputError(f"{deed} needs a confirmation: send {{'confirm': '<the id>'}}")


def forget(memory: Memory, insight_id: str, data: dict[str, Any]) -> Any:
    confirmed(insight_id, data, "forgetting")
    gone = memory.forget(insight_id)
    return {"id": gone.id, "title": gone.title, "forgotten": True}


def purge(memory: Memory, insight_id: str, data: dict[str, Any]) -> Any:
    confirmed(insight_id, data, "purging")
    from mtl_mcp.operations.purge import insight_to_purge, purge_insight

    report = purge_insight(memory, insight_to_purge(memory, insight_id))
    return {
        "ids": report.ids,
        "versions_removed": report.versions_removed,
        "scrubbed_files": len(report.scrubbed_files),
        "traces": len(report.traces),
        "team_ids": report.team_ids,
    }


def share(memory: Memory, insight_id: str, data: dict[str, Any]) -> Any:
    from mtl_mcp.memory.sharing import SharePolicy

    policy = SharePolicy() if data.get("policy", True) else None
    dry_run = bool(data.get("dry_run", False))
    results = memory.share([insight_id], dry_run=dry_run, policy=policy)[:1]
    # A reason may quote the pool's error (queued: it did not answer): told, as errors are.
    return [
        r.model_copy(update={"reasons": [told(x, memory.settings) for x in r.reasons]})
        for r in results
    ]


ACTIONS: dict[str, Callable[[Memory, str, dict[str, Any]], Any]] = {
    "edit": edit,
    "rate": rate,
    "retire": retire,
    "restore": restore,
    "forget": forget,
    "purge": purge,
    "share": share,
}
