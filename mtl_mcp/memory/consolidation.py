"""Consolidation: keep a memory good over a year of sessions, reversibly.

A pass (`consolidate`) merges the paraphrases of one lesson into the best of them, retires
lessons a later one supersedes and lessons no session used for `retire_unused_days`, and
flags contradictions for the user (`consolidation_plan` decides; nothing is deleted). The
kept insight gains its members' support, ratings, recall counts, projects, tags and
languages, and their ledger rows (recalls and verdicts), so feedback follows the lesson;
members become retired insights whose notes name the run. With a `merger` (the
distillation backend, `mtl_mcp.learning.merging`), a cluster's text is written anew by the
model, as a new insight every member merges into.

Every run is a file (`storage.runs`) holding what undoing it needs; `undo_consolidation`
puts each row back as it was, less nothing that happened since (support and ratings gained
after the run stay), and moves the ledger rows back. A run can be undone once the runs
after it that touched the same insights are undone.

A pass holds one lock file per data directory (two processes never consolidate at once),
and the memory's write lock only for its one commit: records wait for that, recalls never
do (they read the snapshot); planning and the model's calls hold neither.
"""

from __future__ import annotations

import builtins
import contextlib
import logging
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

import mtl_mcp.memory.consolidation_plan as planning
import mtl_mcp.memory.ingest as ingest
import mtl_mcp.memory.team_upkeep as team_upkeep
from mtl_mcp.errors import (
    EmbeddingError,
    InputError,
    MtlError,
    NotFoundError,
    StoreBusy,
    StoreError,
)
from mtl_mcp.memory.core import NOTES_KEPT
from mtl_mcp.memory.upkeep import Upkeep
from mtl_mcp.schemas import (
    TAGS_MAX,
    ConsolidationChange,
    ConsolidationRun,
    Insight,
    InsightDraft,
    Provenance,
)
from mtl_mcp.storage.locks import try_exclusive
from mtl_mcp.storage.runs import RunFiles, Undo, new_run_id
from mtl_mcp.storage.schema import ids_predicate
from mtl_mcp.storage.snapshot import Snapshot

logger = logging.getLogger(__name__)

COUNTERS = ("support", "helpful", "harmful", "recall_count")
LISTS = {"projects": None, "tags": TAGS_MAX, "languages": 10}  # list columns and their caps
LOCK_FILE = "consolidate.lock"


class Merger(Protocol):
    """Writes one insight that says what a cluster of paraphrases says (a model), and
    weighs a flagged contradiction (its words join the flag; it decides nothing)."""

    name: str

    def __call__(self, insights: Sequence[Insight]) -> InsightDraft | None: ...

    def weigh(self, first: Insight, second: Insight) -> str | None: ...


