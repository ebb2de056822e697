"""The dashboard's Share button, over its real app and guard, into a team pool on the
test's S3 server: the share policy screens first, and what it passes reaches the pool."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from mtl_mcp import Memory
from mtl_mcp.config import load_settings
from mtl_mcp.dashboard.api import Changes, build_app
from mtl_mcp.dashboard.run import launch_secrets
from mtl_mcp.schemas import Provenance
from mtl_mcp.server.keeper import MemoryKeeper
from tests.conftest import lesson
from tests.team.conftest import Bucket

pytestmark = pytest.mark.slow
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
    launch = launch_secrets(8999)
    base = f"http://127.0.0.1:{launch.port}"
    transport = httpx.ASGITransport(app=build_app(keeper, launch, Changes()))
    async with httpx.AsyncClient(
        transport=transport,
        base_url=base,
        headers={"origin": base, "x-csrf-token": launch.csrf},
        cookies={launch.cookie_name: launch.token},
    ) as http:

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
