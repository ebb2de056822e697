"""A caller with a team pool is never answered by a shared service that has none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mtl_mcp import Memory
from mtl_mcp.config import Settings, load_settings
from tests.conftest import services_under
from tests.frontdoors.test_service import LESSON
from tests.frontdoors.test_service_settings import OTHER, mtl, start_service
from tests.team.conftest import Bucket

pytestmark = pytest.mark.slow


def test_a_team_uri_is_honoured_while_a_service_without_one_runs(
    settings: Settings, bucket: Bucket, tmp_path: Path
) -> None:
    """With a service running without a team pool, `MTL_MCP_TEAM_URI=... mtl-mcp recall`
    finds the team's insight (through a service of its own); without the variable it is
    answered by the first service."""
    alice = Memory(load_settings(tmp_path / "alice", team_uri=bucket.uri("team")))
    [shared] = alice.record([OTHER])
    assert [r.status for r in alice.share([shared.id])] == ["shared"]
    alice.close()
    Memory(settings).record([LESSON])
    start_service(settings)
    plan = str(OTHER["content"])
    with_team = mtl(settings.home, "recall", plan, "--json", MTL_MCP_TEAM_URI=bucket.uri("team"))
    assert with_team.returncode == 0, with_team.stderr
    hits = json.loads(with_team.stdout)["results"]
    assert (hits[0]["id"], hits[0]["source"]) == (shared.id, "team"), hits
    alone = mtl(settings.home, "recall", plan, "--json")
    assert {h["source"] for h in json.loads(alone.stdout)["results"]} == {"personal"}
    # The recall with the pool started a service of its own settings, as a window would.
    assert len(services_under(tmp_path)) == 2
