"""Differential tests: for the same settings, data and call, every door gives the answer
in-process `Memory` gives. The doors: the CLI (a real process, through the service when one
serves its settings, else in-process), client windows (the stdio relay to the shared
service), HTTP (`serve --transport http`), and the hooks.

Windows run at once, with their project told three ways (CLAUDE_PROJECT_DIR, MCP roots,
the folder they start in) and two settings (with and without a team pool): each must get
the answers of its own project and settings, whichever window asked before it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from mtl_mcp import Memory, Provenance
from mtl_mcp.config import load_settings
from mtl_mcp.operations.context import write_project_context
from mtl_mcp.operations.service import stop_services
from mtl_mcp.project import resolve_project
from mtl_mcp.schemas import RecallOrigin
from tests.conftest import distinct_lessons
from tests.doors import (
    HttpServer,
    cli,
    cli_json,
    client_env,
    hook,
    recall_answers,
    stdio_window,
    tool,
)

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

PLANS = [
    "Reproduce the flaky tests first. Then isolate the cause in a minimal case. Then fix it.",
    "Review the diff of the database migrations, then roll back quickly on problems.",
]
CALLS = [
    {"scope": scope, "k": k}
    for scope, k in itertools.product(("all", "this-project", "other-projects"), (3, 5))
]


@dataclass(frozen=True)
class World:
    """A data directory with insights from three projects, a team pool next to it, and
    the two settings the clients use: `env(team=...)`."""

    home: Path
    team: Path
    folders: list[Path]

    def env(self, team: bool, **extra: str) -> dict[str, str]:
        pool = {"MTL_MCP_TEAM_URI": str(self.team)} if team else {}
        return client_env(self.home, MTL_MCP_STARTER="0", **pool, **extra)

    def memory(self, team: bool) -> Memory:
        return Memory(load_settings(self.home, team_uri=str(self.team) if team else None))

    def expected(
        self, team: bool, folder: Path | None
    ) -> dict[tuple[str, str, int], list[tuple[str, float | None]]]:
        """In-process answers for every plan and call, for a window of `folder`'s project:
        each hit's id and relevance gate probability."""
        memory = self.memory(team)
        project = resolve_project(folder).id if folder else None
        try:
            return {
                (plan, call["scope"], call["k"]): [
                    (h.id, h.p)
                    for h in memory.recall(plan, k=call["k"], scope=call["scope"], project=project)
                ]
                for plan, call in itertools.product(PLANS, CALLS)
                if project or call["scope"] == "all"
            }
        finally:
            memory.close()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    folders = [tmp_path / name for name in ("api", "cli", "web")]
    for folder in folders:
        folder.mkdir()
    made = World(tmp_path / "home", tmp_path / "team", folders)
    me = made.memory(team=False)
    for n, folder in enumerate(folders):
        me.record(
            distinct_lessons(12, offset=40 * n), Provenance(project=resolve_project(folder).id)
        )
    me.close()
    teammate = Memory(load_settings(tmp_path / "teammate", team_uri=str(made.team)))
    shared = teammate.record(distinct_lessons(20, offset=100))
    teammate.share([r.id for r in shared if r.id])
    teammate.close()
    yield made
    stop_services(made.home)


async def ask_all(
    client: Any, folder: Path | None, explicit: bool = False
) -> dict[Any, list[tuple[str, float]]]:
    """A window's answers to every plan and call (`explicit`: passing its project)."""
    answers = {}
    for plan, call in itertools.product(PLANS, CALLS):
        if folder is None and call["scope"] != "all":
            continue
        arguments = dict(call)
        if explicit and folder is not None:
            arguments["project"] = str(folder)
        answers[plan, call["scope"], call["k"]] = await recall_answers(client, plan, **arguments)
    return answers