class Consolidation(Upkeep):
    """Merge paraphrases, retire what is superseded or unused, flag contradictions; undo."""

    @property
    def runs(self) -> RunFiles:
        return RunFiles(self.settings.home)

    def consolidate(
        self,
        *,
        dry_run: bool = False,
        trigger: str = "cli",
        limit: int | None = None,
        merger: Merger | None = None,
    ) -> ConsolidationRun:
        """One pass over the active insights (see the module docstring); `dry_run` changes
        nothing and saves no run; `limit` bounds the merges of one pass (the largest
        clusters first: `more` says when some were left)."""
        start = time.perf_counter()
        with try_exclusive(self.settings.home / LOCK_FILE) as mine:
            if not mine:
                raise StoreBusy(
                    "another consolidation of this memory is running (the service's, or "
                    "another command's): try again when it has finished"
                )
            # Planning, and the model's calls, hold no lock recalls or records wait for.
            self.loop.flush()  # recalls not yet written count as use too
            now = self.clock()
            snapshot = self._snapshot()
            plan = planning.plan(
                snapshot,
                now=now,
                last_used=self.loop.ledger.last_used(),
                retire_days=self.settings.retire_unused_days,
                flagged=planning.flagged_by(self.runs.runs()),
                absorbed=planning.absorbed_by(self.runs.runs()),
                condemned=planning.condemned_in(snapshot, self.settings.retire_after_harmful),
                limit=limit,
            )
            written: dict[str, dict[str, Any]] = {}
            if merger is not None and not dry_run:
                plan.conflicts = [
                    (a, b, self._weighed(merger, a, b, why)) for a, b, why in plan.conflicts
                ]
                written = self._written(merger, snapshot, plan, now)
            run = describe(plan, new_run_id(now), now, trigger, dry_run)
            if not dry_run and plan:
                with self._lock:  # records wait for the one commit; recalls never do
                    undo = self._apply(run, plan, written)
                run.seconds = round(time.perf_counter() - start, 3)
                self.runs.save(run, undo)
            if not dry_run and not plan.more:
                self.runs.mark_pass(now)
        run.seconds = round(time.perf_counter() - start, 3)
        if not dry_run and plan:
            logger.info(
                "consolidation %s: %d merged, %d superseded, %d retired, %d conflicts",
                run.run,
                len(run.merged),
                len(run.superseded),
                len(run.retired),
                len(run.conflicts),
            )
            self._changed()
        return run

    def consolidate_team(
        self, *, dry_run: bool = False, trigger: str = "cli", limit: int | None = None
    ) -> ConsolidationRun | None:
        """One pass over the team pool (`team_upkeep`): once, under the pool's lease. None
        when nothing was shared yet, or (`trigger` "idle") when the pool was consolidated
        within `consolidate_every_hours`. StoreBusy while another member holds the lease."""
        team = self._team()
        if not team.table.exists():
            return None
        table = team.table
        table.open()
        now = self.clock()
        every = timedelta(hours=self.settings.consolidate_every_hours)

        def due() -> bool:
            last = team_upkeep.last_pass(table)
            return trigger != "idle" or last is None or now - last >= every

        if not due():
            return None
        if problem := team.model_problem(self._model_name):
            raise EmbeddingError(f"cannot consolidate the team pool: {problem}")
        with contextlib.ExitStack() as held:
            if not dry_run:
                held.enter_context(team_upkeep.lease(table, team.member(), now))
                if not due():  # another member finished a pass while we waited
                    return None
            snapshot = table.refresh()
            pool_runs = team_upkeep.runs(table)
            plan = planning.plan(
                snapshot,
                now=now,
                last_used={},
                retire_days=0,
                flagged=planning.flagged_by(pool_runs),
                absorbed=planning.absorbed_by(pool_runs),
                limit=limit,
            )
            run = describe(plan, new_run_id(now), now, trigger, dry_run)
            run.source = "team"
            if not dry_run:
                if plan:
                    team_upkeep.save(table, run, team_upkeep.apply(table, plan))
                if not plan.more:
                    team_upkeep.mark_pass(table, now)
                team.tier.adopt(table.snapshot())
        return run

    def _weighed(self, merger: Merger, first: str, second: str, why: str) -> str:
        """A flag's reason, with what the model makes of the pair when it says."""
        try:
            opinion = merger.weigh(self.get(first), self.get(second))
        except Exception as exc:  # the flag stands without the model's opinion
            logger.warning("%s did not weigh %s and %s: %s", merger.name, first, second, exc)
            return why
        return f"{why}; {opinion}"[:500] if opinion else why

    def consolidation_runs(self, limit: int = 50) -> builtins.list[ConsolidationRun]:
        """The runs that changed something, newest first: this memory's, and the team
        pool's when one is configured and answers."""
        found = [run for run, _ in self.runs.runs(limit)]
        found += [run for run, _ in self._team_runs()]
        return sorted(found, key=lambda run: run.run, reverse=True)[:limit]

    def consolidation_run(self, run: str) -> ConsolidationRun:
        try:
            return self.runs.load(run)[0]
        except NotFoundError:
            for found, _ in self._team_runs():
                if found.run == run:
                    return found
            raise

    def _team_runs(self) -> builtins.list[tuple[ConsolidationRun, Undo]]:
        if self.team is None or not self.team.table.exists():
            return []
        try:
            return team_upkeep.runs(self.team.table)
        except MtlError as exc:
            logger.info("the team pool's consolidation runs are not shown: %s", exc)
            return []

    def open_conflicts(self) -> builtins.list[ConsolidationChange]:
        """Conflicts flagged by runs not undone whose two sides are both still active."""
        snapshot = self._snapshot()
        active = {i for i, n in snapshot.positions.items() if snapshot.active[n]}
        found: dict[frozenset[str], ConsolidationChange] = {}
        for run, _ in self.runs.runs():
            if run.undone_at is not None:
                continue
            for change in run.changes:
                pair = frozenset([change.id, *change.others])
                if change.kind == "conflict" and pair <= active:
                    found.setdefault(pair, change)
        return list(found.values())

    # -- applying -----------------------------------------------------------------------------

    def _apply(
        self, run: ConsolidationRun, plan: planning.Plan, written: dict[str, dict[str, Any]]
    ) -> Undo:
        """Write the plan's changes in one commit, move the ledger rows; what undoes it.
        Rows are read afresh: what records did since the plan (support gained) is kept.
        `written`: new rows the model wrote for some merges, by the kept id they replace."""
        undo = Undo()
        touched = {i for m in plan.merges for i in [m.kept, *m.members]}
        touched |= {old for old, _, _ in plan.superseded} | {i for i, _ in plan.retired}
        fresh = (
            {r["id"]: r for r in self.table.read(ids_predicate(touched), self._columns())}
            if touched  # a pass that only flags conflicts changes no row
            else {}
        )
        changed: dict[str, dict[str, Any]] = {}
        moves: dict[str, str] = {}

        def note(insight: str, text: str) -> None:
            row = changed.setdefault(insight, fresh[insight])
            undo.before.setdefault(insight, _kept_fields(row))
            undo.notes.setdefault(insight, []).append(text)
            row["notes"] = [*(row.get("notes") or []), text][-NOTES_KEPT:]

        def retire(insight: str, text: str) -> None:
            if insight not in fresh:
                return  # purged meanwhile
            note(insight, text)
            undo.before[insight].setdefault("status", fresh[insight]["status"])
            changed[insight]["status"] = "retired"

        for merge in plan.merges:
            group = [fresh[i] for i in [merge.kept, *merge.members] if i in fresh]
            if len(group) < 2:
                continue
            new_row = written.get(merge.kept)
            kept = dict(new_row) if new_row is not None else fresh[merge.kept]
            if new_row is not None:
                undo.created.append(kept["id"])
                fresh[kept["id"]] = kept
                changed[kept["id"]] = kept
            members = [row for row in group if row["id"] != kept["id"]]
            note(kept["id"], f"consolidation {run.run}: {len(members)} other wordings merged in")
            undo.added[kept["id"]] = _absorb(kept, members)
            undo.written[kept["id"]] = kept["updated_at"].isoformat()
            if new_row is not None:
                plan.titles[kept["id"]] = kept["title"]
                merge.kept = kept["id"]
                merge.members = [row["id"] for row in members]
                run.merged = [(m.kept, m.members) for m in plan.merges]
                run.changes = describe(plan, run.run, run.at, run.trigger, False).changes
            for member in members:
                retire(member["id"], f"consolidation {run.run}: merged into {kept['id']}")
                moves[member["id"]] = kept["id"]
        for old, new, why in plan.superseded:
            retire(old, f"consolidation {run.run}: superseded by {new} ({why})"[:500])
        for insight, why in plan.retired:
            retire(insight, f"consolidation {run.run}: retired, {why}"[:500])
        created = [changed.pop(i) for i in undo.created]
        self.table.insert(created)
        self.table.upsert(list(changed.values()))
        try:
            undo.ledger = self.loop.ledger.move(moves)
        except StoreError as exc:  # the insights are consolidated; their history stays put
            logger.warning("the ledger rows of merged insights were not moved: %s", exc)
        return undo

    def _columns(self) -> builtins.list[str]:
        return list(self.table.open().schema.names)

    def _written(
        self,
        merger: Merger,
        snapshot: Snapshot,
        plan: planning.Plan,
        now: datetime,
    ) -> dict[str, dict[str, Any]]:
        """New rows with the text the model wrote for each merge, by the kept id they
        replace; a merge is left out when the model does not answer, its answer fails the
        lint, or it says what a member says word for word."""
        found: dict[str, dict[str, Any]] = {}
        for merge in plan.merges:
            positions = [snapshot.positions[i] for i in [merge.kept, *merge.members]]
            group = snapshot.records(positions)
            try:
                draft = merger([Insight.model_validate(row) for row in group])
            except Exception as exc:  # a model's failure costs the merge its new wording only
                logger.warning("%s did not write the merge of %s: %s", merger.name, merge.kept, exc)
                continue
            if draft is None:
                continue
            _, accepted = ingest.screen([draft], None)
            if not accepted or ingest.insight_id(accepted[0].draft) in {r["id"] for r in group}:
                continue
            vector = self.embedder.embed_documents([accepted[0].draft.embedding_text()])[0]
            first = min(group, key=lambda r: r["created_at"])
            provenance = Provenance(
                project=first["project"], client="mtl-mcp", distilled_by=merger.name
            )
            row = ingest.new_row(accepted[0].draft, provenance, accepted[0].score, vector, now)
            row.update(created_at=first["created_at"], support=0, projects=[])
            found[merge.kept] = row
        return found

    # -- undoing ------------------------------------------------------------------------------

    def undo_consolidation(self, run_id: str) -> ConsolidationRun:
        """Undo one run (see the module docstring); InputError if it was undone already, or
        a later run not undone touched the same insights."""
        try:
            run, undo = self.runs.load(run_id)
        except NotFoundError:
            if not any(found.run == run_id for found, _ in self._team_runs()):
                raise
            return self._undo_team(run_id)
        _check_undoable(run, undo, self.runs.runs())
        touched = undo.touched()
        with self._lock:
            columns = self._columns()
            fresh = {r["id"]: r for r in self.table.read(ids_predicate(touched), columns)}
            rows = [
                _restored(fresh[i], before, undo, i)
                for i, before in undo.before.items()
                if i in fresh and i not in undo.created
            ]
            self.table.upsert(rows)
            if undo.created:
                self.table.delete(ids_predicate(undo.created))
            try:
                self.loop.ledger.move_back(undo.ledger)
            except StoreError as exc:
                logger.warning("the ledger rows of %s were not moved back: %s", run_id, exc)
            run.undone_at = self.clock()
            self.runs.save(run, undo)
        self._changed()
        return run

    def _undo_team(self, run_id: str) -> ConsolidationRun:
        """Undo a run of the team pool, under its lease."""
        team = self._team()
        with team_upkeep.lease(team.table, team.member(), self.clock()):
            pool_runs = team_upkeep.runs(team.table)
            run, undo = next((r, u) for r, u in pool_runs if r.run == run_id)
            _check_undoable(run, undo, pool_runs)
            team_upkeep.undo(team.table, undo)
            run.undone_at = self.clock()
            team_upkeep.save(team.table, run, undo)
            team.tier.adopt(team.table.snapshot())
        self._changed()
        return run


