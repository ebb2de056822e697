"""Upgrading as a user does: `pip install` of this release over an earlier one (from the
repository's own history) while its service runs with real data and a window is open.

What a user relies on: every insight is still there, unchanged; `--version` names the new
release; the first window of the new release gets a service of the new release, which
takes over from the old one (no second service for the same settings once the old
windows close); the window opened before the upgrade keeps working until it closes; and
`service status` and `doctor` say all of this truthfully at every step.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import StdioServerParameters
from mcp.client import Client

from mtl_mcp import __version__
from mtl_mcp.operations.retiring import alive
from tests.conftest import distinct_lessons, services_under
from tests.releases import Installation
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

PLAN = "Reproduce the failing test first. Then fix the cause. Then rerun the whole suite."


@asynccontextmanager
async def window(installation: Installation, env: dict[str, str]) -> AsyncIterator[Client]:
    """A client window of `installation`: its `mtl-mcp serve`, as install registers it."""
    params = StdioServerParameters(command=installation.mtl_mcp, args=["serve"], env=env)
    async with Client(params, read_timeout_seconds=120) as client:
        yield client


async def recall_ids(client: Client) -> list[str]:
    result = await client.call_tool("recall_insights", {"plan": PLAN})
    assert not result.is_error, result.content
    return [hit["id"] for hit in result.structured_content["results"]]


def run(installation: Installation, env: dict[str, str], *args: str) -> Any:
    """`mtl-mcp ARGS` of `installation`; its JSON output parsed when `--json` is asked."""
    done = subprocess.run(
        [installation.mtl_mcp, *args], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0 or args[:2] == ("service", "status"), done.stderr
    return json.loads(done.stdout) if "--json" in args else done.stdout


def insights(installation: Installation, env: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Every stored insight by id, as `export` writes it, less the recall counter (which
    the windows' recalls move on)."""
    lines = run(installation, env, "export").splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    return {row["id"]: {k: v for k, v in row.items() if k != "recall_count"} for row in rows}


def services(installation: Installation, env: dict[str, str]) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = run(installation, env, "service", "status", "--json")["services"]
    return listed


def doctor(installation: Installation, env: dict[str, str]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in run(installation, env, "doctor", "--json")}


@pytest.mark.parametrize("release", ["0.2", "0.3"])
async def test_an_upgrade_over_a_running_service_keeps_the_data_and_hands_over(
    release: str, tmp_path: Path, packages: Path, wheel: Callable[[str], Path]
) -> None:
    installation = Installation.create(tmp_path / "venv", packages)
    assert installation.pip_install(wheel(release)).returncode == 0
    user = tmp_path / "user"  # the user's HOME: where install writes the client's config
    user.mkdir()
    env = {**os.environ, "HOME": str(user)}
    old_version = installation.version(env)
    lessons = tmp_path / "lessons.jsonl"
    lessons.write_text("".join(json.dumps(draft) + "\n" for draft in distinct_lessons(20)))
    run(installation, env, "import", str(lessons))
    run(installation, env, "install", "claude-code")

    async with window(installation, env) as old_window:
        assert await recall_ids(old_window)
        [old_pid] = services_under(tmp_path)  # the old window's service
        before = insights(installation, env)
        assert len(before) == 20

        upgraded = installation.pip_install(wheel("head"))
        assert upgraded.returncode == 0, upgraded.stderr
        assert f"Successfully installed mtl-mcp-{__version__}" in upgraded.stdout
        assert installation.version(env) == __version__ != old_version

        # Before any window of the new release: the old service, said as it is.
        [old] = services(installation, env)
        assert (old["pid"], old["older"]) == (old_pid, True)
        assert old["current"] is (release != "0.2")  # 0.2's served whatever started it
        checks = doctor(installation, env)
        assert f"mtl-mcp {old_version}" in checks["service"]["detail"]
        assert "takes over" in checks["service"]["detail"]
        assert "other settings" not in checks["service"]["detail"]
        claude = checks.get("claude-code config")
        if release == "0.2":  # 0.2 installed no tool-use hook: plan recall is off
            assert claude is not None and "no plan-triggered recall hook" in claude["detail"]
            assert "`mtl-mcp install claude-code` again" in claude["fix"]
        else:
            assert claude is None and "claude-code (user)" in checks["client configs"]["detail"]

        async with window(installation, env) as new_window:
            assert await recall_ids(new_window)
            listed = services(installation, env)
            [new] = [s for s in listed if s["current"] and not s["older"]]
            assert new["version"] == __version__ and new["pid"] != old_pid
            assert [s["pid"] for s in listed if s.get("retiring")] == [old_pid]
            detail = doctor(installation, env)["service"]["detail"]
            assert f"pid {new['pid']}, version {__version__}" in detail
            assert f"retiring (pid {old_pid})" in detail
            assert await recall_ids(old_window), "the window opened before stopped working"
            assert alive(old_pid)  # it still serves the window opened before the upgrade

    wait_for(lambda: not alive(old_pid), "the old service to exit once its window closed")
    assert [s["version"] for s in services(installation, env)] == [__version__]
    assert services_under(tmp_path) == [new["pid"]]
    assert insights(installation, env) == before