async def test_six_windows_at_once_each_get_their_own_projects_answers(world: World) -> None:
    """Six windows through the shared services at once (three ways of telling the project,
    two settings), each asking every plan and call twice, interleaved: every answer is the
    in-process one for the window's own project and settings."""
    a, b, c = world.folders
    windows = [
        ("project dir", False, a, {"env": world.env(False, CLAUDE_PROJECT_DIR=str(a))}),
        ("roots", False, b, {"env": world.env(False), "roots": [b]}),
        ("folder", False, c, {"env": world.env(False), "cwd": c}),
        ("project dir", True, b, {"env": world.env(True, CLAUDE_PROJECT_DIR=str(b))}),
        ("roots", True, c, {"env": world.env(True), "roots": [c]}),
        ("folder", True, a, {"env": world.env(True), "cwd": a}),
    ]
    expected = {(team, folder): world.expected(team, folder) for _, team, folder, _ in windows}
    assert expected[False, a] != expected[True, a]  # the team pool changes the answers
    mismatches: list[str] = []

    async def one(how: str, team: bool, folder: Path, options: dict[str, Any]) -> None:
        async with stdio_window(**options) as client:
            for _ in range(2):
                got = await ask_all(client, folder)
                if got != expected[team, folder]:
                    mismatches.append(f"{how} team={team} {folder.name}")

    async with anyio.create_task_group() as group:
        for how, team, folder, options in windows:
            group.start_soon(one, how, team, folder, options)
    assert mismatches == []


def test_the_cli_agrees_with_in_process_memory_with_and_without_a_service(
    world: World,
) -> None:
    """`mtl-mcp recall --json` in a project folder, in-process (MTL_MCP_SERVICE=off) and
    through the service it starts for its settings, for both settings."""
    a, b, _ = world.folders
    for team, folder in ((False, a), (True, b)):
        expected = world.expected(team, folder)
        for running in (False, True):
            env = world.env(team, **({} if running else {"MTL_MCP_SERVICE": "off"}))
            # A CLI run is a process of its own (an in-process one loads the model): each
            # scope once in-process, each plan in each scope through the service. The other
            # doors' tests take every pair.
            k = {PLANS[0]: 5, PLANS[1]: 3}
            pairs = [
                (plan, call)
                for plan, call in itertools.product(PLANS[: 1 + running], CALLS)
                if call["k"] == k[plan]
            ]
            for plan, call in pairs:
                args = ["recall", plan, "--scope", call["scope"], "-k", str(call["k"])]
                got = cli_json(env, *args, cwd=folder)
                answer = [(r["id"], r["p"]) for r in got["results"]]
                assert answer == expected[plan, call["scope"], call["k"]]
                assert got["project"] == resolve_project(folder).id
        listed = cli_json(world.env(team), "list", "--limit", "50")
        memory = world.memory(team)
        try:
            items, total = memory.list(limit=50)
        finally:
            memory.close()
        assert [i["id"] for i in listed["items"]] == [i.id for i in items]
        assert listed["total"] == total


async def test_http_clients_get_the_answers_of_the_project_they_name_or_root(
    world: World,
) -> None:
    """Over HTTP the server's folder says nothing of a client's: a client naming its project,
    and one whose root is its project, get the in-process answers; one with neither gets
    the answers of no project."""
    a, b, _ = world.folders
    with HttpServer(world.env(True)) as server:
        async with server.client() as named:
            assert await ask_all(named, a, explicit=True) == world.expected(True, a)
        async with server.client(roots=[b]) as rooted:
            assert await ask_all(rooted, b) == world.expected(True, b)
        async with server.client() as anonymous:
            assert await ask_all(anonymous, None) == world.expected(True, None)
            found = await anonymous.call_tool(
                "recall_insights", {"plan": PLANS[0], "scope": "this-project"}
            )
            assert found.is_error and "needs a project" in str(found.content)