def _check_undoable(
    run: ConsolidationRun, undo: Undo, runs: Sequence[tuple[ConsolidationRun, Undo]]
) -> None:
    """InputError unless `run` can be undone now: not undone yet, and no later run not
    undone touched the same insights."""
    if run.undone_at is not None:
        raise InputError(f"{run.run} was undone already, at {run.undone_at:%Y-%m-%d %H:%M}")
    touched = undo.touched()
    later = [
        other.run
        for other, theirs in runs
        if other.run > run.run and other.undone_at is None and theirs.touched() & touched
    ]
    if later:
        raise InputError(
            f"undo {later[-1]} first: it changed some of the same insights after {run.run} "
            f"(runs are undone newest first: {', '.join(reversed(later))})"
        )


def describe(
    plan: planning.Plan, run_id: str, at: datetime, trigger: str, dry_run: bool
) -> ConsolidationRun:
    """The run a plan makes, with a reason for every change."""
    titles = plan.titles

    def named(*ids: str) -> dict[str, str]:
        return {i: titles[i] for i in ids if i in titles}

    changes = [
        ConsolidationChange(
            kind="merged", id=m.kept, others=m.members, why=m.why, titles=named(m.kept, *m.members)
        )
        for m in plan.merges
    ]
    changes += [
        ConsolidationChange(
            kind="superseded", id=old, others=[new], why=why, titles=named(old, new)
        )
        for old, new, why in plan.superseded
    ]
    changes += [
        ConsolidationChange(kind="retired", id=i, why=why, titles=named(i))
        for i, why in plan.retired
    ]
    changes += [
        ConsolidationChange(kind="conflict", id=a, others=[b], why=why, titles=named(a, b))
        for a, b, why in plan.conflicts
    ]
    return ConsolidationRun(
        run=run_id,
        at=at,
        trigger=trigger,
        dry_run=dry_run,
        merged=[(m.kept, m.members) for m in plan.merges],
        superseded=[(old, new) for old, new, _ in plan.superseded],
        retired=[i for i, _ in plan.retired],
        conflicts=[(a, b) for a, b, _ in plan.conflicts],
        changes=changes,
        more=plan.more,
    )


