"""The team pool: a second store, usually on object storage, that members share into.

Reading never waits on the network for long (`Tier.loaded`): a process's first team
snapshot gets FIRST_LOAD_WAIT seconds, later ones refresh in the background, and while the
pool is unreachable recall keeps answering from the last snapshot loaded.

Writing is sharing (`Memory.share`). Each share refreshes the pool first, so dedup sees
every member's insights: an insight already there (the same id, or a near-duplicate above
the dedup threshold) gains this member in `shared_by` and one more `support`; a member who
shares the same lesson twice counts once. Two members inserting the same new id at once
are settled by the pool's unenforced primary key: one insert lands, the other finds the row
without its member and merges into it.

When the pool does not answer within PROBE_WAIT seconds, or a write fails in a way worth
retrying, the insights' ids wait in the outbox: a folder of empty, owner-only files named by
id under the data directory (no insight text, so a purge has nothing to scrub there). It
drains on the next share and, in a running server, in the background every refresh
interval once the pool answers again (`Memory.flush`). Draining shares the insights as they
are then, so one forgotten in the meantime is never shared.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mtl_mcp.config import Settings
from mtl_mcp.errors import EmbeddingError, Retryable, StoreUnavailable
from mtl_mcp.files import write_private
from mtl_mcp.index.embedder import Vector
from mtl_mcp.memory.ingest import duplicate_of, lesson_of, merge_sql, union_sql
from mtl_mcp.memory.overlap import Overlap
from mtl_mcp.memory.queries import Pool
from mtl_mcp.memory.sharing import Ready, keyed_hash, team_row
from mtl_mcp.memory.tier import Tier
from mtl_mcp.schemas import Insight, InsightDraft, Provenance, ShareResult
from mtl_mcp.storage.schema import (
    PROJECT_SALT,
    SHARED_BY,
    ids_predicate,
    row_columns,
    sql_string,
)
from mtl_mcp.storage.snapshot import Mask, Snapshot
from mtl_mcp.storage.table import InsightTable, ModelInfo

FIRST_LOAD_WAIT = 2.0  # seconds a read waits for this process's first team snapshot
PROBE_WAIT = 5.0  # seconds a share waits to learn whether the pool answers
MEMBER_FILE = "team-member"


class Outbox:
    """Ids of insights waiting to be shared: one empty file per id, in an owner-only folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def add(self, ids: Sequence[str]) -> None:
        for insight in ids:
            write_private(self.folder / insight, b"")

    def pending(self) -> list[str]:
        if not self.folder.is_dir():
            return []
        return sorted(p.name for p in self.folder.iterdir() if p.name.startswith("ins_"))

    def remove(self, insight: str) -> None:
        (self.folder / insight).unlink(missing_ok=True)


