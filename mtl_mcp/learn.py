"""From a session digest to stored insights: budget check, distillation, lint, dedup, store."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mtl_mcp.config import Settings
from mtl_mcp.models import Outcome, Provenance, RecordResult
from mtl_mcp.project import ProjectRef

if TYPE_CHECKING:
    from mtl_mcp.distill import DistillResult
    from mtl_mcp.store import InsightStore


def distill_and_store(
    settings: Settings,
    digest: str,
    *,
    outcome_hint: Outcome,
    project: ProjectRef,
    provenance: Provenance,
    store: InsightStore,
) -> tuple[DistillResult, list[RecordResult]]:
    """Distil `digest` within today's token budget and record what comes out.

    Raises DistillError (BudgetExceeded, or a DistillCallError saying whether a retry may
    help); tokens spent by a failed call are still counted against the budget.
    """
    from mtl_mcp.distill import DistillCallError, distill, estimate_run_tokens
    from mtl_mcp.spend import SpendLedger

    ledger = SpendLedger(settings.home / "spend", settings.daily_token_budget)
    ledger.check(estimate_run_tokens(digest, outcome_hint=outcome_hint))
    try:
        result = distill(digest, settings, outcome_hint=outcome_hint, project_name=project.name)
    except DistillCallError as exc:
        ledger.record(exc.usage.total_tokens, session=provenance.session_id)
        raise
    ledger.record(result.usage.total_tokens, session=provenance.session_id)
    results = store.record(result.drafts, provenance, project_name=project.name)
    return result, results