def _kept_fields(row: dict[str, Any]) -> dict[str, Any]:
    """A row's fields a run may change, as they were (JSON-ready)."""
    return {
        **{name: row[name] for name in COUNTERS},
        **{name: list(row.get(name) or []) for name in LISTS},
        "updated_at": row["updated_at"].isoformat(),
    }


def _absorb(kept: dict[str, Any], members: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Give `kept` its members' counters and list items; what it gained, for undo."""
    added: dict[str, Any] = {}
    for name in COUNTERS:
        gained = sum(int(m[name] or 0) for m in members)
        kept[name] = int(kept[name] or 0) + gained
        added[name] = gained
    for name, cap in LISTS.items():
        current = list(kept.get(name) or [])
        new = [v for m in members for v in (m.get(name) or []) if v not in current]
        new = list(dict.fromkeys(new))[: None if cap is None else max(cap - len(current), 0)]
        kept[name] = current + new
        added[name] = new
    kept["updated_at"] = max(row["updated_at"] for row in [kept, *members])
    return added


def _restored(
    row: dict[str, Any], before: dict[str, Any], undo: Undo, insight: str
) -> dict[str, Any]:
    """`row` with one run's changes taken back, and what happened since kept."""
    added = undo.added.get(insight, {})
    for name in COUNTERS:
        row[name] = max(int(row[name] or 0) - int(added.get(name, 0)), 0)
    for name in LISTS:
        gone = set(added.get(name) or [])
        row[name] = [v for v in row.get(name) or [] if v not in gone]
    if "status" in before:
        row["status"] = before["status"]
    if undo.written.get(insight) == row["updated_at"].isoformat():
        row["updated_at"] = datetime.fromisoformat(before["updated_at"])
    notes = list(row.get("notes") or [])
    for text in undo.notes.get(insight, []):
        if text in notes:
            notes.remove(text)
    row["notes"] = notes
    return row


__all__ = ["Consolidation", "Merger", "describe"]
