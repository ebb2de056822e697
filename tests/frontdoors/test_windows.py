"""Which project a window's calls are about, through every door that has windows: the shared
service (raw relays, each answering `roots/list` with its own folder) and in-process.

Claude Code passes CLAUDE_PROJECT_DIR; Cursor, Codex, Claude Desktop and HTTP clients do
not, so their project comes from their roots, else from the folder they started in.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client
from mcp.client.context import ClientRequestContext
from mcp_types import ListRootsResult, Root

from mtl_mcp import Memory, Provenance
from mtl_mcp.config import Settings
from mtl_mcp.project import resolve_project
from mtl_mcp.server.app import build_server
from tests.conftest import distinct_lessons
from tests.raw_window import RawWindow

PLAN = "Inspect the code before editing it. Then verify the change. Then review the diff."


def projects(root: Path, count: int) -> list[Path]:
    folders = [root / f"project-{n}" for n in range(count)]
    for folder in folders:
        folder.mkdir(parents=True)
    return folders


def window_env(home: Path) -> dict[str, str]:
    return {
        "MTL_MCP_HOME": str(home),
        "PATH": os.environ["PATH"],
        "MTL_MCP_STARTER": "0",
        "MTL_MCP_SERVICE_IDLE_SECONDS": "30",
    }


def tool(window: RawWindow, name: str, **arguments: Any) -> dict[str, Any]:
    window.send("tools/call", {"name": name, "arguments": arguments})
    result: dict[str, Any] = window.receive()["result"]
    assert not result.get("isError"), result
    return dict(result["structuredContent"])


@pytest.mark.slow
def test_windows_with_different_roots_never_get_each_others_project(
    settings: Settings, tmp_path: Path
) -> None:
    """Three raw windows through one service, each with its own root, alternate
    `this-project` recalls: every answer comes from the window's own project, and what a
    window records is stored under its own project."""
    folders = projects(tmp_path, 3)
    memory = Memory(settings)
    own = {}
    for folder, draft in zip(folders, distinct_lessons(3, offset=60), strict=True):
        [result] = memory.record([draft], Provenance(project=resolve_project(folder).id))
        own[folder] = result.id
    memory.close()
    windows = [RawWindow(window_env(settings.home), roots=[folder]) for folder in folders]
    try:
        for window in windows:
            window.handshake()
        for _ in range(40):
            for folder, window in zip(folders, windows, strict=True):
                found = tool(window, "recall_insights", plan=PLAN, scope="this-project")
                assert [r["id"] for r in found["results"]] == [own[folder]]
        recorded = {}
        for folder, window, draft in zip(
            folders, windows, distinct_lessons(3, offset=120), strict=True
        ):
            answer = tool(window, "record_session", summary="done", insights=[draft])
            recorded[answer["results"][0]["id"]] = resolve_project(folder).id
    finally:
        for window in windows:
            window.close()
    memory = Memory(settings)
    try:
        assert {i: memory.get(i).project for i in recorded} == recorded
    finally:
        memory.close()


@pytest.mark.slow
def test_a_window_without_roots_records_and_recalls_in_the_folder_it_started_in(
    settings: Settings, tmp_path: Path
) -> None:
    """No CLAUDE_PROJECT_DIR, no roots: record and recall both use the window's folder, so
    `other-projects` never returns what this window just recorded."""
    [here, elsewhere] = projects(tmp_path, 2)
    [draft] = distinct_lessons(1, offset=10)
    window = RawWindow(window_env(settings.home), cwd=here)
    try:
        window.handshake()
        [stored] = tool(window, "record_session", summary="done", insights=[draft])["results"]
        mine = tool(window, "recall_insights", plan=PLAN, scope="this-project")
        others = tool(window, "recall_insights", plan=PLAN, scope="other-projects")
    finally:
        window.close()
    assert [r["id"] for r in mine["results"]] == [stored["id"]]
    assert others["results"] == []
    other = RawWindow(window_env(settings.home), cwd=elsewhere)
    try:
        other.handshake()
        found = tool(other, "recall_insights", plan=PLAN, scope="other-projects")
    finally:
        other.close()
    assert [r["id"] for r in found["results"]] == [stored["id"]]


@pytest.mark.anyio
async def test_in_process_roots_decide_the_project_and_are_asked_once(
    settings: Settings, store: Memory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In-process, a client's root decides the project over the server's folder, and the
    client is asked for its roots once per connection, not once per call."""
    [root, started_in] = projects(tmp_path, 2)
    monkeypatch.chdir(started_in)
    [draft] = distinct_lessons(1, offset=30)
    asked = []

    async def roots(_: ClientRequestContext) -> ListRootsResult:
        asked.append(1)
        return ListRootsResult(roots=[Root(uri=root.as_uri())])  # type: ignore[arg-type]

    server = build_server(settings, store)
    # Roots are a handshake-era feature: a 2026-07-28 connection has no back-channel to ask.
    async with Client(server, list_roots_callback=roots, mode="legacy") as client:
        recorded = await client.call_tool(
            "record_session", {"summary": "done", "insights": [draft]}
        )
        assert recorded.structured_content is not None
        for _ in range(5):
            found = await client.call_tool(
                "recall_insights", {"plan": PLAN, "scope": "this-project"}
            )
            assert found.structured_content is not None
            assert len(found.structured_content["results"]) == 1
    stored = store.get(recorded.structured_content["results"][0]["id"])
    assert stored.project == resolve_project(root).id
    assert len(asked) == 1


@pytest.mark.anyio
async def test_a_server_started_in_the_home_folder_has_no_project(
    settings: Settings, store: Memory, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Claude Desktop starts servers in the home folder (or /): that is nobody's project,
    so recall says a project is needed for `this-project`, and records carry none."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    [draft] = distinct_lessons(1, offset=50)
    async with Client(build_server(settings, store)) as client:
        recorded = await client.call_tool(
            "record_session", {"summary": "done", "insights": [draft]}
        )
        found = await client.call_tool("recall_insights", {"plan": PLAN, "scope": "this-project"})
    assert recorded.structured_content is not None
    assert store.get(recorded.structured_content["results"][0]["id"]).project is None
    assert found.is_error and "needs a project" in found.content[0].text  # type: ignore[union-attr]
