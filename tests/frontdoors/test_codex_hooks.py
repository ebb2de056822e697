"""mtl-mcp's hooks inside the real Codex CLI (npm, pinned), scripted by a fake Responses API.

A new user: a throwaway HOME and CODEX_HOME, a fresh data directory, `mtl-mcp install codex`
as they would run it, then `codex exec` sessions against `FakeOpenAI` on 127.0.0.1, which
plays the model: it states a plan and runs a shell command, then answers. The only
difference from production is the model provider (see `tests.codex_cli`).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mtl_mcp import Memory
from mtl_mcp.config import Settings, load_settings
from mtl_mcp.index.gate import unasked
from mtl_mcp.learning.spool import Spool
from mtl_mcp.operations.context import INVITATION
from mtl_mcp.text.render import PLAN_NOTES_HEADER
from tests.codex_cli import Codex
from tests.conftest import FLAKY_PLAN
from tests.fake_openai import FakeOpenAI, RecordedRequest
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.alone]

MIN_P = load_settings(Path("/nonexistent")).auto_recall_min_p
OUR_EVENTS = {"sessionStart", "postToolUse", "sessionEnd"}


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The user's data directory, in the environment of everything the test starts (Codex
    and its hooks too): the hooks must find the service these settings started."""
    monkeypatch.setenv("MTL_MCP_HOME", str(tmp_path / "mtl-home"))
    monkeypatch.setenv("MTL_MCP_STARTER", "1")
    return load_settings(tmp_path / "mtl-home", starter=True)


def run_mtl(codex: Codex, *args: str) -> subprocess.CompletedProcess[str]:
    """`mtl-mcp ARGS` as the user runs it in a shell, beside their Codex."""
    mtl = Path(sys.executable).parent / "mtl-mcp"
    return subprocess.run(
        [str(mtl), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **codex.environment()},
        timeout=120,
        check=True,
    )


def our_hooks(codex: Codex, cwd: Path) -> dict[str, str]:
    """Codex's own view of the hooks install wrote: event -> trust status."""
    return {
        hook["eventName"]: hook["trustStatus"]
        for hook in codex.hooks(cwd)
        if "mtl-mcp" in (hook.get("command") or "")
    }


def items(request: RecordedRequest) -> list[dict[str, Any]]:
    return list(request.body.get("input", []))


def developer_texts(request: RecordedRequest) -> list[str]:
    return request.input_texts("developer")


def exec_session(codex: Codex, project: Path, prompt: str) -> subprocess.CompletedProcess[str]:
    project.mkdir(exist_ok=True)
    return codex.run(["exec", "--skip-git-repo-check", "-C", str(project), prompt], timeout=180)


