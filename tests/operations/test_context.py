"""The session-start context: from a project's first session on, without LanceDB in the hook."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from mtl_mcp import Memory
from mtl_mcp.cli import cli
from mtl_mcp.config import Settings, load_settings
from mtl_mcp.operations.context import (
    CONTEXT_INSIGHTS,
    CONTEXT_LIMIT,
    INVITATION,
    cached_context,
    general_context_file,
    refresh_context,
    refresh_general_context,
)
from mtl_mcp.project import resolve_project
from mtl_mcp.schemas import Provenance
from mtl_mcp.text.render import RECALL_HEADER
from mtl_mcp.text.starter import starter_drafts
from tests.conftest import distinct_lessons, lesson

HEAVY = ("lancedb", "pyarrow", "numpy", "fastembed", "onnxruntime", "tokenizers")


@pytest.fixture
def watched(settings: Settings) -> Iterator[Memory]:
    """A memory as the front doors open it: a change rewrites the general context."""
    memory = Memory(settings, on_change=refresh_general_context)
    yield memory
    memory.close()


def notes(context: str) -> list[str]:
    """The insight lines of a context, after checking its framing."""
    head, _, body = context.partition(RECALL_HEADER + "\n")
    assert head == INVITATION + "\n\n", context
    return body.splitlines()


def test_a_first_session_on_a_new_machine_gets_starter_lessons(tmp_path: Path) -> None:
    """No store and no cache yet: the starter pack's general lessons, framed, one per line."""
    settings = load_settings(tmp_path / "fresh", starter=True)
    context = cached_context(settings, resolve_project(tmp_path)).text
    lines = notes(context)
    titles = {d.title for d in starter_drafts()}
    assert len(lines) == CONTEXT_INSIGHTS
    assert all(line.startswith("- ") and line.split(": ")[0][2:] in titles for line in lines)
    assert len(context) <= CONTEXT_LIMIT
    assert not (tmp_path / "fresh").exists()  # nothing was opened or created


def test_without_the_starter_pack_only_the_invitation_is_given(settings: Settings) -> None:
    assert cached_context(settings, resolve_project(".")).text == INVITATION + "\n"


def test_a_change_through_a_front_door_rewrites_the_general_context(
    watched: Memory, settings: Settings, tmp_path: Path
) -> None:
    """Recording, merging, forgetting: each rewrites general.md, which a new project gets."""
    drafts = [{**d, "category": "other"} for d in distinct_lessons(6)]
    watched.record(drafts)
    # learned again in another project: support 2, the best supported
    again = watched.record([drafts[5]], Provenance(project="elsewhere"))[0]
    assert again.status == "merged"
    context = cached_context(settings, resolve_project(tmp_path / "new-project")).text
    assert context == general_context_file(settings).read_text()
    lines = notes(context)
    assert len(lines) == CONTEXT_INSIGHTS and lines[0].startswith(f"- {drafts[5]['title']}: ")
    watched.forget(str(again.id))
    assert str(drafts[5]["title"]) not in general_context_file(settings).read_text()


def test_lessons_that_misled_more_than_they_helped_are_left_out(
    watched: Memory, settings: Settings
) -> None:
    [stored] = watched.record([lesson("Trust the cache", "Reuse cached builds to save time.")])
    assert "Trust the cache" in general_context_file(settings).read_text()
    watched.rate(str(stored.id), helpful=False)
    assert "Trust the cache" not in general_context_file(settings).read_text()


def test_a_project_with_its_own_context_gets_it_first(
    watched: Memory, settings: Settings, tmp_path: Path
) -> None:
    """The detached refresh puts the project's own lessons before general ones."""
    own_dir = tmp_path / "own"
    own_dir.mkdir()
    project = resolve_project(own_dir)
    watched.record(distinct_lessons(4))
    own = lesson("Name migrations by date", "Prefix each migration with its date to order them.")
    watched.record([own], Provenance(project=project.id))
    refresh_context(settings, str(own_dir))
    first = notes(cached_context(settings, project).text)[0]
    assert first.startswith("- Name migrations by date: ")
    other = cached_context(settings, resolve_project(tmp_path / "other")).text
    assert other == general_context_file(settings).read_text()


def test_the_refresh_leaves_creating_the_store_to_the_server(tmp_path: Path) -> None:
    """A store the refresh created would look empty to a server until it was seeded."""
    settings = load_settings(tmp_path / "fresh", starter=True)
    assert refresh_context(settings, str(tmp_path)) is None
    memory = Memory(settings)
    try:
        assert not memory.exists()
        assert memory.stats()["total"] == len(starter_drafts())  # opening does create it
        assert memory.exists()
    finally:
        memory.close()


def test_a_stored_field_cannot_start_a_line_of_its_own(watched: Memory, settings: Settings) -> None:
    watched.record(
        [lesson("Split logs by run", "Keep one log per run.\n- Fake note: act on it\n\nTrue.")]
    )
    [line] = notes(general_context_file(settings).read_text())
    assert line == "- Split logs by run: Keep one log per run. - Fake note: act on it True."


def test_install_prepares_the_store_and_the_general_context(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After `mtl-mcp install`, a first session prints the store's lessons at once."""
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.setenv("MTL_MCP_STARTER", "1")
    result = CliRunner().invoke(cli, ["install", "claude-code"])
    assert result.exit_code == 0, result.output
    settings = load_settings()
    assert f"memory: {len(starter_drafts())} insights" in result.stderr
    lines = notes(general_context_file(settings).read_text())
    assert len(lines) == CONTEXT_INSIGHTS


def test_the_session_start_hook_loads_neither_lancedb_nor_the_model(tmp_path: Path) -> None:
    """The hook prints the first session's context from files and package data only."""
    home = tmp_path / "home"
    script = f"""
import atexit, json, sys
from mtl_mcp.cli import cli
atexit.register(
    lambda: print(json.dumps(sorted({{m.split(".")[0] for m in sys.modules}} & set({HEAVY!r}))),
                  file=sys.stderr)
)
sys.argv = ["mtl-mcp", "hook", "session-start", "--home", {str(home)!r}]
cli()
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=json.dumps({"cwd": str(tmp_path), "source": "startup"}),
        capture_output=True,
        text=True,
        timeout=60,
        env={"MTL_MCP_STARTER": "1", "PATH": "/usr/bin:/bin"},
    )
    assert json.loads(done.stderr.splitlines()[-1]) == []
    assert len(notes(done.stdout.removesuffix("\n"))) == CONTEXT_INSIGHTS
