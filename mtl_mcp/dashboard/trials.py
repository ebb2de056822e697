"""The Trials page's data: the user's trials, and one trial's report with what it names.

A harm names the insights the memory arm showed where it failed and none passed: each comes
with its title and status from the user's memory (the trial ran on a copy of it), so the
page can link to the insight and offer to retire it through the usual retire action.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mtl_mcp.dashboard.views import shown
from mtl_mcp.errors import NotFoundError

if TYPE_CHECKING:
    from mtl_mcp.memory import Memory


def trial_list(memory: Memory) -> dict[str, Any]:
    from mtl_mcp.trials.manage import trial_summaries

    return {"trials": shown(trial_summaries(memory.settings))}


def trial_page(memory: Memory, trial_id: str) -> dict[str, Any]:
    from mtl_mcp.trials.manage import trial_report

    report = trial_report(memory.settings, trial_id)
    named = {i for harm in report["harms"] for i in harm["insights"]}
    insights = {}
    for insight_id in sorted(named):
        try:
            found = memory.get(insight_id)
        except NotFoundError:  # forgotten since, or a transfer pool's own note
            insights[insight_id] = {"id": insight_id, "title": None, "status": "gone", "own": False}
            continue
        insights[insight_id] = {
            "id": found.id,
            "title": found.title,
            "status": found.status,
            "own": found.source != "team",
        }
    return {"report": shown(report), "insights": shown(insights)}
