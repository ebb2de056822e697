"""Many machines on one pool, as separate processes: four members sharing at once, and two
HTTP server replicas on one store on s3://."""

from __future__ import annotations

import multiprocessing
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import lancedb
import pytest
from mcp.client import Client

from mtl_mcp import Memory
from mtl_mcp.config import load_settings
from mtl_mcp.storage.schema import META_TABLE, PROJECT_SALT
from tests.conftest import distinct_lessons, lesson
from tests.frontdoors.test_http import Server  # the HTTP server in a subprocess
from tests.team.conftest import Bucket

pytestmark = pytest.mark.slow

MACHINES = 4
EACH = 50
PLANTED = 5  # lessons every machine shares: each must end as one row with support 4
CHUNK = 10  # insights per share call; planted lesson k opens chunk k on every machine


def _lessons(machine: int) -> list[dict[str, object]]:
    unique = distinct_lessons(EACH - PLANTED, offset=machine * (EACH - PLANTED))
    planted = distinct_lessons(PLANTED, offset=MACHINES * (EACH - PLANTED))
    for k, draft in enumerate(planted):
        unique.insert(k * CHUNK, draft)
    return unique


def _machine(home: str, team_uri: str, machine: int, statuses: Any) -> None:
    """One member: record its lessons in its own store, then share them in chunks."""
    memory = Memory(load_settings(Path(home), team_uri=team_uri))
    ids = [r.id for r in memory.record(_lessons(machine))]
    assert all(ids)
    for start in range(0, len(ids), CHUNK):
        for result in memory.share(ids[start : start + CHUNK]):
            statuses.put((result.id, result.status, result.team_id))
    memory.close()


def test_four_machines_sharing_at_once_lose_nothing_and_duplicate_nothing(
    bucket: Bucket, tmp_path: Path
) -> None:
    """4 processes with their own homes share 50 insights each into one pool at once: every
    insight lands once, and the 5 lessons all of them share are one row each, backed by 4."""
    team_uri = bucket.uri("team")
    context = multiprocessing.get_context("spawn")
    statuses = context.Queue()
    machines = [
        context.Process(target=_machine, args=(str(tmp_path / f"m{n}"), team_uri, n, statuses))
        for n in range(MACHINES)
    ]
    for machine in machines:
        machine.start()
    reported = [statuses.get(timeout=300) for _ in range(MACHINES * EACH)]
    for machine in machines:
        machine.join(120)
        assert machine.exitcode == 0
    assert Counter(status for _, status, _ in reported) == {
        "shared": MACHINES * (EACH - PLANTED) + PLANTED,
        "merged": (MACHINES - 1) * PLANTED,
    }
    reader = Memory(load_settings(tmp_path / "reader", team_uri=team_uri))
    assert reader.team is not None
    rows = list(reader.team.rows())
    ids = [row["id"] for row in rows]
    assert len(ids) == len(set(ids)) == MACHINES * (EACH - PLANTED) + PLANTED
    assert {team_id for _, _, team_id in reported} == set(ids)
    meta = lancedb.connect(team_uri).open_table(META_TABLE).to_arrow().to_pylist()
    assert [row["key"] for row in meta].count(PROJECT_SALT) == 1  # racing creators: one salt
    backed = sorted((row["support"], len(set(row["shared_by"]))) for row in rows)
    assert backed[-PLANTED:] == [(MACHINES, MACHINES)] * PLANTED
    assert backed[:-PLANTED] == [(1, 1)] * (MACHINES * (EACH - PLANTED))
    reader.close()


@pytest.fixture
def replicas(
    bucket: Bucket, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[list[Server]]:
    """Two `mtl-mcp serve --transport http` processes, own homes, one s3:// store."""
    monkeypatch.setenv("MTL_MCP_STORE_URI", bucket.uri("pool"))
    monkeypatch.setenv("MTL_MCP_REFRESH_SECONDS", "1")
    started = [Server(tmp_path / f"replica{n}") for n in range(2)]
    try:
        for replica in started:
            replica.wait_ready()
        yield started
    finally:
        for replica in started:
            replica.stop()
    logs = [replica.process.stderr.read().decode(errors="replace") for replica in started]  # type: ignore[union-attr]
    assert not any("Traceback" in log for log in logs), logs


async def _call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


@pytest.mark.anyio
async def test_a_write_through_one_replica_is_recalled_through_the_other(
    replicas: list[Server],
) -> None:
    """Two server replicas on one s3:// store: what one records, the other recalls once its
    refresh interval has passed, and the other way round."""
    one, two = replicas
    plan = "Make the date test deterministic: control the clock, then rerun the suite."
    clock = lesson(
        "Pin the clock in date-dependent tests",
        "Tests that read the current time fail at midnight; inject a fixed clock.",
    )
    timezone = lesson(
        "Test dates in more than one time zone",
        "Date code that passes in one zone fails in another; run date tests in two zones.",
    )
    async with Client(one.url) as first, Client(two.url) as second:
        assert (await _call(first, "record_session", summary="s", insights=[clock]))["stored"]
        assert (await _call(second, "record_session", summary="s", insights=[timezone]))["stored"]
        for client, wanted in ((second, clock["title"]), (first, timezone["title"])):
            deadline = time.monotonic() + 60
            while True:
                recalled = await _call(client, "recall_insights", plan=plan, k=2)
                if wanted in recalled["notes"]:
                    break
                assert time.monotonic() < deadline, f"{wanted!r} never reached the replica"
                await anyio.sleep(0.5)