def test_installed_hooks_bring_context_recall_on_the_plan_and_capture_in_codex(
    tmp_path: Path, fake: FakeOpenAI, data: Settings
) -> None:
    """`mtl-mcp install codex` writes three hooks Codex sees but does not run (codex exec
    skips them silently); `install codex --trust-hooks` makes Codex itself report them
    trusted. Then, in one `codex exec` session where the model states a plan and runs a
    shell command, never calling recall_insights: the session-start context reaches the
    first request; the NEXT request carries the framed notes recalled for that plan as a
    developer message right after the tool call; the ledger records both under Codex's
    session id and client; the session's end queues a Codex job for its rollout."""
    codex = Codex.install(tmp_path, fake)
    project = tmp_path / "project"
    project.mkdir()
    (project / "report.py").write_text("def month_start(d):\n    return d - 1\n")

    installed = run_mtl(codex, "install", "codex")
    assert "type /hooks and trust the 3 mtl-mcp hooks" in installed.stderr
    assert our_hooks(codex, project) == dict.fromkeys(OUR_EVENTS, "untrusted")
    doctor = json.loads(run_mtl(codex, "doctor", "--json").stdout)
    [check] = [c for c in doctor if c["name"] == "codex hooks"]
    assert not check["ok"] and "SessionStart untrusted" in check["detail"]
    fake.reply_text("Nothing to do.")
    untrusted = exec_session(codex, project, "Say hello.")
    assert not any(INVITATION in t for t in developer_texts(fake.response_requests[0]))
    assert "Nothing to do." in untrusted.stdout  # the session ran, without any hook
    assert not list(Spool(data).jobs())

    trusted = run_mtl(codex, "install", "codex", "--trust-hooks")
    assert "Recorded Codex's trust in the 3 mtl-mcp hooks" in trusted.stderr
    assert our_hooks(codex, project) == dict.fromkeys(OUR_EVENTS, "trusted")  # Codex agrees
    doctor = json.loads(run_mtl(codex, "doctor", "--json").stdout)
    assert [c["ok"] for c in doctor if c["name"] == "codex hooks"] == [True]

    # A warm service, as after a first window: the hook's budget is 0.8 s.
    mtl = str(Path(sys.executable).parent / "mtl-mcp")
    env = {**os.environ, **codex.environment()}
    subprocess.run([mtl, "serve"], env=env, stdin=subprocess.DEVNULL, check=True, timeout=60)
    run_mtl(codex, "recall", "warm the service up")
    before = len(fake.response_requests)
    fake.reply_call("exec_command", {"cmd": "cat report.py"}, text=FLAKY_PLAN)
    fake.reply_text("Fixed; the suite passes.")
    done = exec_session(codex, project, "Fix the month-start crash.")
    assert "Fixed; the suite passes." in done.stdout, done.stderr

    first, after_call = fake.response_requests[before:]
    assert any(t.startswith(INVITATION) for t in developer_texts(first))  # session-start
    assert not any(PLAN_NOTES_HEADER in t for t in developer_texts(first))
    [notes] = [t for t in developer_texts(after_call) if t.startswith(PLAN_NOTES_HEADER)]
    kinds = [(i.get("type"), i.get("role")) for i in items(after_call)]
    where = next(
        n
        for n, item in enumerate(items(after_call))
        if any(part.get("text") == notes for part in item.get("content") or [])
    )
    assert kinds[where - 1 : where + 2] == [
        ("function_call", None),
        ("message", "developer"),  # Codex puts hook context between the call and its output
        ("function_call_output", None),
    ]

    said = re.search(r"^session id: (\S+)$", done.stderr, re.M)
    assert said, done.stderr
    session_id = said[1]
    [rollout] = (codex.codex_home / "sessions").rglob(f"rollout-*{session_id}.jsonl")

    def report() -> dict[str, Any] | None:
        reports = json.loads(run_mtl(codex, "sessions", "--json").stdout)
        found = [r for r in reports if r["session_id"] == session_id]
        return found[0] if found and len(found[0]["recalls"]) == 2 else None

    wait_for(lambda: report() is not None, "the ledger")
    entry = report()
    assert entry is not None and entry["client"] == "codex"
    context, planned = entry["recalls"]
    assert [(r["trigger"], r["client"]) for r in (context, planned)] == [
        ("session-start", "codex"),
        ("hook", "codex"),
    ]
    assert planned["plan"] == FLAKY_PLAN
    start_ids = [h["id"] for h in context["hits"]]
    memory = Memory(data)
    try:
        expected = unasked(memory.recall(FLAKY_PLAN, k=3, exclude_ids=start_ids), MIN_P)
    finally:
        memory.close()
    assert expected and [h["id"] for h in planned["hits"]] == [h.id for h in expected]
    assert all(f"id {h.id}]" in notes for h in expected)
    assert not any(f"id {i}]" in notes for i in start_ids)  # never what the start showed

    wait_for(lambda: bool(list(Spool(data).jobs())), "the SessionEnd job")
    [(_, job)] = list(Spool(data).jobs())
    assert (job.session_id, job.client, job.format) == (session_id, "codex", "codex")
    assert Path(job.transcript_path) == rollout
    assert "clamping SessionEnd" not in done.stderr  # our timeout is Codex's limit

    run_mtl(codex, "uninstall", "codex")
    assert our_hooks(codex, project) == {}
    # config.toml held nothing but the server and the trust, hooks.json nothing but ours
    assert not (codex.codex_home / "config.toml").exists()
    assert not (codex.codex_home / "hooks.json").exists()
