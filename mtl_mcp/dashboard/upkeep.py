"""What the upkeep page's buttons do: a consolidation pass (or its preview), and undoing a
run. Undoing needs the run's id repeated as `confirm`: the page asks the person first."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mtl_mcp.errors import InputError

if TYPE_CHECKING:
    from mtl_mcp.memory import Memory
    from mtl_mcp.schemas import ConsolidationRun


def run_pass(memory: Memory, data: dict[str, Any]) -> ConsolidationRun:
    """One pass now ({"dry_run": true}: what it would change); the distillation backend
    writes merges when one is configured, as `mtl-mcp consolidate` does."""
    dry_run = data.get("dry_run", False)
    if not isinstance(dry_run, bool):
        raise InputError("say whether it is a preview: {'dry_run': true} or false")
    merger = None
    if not dry_run:
        from mtl_mcp.learning.merging import cluster_merger

        merger = cluster_merger(memory.settings)
    return memory.consolidate(dry_run=dry_run, trigger="dashboard", merger=merger)


def undo(memory: Memory, run: str, data: dict[str, Any]) -> ConsolidationRun:
    if data.get("confirm") != run:
        raise InputError("undoing a run needs a confirmation: send {'confirm': '<the run id>'}")
    return memory.undo_consolidation(run)