async def test_list_and_records_agree_through_every_door(world: World) -> None:
    """list_memories through a window and over HTTP equals `Memory.list`; a record through a
    window lands under the window's project, as `mtl-mcp add` in that folder does."""
    a, b, _ = world.folders
    memory = world.memory(team=True)
    try:
        items, total = memory.list(sort="support", limit=40)
    finally:
        memory.close()
    with HttpServer(world.env(True)) as server:
        async with server.client() as http:
            page = await tool(http, "list_memories", sort="support", limit=40)
    async with stdio_window(world.env(True, CLAUDE_PROJECT_DIR=str(a))) as window:
        listed = await tool(window, "list_memories", sort="support", limit=40)
        [draft] = distinct_lessons(1, offset=190)
        recorded = await tool(window, "record_session", summary="done", insights=[draft])
    assert page["ids"] == listed["ids"] == [i.id for i in items]
    assert page["total"] == listed["total"] == total
    [other] = distinct_lessons(1, offset=195)
    added = cli_json(
        world.env(True),
        "add",
        *(f"--{k}={other[k]}" for k in ("title", "description", "content")),
        cwd=b,
    )
    memory = world.memory(team=True)
    try:
        assert memory.get(recorded["results"][0]["id"]).project == resolve_project(a).id
        assert memory.get(added["id"]).project == resolve_project(b).id
    finally:
        memory.close()


def test_the_session_start_hook_agrees_with_in_process_context(world: World) -> None:
    """The session-start hook prints, for a folder, the context in-process memory writes
    for that folder's project, through the service and without one: for a project with a
    plan in the ledger (the relevance gate chooses, at two thresholds) and one without."""
    a, b, _ = world.folders
    memory = world.memory(team=False)
    expected = {}
    try:
        # A plan recalled for in project a (in the ledger only: a recall's counts would
        # reorder the store's rows, and the fallback's ties with them).
        memory.loop.note(RecallOrigin(), PLANS[0], resolve_project(a).id, [])
        memory.flush()
        for min_p in ("0", "0.5"):
            for f in (a, b):
                context = write_project_context(memory, resolve_project(f), float(min_p))
                expected[f, min_p] = context.text
    finally:
        memory.close()
    assert expected[a, "0"] != expected[a, "0.5"] and expected[b, "0"] == expected[b, "0.5"]
    # Without a service the hook prints the cache, last written for 0.5.
    for running, min_p in ((False, "0.5"), (True, "0"), (True, "0.5")):
        stop_services(world.home)
        env = world.env(False, MTL_MCP_AUTO_RECALL_MIN_P=min_p)
        if running:  # warm: a cold service answers after the hook's 3 s (it prints the cache)
            assert cli(env, "serve", input="", cwd=a).returncode == 0
            cli_json(env, "recall", "warm up")
        for folder in (a, b):
            printed = hook(env, "session-start", {"cwd": str(folder)}).stdout
            assert printed == expected[folder, min_p], (running, min_p)


async def test_a_relative_project_argument_means_the_windows_folder_through_every_door(
    world: World,
) -> None:
    """`project="."` (or "../cli") from a window in a project folder names that folder's
    project, in-process and through the shared service (which runs in the data directory),
    for recall and record alike, as `mtl-mcp recall --project .` there does."""
    a, b, _ = world.folders
    drafts = iter(distinct_lessons(2, offset=190))
    for service in ("0", "1"):
        # Each pass after the last one's record: a new insight moves the gate's p.
        expected = {folder: world.expected(False, folder) for folder in (a, b)}
        async with stdio_window(world.env(False, MTL_MCP_SERVICE=service), cwd=a) as window:
            for relative, folder in ((".", a), (f"../{b.name}", b)):
                for plan, call in itertools.product(PLANS, CALLS):
                    got = await recall_answers(window, plan, project=relative, **call)
                    assert got == expected[folder][plan, call["scope"], call["k"]], service
            recorded = await tool(
                window, "record_session", summary="done", insights=[next(drafts)], project="."
            )
        memory = world.memory(team=False)
        try:
            assert memory.get(recorded["results"][0]["id"]).project == resolve_project(a).id
        finally:
            memory.close()
    got = cli_json(
        world.env(False), "recall", PLANS[0], "--scope", "this-project", "--project", ".", cwd=a
    )
    answer = [(r["id"], r["p"]) for r in got["results"]]
    assert answer == world.expected(False, a)[PLANS[0], "this-project", 3]
