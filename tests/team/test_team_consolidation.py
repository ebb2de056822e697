"""Consolidating the team pool on a real S3 API (moto on loopback): once, under a lease,
however many machines try at the same moment; the run is the pool's, so any member lists
and undoes it."""

from __future__ import annotations

import json
import multiprocessing
import time
from pathlib import Path
from typing import Any

import pytest

from mtl_mcp import Memory
from mtl_mcp.config import load_settings
from mtl_mcp.errors import StoreBusy
from mtl_mcp.memory import team_upkeep
from tests.memory.test_consolidation import WORDINGS
from tests.team.conftest import Bucket

pytestmark = pytest.mark.slow


def member(tmp_path: Path, name: str, team_uri: str) -> Memory:
    return Memory(load_settings(tmp_path / name, team_uri=team_uri, starter=False))


def shared_wordings(tmp_path: Path, team_uri: str) -> list[str]:
    """Two members share the three wordings of one lesson: three rows in the pool."""
    alice, bob = member(tmp_path, "alice", team_uri), member(tmp_path, "bob", team_uri)
    ids = [r.id for r in alice.record(WORDINGS[:2]) if r.id]
    assert [s.status for s in alice.share(ids)] == ["shared", "shared"]
    more = [r.id for r in bob.record(WORDINGS[2:]) if r.id]
    assert [s.status for s in bob.share(more)] == ["shared"]
    alice.close()
    bob.close()
    return ids + more


def test_a_pool_pass_merges_once_and_any_member_undoes_it(bucket: Bucket, tmp_path: Path) -> None:
    team_uri = bucket.uri("team")
    ids = shared_wordings(tmp_path, team_uri)
    alice, bob = member(tmp_path, "alice", team_uri), member(tmp_path, "bob", team_uri)

    run = alice.consolidate_team()

    assert run is not None and run.source == "team" and len(run.merged) == 1
    kept, members = run.merged[0]
    assert sorted([kept, *members]) == sorted(ids)
    assert bob.team is not None
    rows = {r["id"]: r for r in bob.team.rows()}
    assert rows[kept]["support"] == 3 and rows[kept]["status"] == "active"
    assert len(set(rows[kept]["shared_by"])) == 2  # both members stand behind it now
    assert {rows[m]["status"] for m in members} == {"retired"}
    assert [r.run for r in bob.consolidation_runs()] == [run.run]
    assert alice.consolidate_team(trigger="idle") is None  # done for the day

    undone = bob.undo_consolidation(run.run)

    assert undone.undone_at is not None
    rows = {r["id"]: r for r in alice.team.rows()} if alice.team else {}
    assert {rows[i]["status"] for i in ids} == {"active"}
    assert rows[kept]["support"] == 1 and len(rows[kept]["shared_by"]) == 1
    alice.close()
    bob.close()


def _machine(home: str, team_uri: str, start: float, results: Any) -> None:
    memory = Memory(load_settings(Path(home), team_uri=team_uri, starter=False))
    memory.warm()
    time.sleep(max(0.0, start - time.time()))
    try:
        run = memory.consolidate_team(trigger="idle")
        results.put(("run", run.run if run else None))
    except StoreBusy as exc:
        results.put(("busy", str(exc)))
    memory.close()


def test_machines_going_idle_at_once_consolidate_the_pool_once(
    bucket: Bucket, tmp_path: Path
) -> None:
    team_uri = bucket.uri("team")
    ids = shared_wordings(tmp_path, team_uri)
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    start = time.time() + 20  # after every process has loaded the model and opened the pool
    machines = [
        context.Process(target=_machine, args=(str(tmp_path / f"m{n}"), team_uri, start, results))
        for n in range(3)
    ]
    for machine in machines:
        machine.start()
    outcomes = [results.get(timeout=300) for _ in machines]
    for machine in machines:
        machine.join(60)
        assert machine.exitcode == 0
    ran = [value for kind, value in outcomes if kind == "run" and value]
    assert len(ran) == 1, outcomes  # the others found the lease taken or the pass done
    reader = member(tmp_path, "reader", team_uri)
    assert reader.team is not None
    assert len(team_upkeep.runs(reader.team.table)) == 1
    rows = {r["id"]: r for r in reader.team.rows()}
    assert sum(rows[i]["status"] == "active" for i in ids) == 1
    assert max(rows[i]["support"] for i in ids) == 3  # merged once, not twice
    reader.close()


def test_a_lease_is_honoured_until_it_expires(bucket: Bucket, tmp_path: Path) -> None:
    team_uri = bucket.uri("team")
    shared_wordings(tmp_path, team_uri)
    alice = member(tmp_path, "alice", team_uri)
    assert alice.team is not None
    table = alice.team.table
    held = json.dumps({"holder": "someone", "until": "2999-01-01T00:00:00+00:00"})
    assert table.meta_swap(team_upkeep.LEASE_KEY, table.meta_value(team_upkeep.LEASE_KEY), held)
    with pytest.raises(StoreBusy, match="another member"):
        alice.consolidate_team()
    expired = json.dumps({"holder": "someone", "until": "2000-01-01T00:00:00+00:00"})
    assert table.meta_swap(team_upkeep.LEASE_KEY, held, expired)  # it died mid-pass
    run = alice.consolidate_team()
    assert run is not None and run.merged
    alice.close()