class TeamPool:
    """The team pool of one member: its table read through a Tier, the outbox, sharing."""

    def __init__(self, settings: Settings, model_info: ModelInfo) -> None:
        self.settings = settings
        self.table = InsightTable(settings, model_info, uri=settings.team_uri, team=True)
        self.tier = Tier(self.table, "team", settings.refresh_seconds, create=False)
        self.outbox = Outbox(settings.team_outbox)
        self.overlap = Overlap(settings.dedup_threshold)

    # -- identities ---------------------------------------------------------------------------

    def _salt(self) -> str:
        return self.table.meta.get(PROJECT_SALT) or ""

    def member(self) -> str:
        """This member's opaque id in the pool: the configured name, else a random id kept
        in the data directory, hashed with the pool's salt."""
        name = self.settings.team_member
        if not name:
            path = self.settings.home / MEMBER_FILE
            if not path.is_file():
                write_private(path, secrets.token_hex(16))
            name = path.read_text(encoding="utf-8").strip()
        return keyed_hash(self._salt(), "m", name)

    def project(self, project: str | None) -> str | None:
        """A project identity as the pool knows it (None stays None)."""
        return keyed_hash(self._salt(), "p", project) if project else None

    # -- reading --------------------------------------------------------------------------------

    def snapshot(self, wait: float = FIRST_LOAD_WAIT) -> Snapshot | None:
        """The team snapshot to read (see `Tier.loaded`), or None."""
        return self.tier.loaded(wait)

    def model_problem(self, model: str) -> str | None:
        """Why the pool's vectors cannot be compared with this memory's, if they cannot."""
        theirs = self.table.meta.get("embed_model")
        if theirs and theirs != model:
            return (
                f"the team pool uses embedding model {theirs!r} and this memory {model!r}: "
                f"set MTL_MCP_EMBED_MODEL={theirs} and run `mtl-mcp reindex` to use it"
            )
        return None

    def pool(self, snapshot: Snapshot, personal: Snapshot, mask: Mask) -> Pool:
        """The team's rows under `mask`, less those your own memory holds (the same id, or a
        near-duplicate: `memory.overlap`)."""
        hidden = self.overlap.hidden(snapshot, personal)
        return Pool("team", snapshot, mask & ~hidden, self.tier.keywords(snapshot), hidden)

    def get(self, insight: str) -> Insight | None:
        snapshot = self.snapshot()
        position = None if snapshot is None else snapshot.positions.get(insight)
        if snapshot is None or position is None:
            return None
        return Insight.model_validate({**snapshot.records([position])[0], "source": "team"})

    def shared_in(self, snapshot: Snapshot) -> set[str]:
        """Ids of the snapshot's insights this member shared."""
        me = self.member()
        column = snapshot.rows.column(SHARED_BY).to_pylist()
        return {
            i
            for i, sharers in zip(snapshot.positions, column, strict=True)
            if me in (sharers or [])
        }

    def shared_by_me(self) -> list[Insight]:
        """Every insight in the pool this member shared, read from the pool now."""
        if not self.table.exists():
            return []
        columns = row_columns(self.table.open().schema)
        where = f"array_has({SHARED_BY}, {sql_string(self.member())})"
        rows = self.table.read(where, columns)
        return [Insight.model_validate({**r, "source": "team"}) for r in rows]

    def rows(self) -> Iterator[dict[str, Any]]:
        """Every row of the freshest snapshot (vectors left out)."""
        yield from self.table.refresh().rows.to_pylist()

    # -- writing --------------------------------------------------------------------------------

    def deliver(
        self,
        ready: Sequence[Ready],
        results: dict[str, ShareResult],
        model: str,
        threshold: float,
    ) -> None:
        """Publish screened insights and update their `results`, or queue them in the outbox
        when the pool cannot take them now; ids decided for good leave the outbox."""
        try:
            if ready and not self.tier.probe(PROBE_WAIT):
                error = self.tier.status().error
                raise StoreUnavailable(
                    f"the team pool did not answer within {PROBE_WAIT:.0f} s"
                    + (f" ({error})" if error else "")
                )
            published = self.publish(ready, model, threshold)
        except Retryable as exc:
            self.outbox.add([insight.id for insight, _, _ in ready])
            for insight, _, _ in ready:
                results[insight.id].status = "queued"
                results[insight.id].reasons = [f"waiting in the outbox: {exc}"]
            return
        for result in published:
            results[result.id] = result.model_copy(update={"warnings": results[result.id].warnings})
        for result in results.values():
            self.outbox.remove(result.id)

    def publish(self, items: Sequence[Ready], model: str, threshold: float) -> list[ShareResult]:
        """Share screened insights (insight, its vector, its abstraction score), in order.

        Raises StoreUnavailable or StoreBusy when the pool cannot take them now.
        """
        if not items:
            return []
        self.table.open()  # the first share creates the pool
        snapshot = self.table.refresh()  # the latest: dedup sees every member's shares
        if problem := self.model_problem(model):
            raise EmbeddingError(f"cannot share: {problem}")
        me, salt = self.member(), self._salt()
        similar = snapshot.vectors @ np.asarray([v for _, v, _ in items]).T
        similar[~snapshot.active] = -np.inf
        shared_by = snapshot.rows.column(SHARED_BY).to_pylist()
        new: list[dict[str, Any]] = []
        new_vectors: list[Vector] = []
        merges: list[tuple[str, dict[str, Any]]] = []
        results: list[ShareResult] = []
        for column, (insight, vector, score) in enumerate(items):
            row = team_row(insight, vector, salt, me, score)
            target = duplicate_of(
                insight.id,
                vector,
                similar[:, column],
                snapshot,
                new,
                new_vectors,
                threshold,
                lesson_of(row),
            )
            result = ShareResult(id=insight.id, title=insight.title, status="shared")
            results.append(result)
            if target is None:
                new.append(row)
                new_vectors.append(vector)
                result.team_id = insight.id
                continue
            result.team_id, result.status = target, "merged"
            position = snapshot.positions.get(target)
            if position is None:  # into a new row of this share: the same member, no change
                continue
            if me in (shared_by[position] or []):
                result.status = "already-shared"
            else:
                merges.append((target, row))
        if self.table.insert(new) < len(new):  # another member inserted some ids meanwhile
            found = self.table.read(ids_predicate(r["id"] for r in new), ["id", SHARED_BY])
            theirs = {r["id"] for r in found if me not in (r[SHARED_BY] or [])}
            merges += [(r["id"], r) for r in new if r["id"] in theirs]
            for result in results:
                if result.team_id in theirs and result.status == "shared":
                    result.status = "merged"
        for target, row in merges:
            self._merge(target, row, me)
        self.tier.adopt(self.table.snapshot())  # this process sees its shares at once
        return results

    def _merge(self, target: str, row: dict[str, Any], me: str) -> None:
        """One more member behind `target`: support + 1, the row's labels and projects."""
        draft = InsightDraft.model_validate({k: row[k] for k in InsightDraft.model_fields})
        values = merge_sql(1, draft.tags, draft.languages, Provenance())
        values["projects"] = union_sql("projects", row["projects"])
        values[SHARED_BY] = f"array_append(coalesce({SHARED_BY}, make_array()), {sql_string(me)})"
        # The guard keeps a member from counting twice, even when two of its processes race.
        guard = f"NOT array_has(coalesce({SHARED_BY}, make_array()), {sql_string(me)})"
        self.table.update(f"id = {sql_string(target)} AND {guard}", values)

    def rate(self, insight: str, values_sql: dict[str, str]) -> None:
        """Update one insight's counters; the snapshot reloads so the caller sees it."""
        self.table.update(f"id = {sql_string(insight)}", values_sql)
        self.tier.adopt(self.table.snapshot())

    def purge(self, ids: Sequence[str]) -> tuple[int, int]:
        """Delete the insights among `ids` that this member shared, and every copy of them
        in the pool's objects, older versions included. Returns (deleted, versions removed).
        """
        if not ids or not self.table.exists():
            return 0, 0
        where = f"{ids_predicate(ids)} AND array_has({SHARED_BY}, {sql_string(self.member())})"
        mine = [r["id"] for r in self.table.read(where, ["id"])]
        if not mine:
            return 0, 0
        return self.table.purge(mine)

    def close(self) -> None:
        self.tier.close()


def stats_of(team: TeamPool, model: str, counts: dict[str, Any] | None) -> dict[str, Any]:
    """The team section of `Memory.stats`: counts of the last snapshot and its freshness."""
    status = team.tier.status()
    problem = team.model_problem(model) if counts is not None else None
    return {
        **(counts or {"total": 0}),
        "uri": team.settings.team_uri,
        "reachable": status.reachable,
        "snapshot_at": status.loaded_at.isoformat() if status.loaded_at else None,
        "error": status.error or problem,
        "outbox": len(team.outbox.pending()),
    }
