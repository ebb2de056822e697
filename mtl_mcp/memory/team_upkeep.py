"""Consolidating the team pool: once, by one member at a time, however many machines try.

Members' services all go idle, and each would consolidate the pool. A lease in the pool's
meta table makes it happen once: a member takes it by a compare-and-swap of the entry
(`InsightTable.meta_swap`: LanceDB's commit protocol lets exactly one of two racing
writers through), holds it for LEASE_SECONDS at most (a member that dies mid-pass loses it
then), and releases it when done. Whoever holds it first checks when the pool was last
consolidated: an idle pass within `consolidate_every_hours` of the last is skipped, so the
second member to go idle finds the work done.

The pass is the personal one (`consolidation_plan`) without retiring unused lessons: which
team lessons sessions used is in each member's own ledger, not in the pool. Changes are SQL
increments and status updates, as every writer of the pool makes (never a read-modify-
write that would lose a member's concurrent share); the run, with what undoing it needs,
is a meta entry of the pool, so any member can list it and undo it.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from mtl_mcp.errors import StoreBusy
from mtl_mcp.memory.consolidation_plan import Plan
from mtl_mcp.memory.ingest import union_sql
from mtl_mcp.schemas import ConsolidationRun
from mtl_mcp.storage.runs import Undo
from mtl_mcp.storage.schema import SHARED_BY, ids_predicate, sql_string
from mtl_mcp.storage.table import InsightTable

LEASE_KEY = "consolidation_lease"
LAST_KEY = "consolidation_last"
RUN_PREFIX = "consolidation_run:"
LEASE_SECONDS = 600.0
COUNTERS = ("support", "helpful", "harmful", "recall_count")
LISTS = (SHARED_BY, "projects", "tags", "languages")


@contextmanager
def lease(table: InsightTable, holder: str, now: datetime) -> Iterator[None]:
    """Hold the pool's consolidation lease for the block; StoreBusy if another member
    holds it (see the module docstring)."""
    mine = json.dumps(
        {
            "holder": holder,
            "token": secrets.token_hex(8),
            "until": (now + timedelta(seconds=LEASE_SECONDS)).isoformat(),
        }
    )
    current = table.meta_value(LEASE_KEY)
    if current is not None and _until(current) > now:
        raise StoreBusy("another member is consolidating the team pool now: it is done once")
    if not table.meta_swap(LEASE_KEY, current, mine):
        raise StoreBusy("another member started consolidating the team pool first")
    try:
        yield
    finally:
        released = json.dumps({"holder": holder, "until": now.isoformat()})
        table.meta_swap(LEASE_KEY, mine, released)


def _until(value: str) -> datetime:
    try:
        return datetime.fromisoformat(json.loads(value)["until"])
    except (ValueError, KeyError, TypeError):
        return datetime.min.replace(tzinfo=UTC)  # unreadable: expired


def last_pass(table: InsightTable) -> datetime | None:
    value = table.meta_value(LAST_KEY)
    try:
        return datetime.fromisoformat(value) if value else None
    except ValueError:
        return None


def mark_pass(table: InsightTable, now: datetime) -> None:
    table.set_meta({LAST_KEY: now.isoformat()})


def runs(table: InsightTable) -> list[tuple[ConsolidationRun, Undo]]:
    """The pool's runs, newest first."""
    found = []
    for value in table.meta_entries(RUN_PREFIX).values():
        try:
            data = json.loads(value)
        except ValueError:
            continue
        found.append(
            (ConsolidationRun.model_validate(data), Undo.from_json(data.get("undo") or {}))
        )
    return sorted(found, key=lambda pair: pair[0].run, reverse=True)


def save(table: InsightTable, run: ConsolidationRun, undo: Undo) -> None:
    data = {**run.model_dump(mode="json"), "undo": undo.to_json()}
    table.set_meta({RUN_PREFIX + run.run: json.dumps(data, ensure_ascii=False)})


def apply(table: InsightTable, plan: Plan) -> Undo:
    """The plan's changes to the pool, as SQL updates; what undoes them."""
    undo = Undo()
    touched = {i for m in plan.merges for i in [m.kept, *m.members]}
    touched |= {old for old, _, _ in plan.superseded}
    columns = ["id", "status", *COUNTERS, *LISTS]
    fresh = {r["id"]: r for r in table.read(ids_predicate(touched), columns)} if touched else {}
    retired: list[str] = []
    for merge in plan.merges:
        members = [fresh[i] for i in merge.members if i in fresh]
        if merge.kept not in fresh or not members:
            continue
        kept = fresh[merge.kept]
        added: dict[str, Any] = {n: sum(int(m[n] or 0) for m in members) for n in COUNTERS}
        values = {n: f"{n} + {added[n]}" for n in COUNTERS}
        for name in LISTS:
            have = set(kept[name] or [])
            new = list(dict.fromkeys(v for m in members for v in m[name] or [] if v not in have))
            added[name] = new
            values[name] = union_sql(name, new)
        table.update(f"id = {sql_string(merge.kept)}", values)
        undo.added[merge.kept] = added
        undo.before[merge.kept] = {}
        retired += [m["id"] for m in members]
    retired += [old for old, _, _ in plan.superseded if old in fresh]
    for insight in retired:
        undo.before[insight] = {"status": fresh[insight]["status"]}
    if retired:
        table.update(f"{ids_predicate(retired)} AND status = 'active'", {"status": "'retired'"})
    return undo


def undo(table: InsightTable, undo: Undo) -> None:
    """Take one run's changes back from the pool (what members did since stays)."""
    for insight, added in undo.added.items():
        values = {n: f"greatest({n} - {int(added.get(n, 0))}, 0)" for n in COUNTERS}
        for name in LISTS:
            if gone := list(added.get(name) or []):
                listed = ", ".join(sql_string(v) for v in gone)
                values[name] = f"array_except(coalesce({name}, make_array()), make_array({listed}))"
        table.update(f"id = {sql_string(insight)}", values)
    back = [i for i, before in undo.before.items() if before.get("status") == "active"]
    if back:
        table.update(ids_predicate(back), {"status": "'active'"})
