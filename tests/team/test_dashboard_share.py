"""The dashboard's Share button, over its real app and guard, into a team pool on the
test's S3 server: the share policy screens first, and what it passes reaches the pool; a
pool that refuses is reported in words that name no place."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from mtl_mcp import Memory
from mtl_mcp.config import load_settings
from mtl_mcp.dashboard.api import Changes, build_app
from mtl_mcp.dashboard.guard import SESSION_HEADER, Launch
from mtl_mcp.schemas import Provenance
from mtl_mcp.server.keeper import MemoryKeeper
from tests.conftest import lesson
from tests.team.conftest import Bucket

pytestmark = pytest.mark.slow
PORT = 8999
PROVEN = lesson(
    "Reproduce a failure before changing code",
    "Run the failing case first and watch it fail; a fix for a failure you never saw is a "
    "guess, and the same run later proves the fix.",
)
NEW = lesson(
    "Read the error message to its last line",
    "The cause is often stated after the first screen of output; scroll to the end before "
    "forming a theory.",
)


@pytest.mark.anyio
async def test_share_is_screened_by_the_policy_then_reaches_the_pool(
    bucket: Bucket, tmp_path: Path
) -> None:
    """A lesson with support 1 is refused with the policy's reason (nothing is shared); one
    that sessions of two projects confirmed passes the dry run, is shared, and the pool
    holds it."""
    settings = load_settings(tmp_path / "alice", team_uri=bucket.uri("team"))
    keeper = MemoryKeeper(settings)
    memory = keeper.get()
    [proven] = memory.record([PROVEN], Provenance(session_id="s1", project="alpha"))
    [again] = memory.record([PROVEN], Provenance(session_id="s2", project="beta"))
    assert again.status == "merged"
    [new] = memory.record([NEW], Provenance(session_id="s3"))
    async with dashboard_client(keeper) as http:

        async def share(insight: str, **body: object) -> dict[str, object]:
            answer = await http.post(f"/api/insights/{insight}/share", json=body)
            assert answer.status_code == 200, answer.text
            [result] = answer.json()
            assert isinstance(result, dict)
            return result

        refused = await share(str(new.id), dry_run=True)
        assert refused["status"] == "rejected"
        assert any("support 1 is below" in str(r) for r in refused["reasons"])  # type: ignore[attr-defined]
        screened = await share(str(proven.id), dry_run=True)
        assert screened["status"] == "would-share", screened["reasons"]
        assert memory.shared_insights() == []
        shared = await share(str(proven.id))
        assert shared["status"] == "shared"
        assert shared["team_id"]
    memory.close()
    bob = Memory(load_settings(tmp_path / "bob", team_uri=bucket.uri("team")))
    try:
        items, total = bob.list(source="team")
        assert total == 1
        assert items[0].title == PROVEN["title"]
    finally:
        bob.close()


@contextlib.asynccontextmanager
async def dashboard_client(keeper: MemoryKeeper) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of the dashboard's real app and guard over `keeper`, signed in as the
    page is: a launch code traded for the session, sent in its header."""
    launch = Launch(PORT)
    base = f"http://127.0.0.1:{PORT}"
    transport = httpx.ASGITransport(app=build_app(keeper, launch, Changes()))
    async with httpx.AsyncClient(
        transport=transport, base_url=base, headers={"origin": base}
    ) as http:
        answer = await http.post("/api/session", json={"code": launch.new_code()})
        http.headers[SESSION_HEADER] = answer.json()["session"]
        yield http


def closed_port() -> int:
    """A loopback port nothing listens on: a pool's server that is down."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def refusing_pool(
    kind: str, bucket: Bucket, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> str | None:
    """The team URI of a pool that refuses, `kind` of it (None: no pool configured)."""
    if kind == "no pool":
        return None
    if kind == "server down":
        down = f"http://127.0.0.1:{closed_port()}"
        monkeypatch.setenv("AWS_ENDPOINT", down)
        monkeypatch.setenv("AWS_ENDPOINT_URL", down)
        return bucket.uri("team")
    if kind == "no such bucket":
        return f"s3://no-such-{bucket.name}/team"
    pool = tmp_path / "pool"  # a local pool that is a file, not a folder
    pool.write_text("not a pool")
    return str(pool)


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["no pool", "server down", "no such bucket", "a file"])
async def test_a_pool_that_refuses_is_told_without_naming_a_place(
    kind: str, bucket: Bucket, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Share and its dry run into a pool that is not configured, whose server is down,
    whose bucket does not exist, or that is a file: the page is told what went wrong and
    what to do (set the pool; it waits in the outbox; check the URI), never the data
    directory, the pool's URI, its endpoint or any other path (a library's source file)."""
    team = refusing_pool(kind, bucket, tmp_path, monkeypatch)
    settings = load_settings(tmp_path / "alice", team_uri=team)
    keeper = MemoryKeeper(settings)
    [proven] = keeper.get().record([PROVEN], Provenance(session_id="s1", project="alpha"))
    told = []
    async with dashboard_client(keeper) as http:
        for body in ({"dry_run": True}, {"policy": False}):
            answer = await http.post(f"/api/insights/{proven.id}/share", json=body)
            assert answer.json(), answer.text  # results, or {"error": ...}: our JSON
            told.append(answer.text)
    keeper.get().close()
    text = " ".join(told)
    expected = {
        "no pool": "no team pool is configured: set MTL_MCP_TEAM_URI",
        "server down": "waiting in the outbox",
        "no such bucket": "check the URI, the endpoint and credentials",
        "a file": "check the path and its permissions",
    }
    assert expected[kind] in text, text
    places = [str(tmp_path), os.path.realpath(tmp_path), str(settings.home),
              os.environ["AWS_ENDPOINT"], ".cargo", ".rs\""]  # fmt: skip
    if team is not None:
        places += [team, team.split("://")[-1]]
    assert [place for place in places if place in text] == [], text
    assert "Traceback" not in text
