"""The tool-use hook, run as a client runs it (`mtl-mcp hook tool-use`, JSON on stdin)
against the real shared service: when it recalls, what it never repeats, when it gives up.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from mtl_mcp import Memory
from mtl_mcp.config import Settings, load_settings
from mtl_mcp.hooks.fast import STATE_FOLDER
from mtl_mcp.index.gate import unasked
from mtl_mcp.operations.service import request
from mtl_mcp.schemas import RecallOrigin
from mtl_mcp.server.calls import ServiceMemory
from tests.conftest import FLAKY_PLAN, LEAKED, distinct_lessons, serve_warm

pytestmark = pytest.mark.slow

MTL_MCP = str(Path(sys.executable).with_name("mtl-mcp"))
PLAN = (
    "First I will reproduce the flaky tests in a minimal case. Then I will isolate the "
    "cause, fix it and rerun the suite to verify."
)
FAILING = "The flaky tests fail again. New plan: log the inputs of the flaky tests, then " + (
    "inspect before editing them and review the diff of the fix."
)


class Session:
    """One client session: its transcript, and the hook run after each of its tool calls."""

    def __init__(self, settings: Settings, folder: Path, session: str = "s-1") -> None:
        self.settings, self.session = settings, session
        self.transcript = folder / f"{session}.jsonl"
        self.lines: list[dict[str, Any]] = []
        self.calls = 0
        self.prompt_id = "p0"

    def prompt(self, text: str) -> None:
        self.prompt_id = f"p{len(self.lines)}"
        self.lines.append({"type": "user", "uuid": self.prompt_id, "message": {"content": text}})

    def say(self, text: str) -> None:
        self.lines.append(
            {"type": "assistant", "message": {"content": [{"type": "text", "text": text}]}}
        )

    def tool(self, name: str = "Read", arguments: Any = None, failed: bool = False) -> str:
        """Call a tool; the hook's stdout."""
        self.calls += 1
        tool_id = f"t{self.calls}"
        block = {"type": "tool_use", "id": tool_id, "name": name, "input": arguments or {}}
        self.lines.append({"type": "assistant", "message": {"content": [block]}})
        self.transcript.write_text("\n".join(json.dumps(line) for line in self.lines) + "\n")
        payload = {
            "session_id": self.session,
            "transcript_path": str(self.transcript),
            "cwd": str(self.transcript.parent),
            "prompt_id": self.prompt_id,
            "hook_event_name": "PostToolUseFailure" if failed else "PostToolUse",
            "tool_name": name,
            "tool_input": arguments or {},
            "tool_use_id": tool_id,
        }
        done = subprocess.run(
            [MTL_MCP, "hook", "tool-use"],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            env={**os.environ, "MTL_MCP_HOME": str(self.settings.home)},
            timeout=60,
        )
        assert done.returncode == 0 and done.stderr == "", done.stderr
        return done.stdout


def injected(stdout: str) -> list[str]:
    """The ids of the notes a hook answer hands the model."""
    if not stdout:
        return []
    answer = json.loads(stdout)["hookSpecificOutput"]
    assert answer["hookEventName"] in ("PostToolUse", "PostToolUseFailure")
    return [
        line.rsplit("id ", 1)[1].rstrip("]")
        for line in answer["additionalContext"].splitlines()
        if " · id ins_" in line
    ]


@pytest.fixture(autouse=True)
def every_note(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """These tests are about the hook's machinery, over templated lessons the relevance gate
    rightly finds no better than each other: every top-3 note passes, unless a test is
    about the gate itself (its name says `gate`)."""
    if "gate" not in request.node.name:
        monkeypatch.setenv("MTL_MCP_AUTO_RECALL_MIN_P", "0")


@pytest.fixture
def warm(settings: Settings) -> Settings:
    """A store of flaky-test lessons (and others), and a warm service for it."""
    memory = Memory(settings)
    memory.record(distinct_lessons(40, offset=40))  # flaky tests, shell scripts, API responses, ...
    memory.close()
    serve_warm(settings)
    return settings


def test_a_stated_plan_gets_its_notes_once_per_task_and_never_again(
    warm: Settings, tmp_path: Path
) -> None:
    """The first tool call after the plan brings the gate's pick of the top 3 (the
    in-process answer); later calls of the task bring nothing; a new prompt with the same
    plan brings only notes not shown yet; the ledger records each, with the hook as the
    trigger."""
    session = Session(warm, tmp_path)
    session.prompt("The flaky tests fail on CI; fix them.")
    session.say("Let me look.")
    assert session.tool() == ""  # no plan yet
    session.say(PLAN)
    first = injected(session.tool())
    memory = Memory(warm)
    try:
        expected = unasked(memory.recall(PLAN, k=3), warm.auto_recall_min_p)
        assert first == [h.id for h in expected] and first
        assert session.tool() == "" and session.tool("Bash", {"command": "pytest"}) == ""
        session.prompt("Please try that again from scratch.")
        session.say(PLAN)
        second = injected(session.tool())
        others = memory.recall(PLAN, k=3, exclude_ids=first)
        assert second == [h.id for h in unasked(others, warm.auto_recall_min_p)]
        assert not set(first) & set(second)
    finally:
        memory.close()
    report = ServiceMemory(warm).sessions(5)[0]  # the service's: its ledger, written or not
    assert [(r.trigger, [h.id for h in r.hits]) for r in report.recalls] == [
        ("hook", first),
        *([("hook", second)] if second else []),
    ]
    assert report.recalls[0].plan == PLAN  # what was said just before the tool call


def test_no_recall_when_the_model_asked_itself_or_the_prompt_continues(
    warm: Settings, tmp_path: Path
) -> None:
    """The model's own recall_insights call (or its ToolSearch for it) settles the task; a
    prompt of a few words continues the task before; a planning tool's plan counts."""
    session = Session(warm, tmp_path)
    session.prompt("Fix the flaky tests.")
    session.say(PLAN)
    assert session.tool("ToolSearch", {"query": "select:mcp__mtl-mcp__recall_insights"}) == ""
    assert session.tool("mcp__mtl-mcp__recall_insights", {"plan": PLAN}) == ""
    assert session.tool() == ""
    session.prompt("go on")
    session.say(PLAN)
    assert session.tool() == ""
    session.prompt("Now plan the next part properly.")
    todo = {
        "todos": [
            {"content": "Log the inputs of flaky tests and isolate them in a minimal case"},
            {"content": "Review the diff of the fix"},
        ]
    }
    assert injected(session.tool("TodoWrite", todo))


def test_after_repeated_failures_a_new_plan_gets_one_more_recall(
    warm: Settings, tmp_path: Path
) -> None:
    """Three failed tool calls, then new words from the model: a second recall, of notes
    not shown before."""
    session = Session(warm, tmp_path)
    session.prompt("The flaky tests fail on CI; fix them.")
    session.say(PLAN)
    first = injected(session.tool())
    assert first
    for _ in range(3):
        assert session.tool("Bash", {"command": "pytest"}, failed=True) == ""
    assert session.tool() == ""  # no new words yet
    session.say(FAILING)
    again = injected(session.tool())
    assert again and not set(again) & set(first)


def test_past_its_budget_the_hook_returns_nothing_and_says_why(
    warm: Settings, tmp_path: Path
) -> None:
    """A service that does not answer (stopped): the hook returns nothing within its budget
    plus the start of a process, logs why, and recalls at a later call once it answers."""
    session = Session(warm, tmp_path)
    session.prompt("The flaky tests fail on CI; fix them.")
    session.say(PLAN)
    status = request(warm, "status")
    assert status
    os.kill(status["pid"], signal.SIGSTOP)
    try:
        started = time.monotonic()
        assert session.tool() == ""
        took = time.monotonic() - started
    finally:
        os.kill(status["pid"], signal.SIGCONT)
    assert took < warm.hook_budget_seconds + 5  # never the client's own timeout
    log = (warm.logs_dir / "hooks.log").read_text()
    assert "the service did not answer within" in log
    assert injected(session.tool())  # the next call, once it answers


def test_a_payload_of_another_shape_or_client_does_nothing(warm: Settings, tmp_path: Path) -> None:
    """Claude Code's hook entries are also run by other clients: an unknown payload, or
    garbage, gets no answer and no error."""
    for raw in (
        "",
        "not json",
        "[]",
        json.dumps({"hookEventName": "PostToolUse", "sessionId": "x"}),
    ):
        done = subprocess.run(
            [MTL_MCP, "hook", "tool-use"],
            input=raw,
            capture_output=True,
            text=True,
            env={**os.environ, "MTL_MCP_HOME": str(warm.home)},
            timeout=60,
        )
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_cursor_gets_its_own_answer_shape(warm: Settings, tmp_path: Path) -> None:
    """Cursor's postToolUse payload and `additional_context` answer."""
    transcript = tmp_path / "cursor.jsonl"
    transcript.write_text(
        "\n".join(
            json.dumps(line)
            for line in (
                {"type": "user", "uuid": "u", "message": {"content": "Fix the flaky tests."}},
                {"type": "assistant", "message": {"content": [{"type": "text", "text": PLAN}]}},
            )
        )
    )
    payload = {
        "conversation_id": "c-1",
        "generation_id": "g-1",
        "hook_event_name": "postToolUse",
        "cursor_version": "2.0",
        "tool_name": "Read",
        "tool_input": {},
        "tool_output": "",
        "transcript_path": str(transcript),
    }
    done = subprocess.run(
        [MTL_MCP, "hook", "tool-use"],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env={**os.environ, "MTL_MCP_HOME": str(warm.home)},
        timeout=60,
    )
    assert "id ins_" in json.loads(done.stdout)["additional_context"]


def test_a_note_in_the_session_start_context_is_not_recalled_again(
    warm: Settings, tmp_path: Path
) -> None:
    """The session-start hook tells the session what it showed: the plan's recall leaves
    those notes out."""
    memory = Memory(warm)
    try:
        best = memory.recall(PLAN, k=1)[0]
    finally:
        memory.close()
    started = subprocess.run(
        [MTL_MCP, "hook", "session-start"],
        input=json.dumps({"session_id": "s-1", "cwd": str(tmp_path), "source": "startup"}),
        capture_output=True,
        text=True,
        env={**os.environ, "MTL_MCP_HOME": str(warm.home)},
        timeout=60,
    )
    assert started.returncode == 0
    shown_at_start = ServiceMemory(warm).sessions(1)[0].recalls
    session = Session(warm, tmp_path)
    session.prompt("The flaky tests fail on CI; fix them.")
    session.say(PLAN)
    notes = injected(session.tool())
    at_start = {h.id for r in shown_at_start for h in r.hits}
    assert not set(notes) & at_start
    assert best.id not in notes or best.id not in at_start


def test_a_plan_waiting_for_the_service_is_kept_without_its_secrets(
    settings: Settings, tmp_path: Path
) -> None:
    """With no service yet, the hook keeps the plan in the session's state for a later
    tool call, on disk for days: redacted, as the ledger keeps plans."""
    session = Session(settings, tmp_path, session="s-secret")
    session.prompt("Deploy the nightly report job again; it fails on the first of the month.")
    session.say(f"{PLAN} The job runs with AWS_ACCESS_KEY_ID={LEAKED} in its environment.")
    assert session.tool() == ""  # no service answered: one is starting
    [state] = (settings.home / STATE_FOLDER).glob("*.json")
    waiting = json.loads(state.read_text())["waiting"]
    assert LEAKED not in state.read_text() and waiting.startswith(PLAN)


@pytest.mark.parametrize("min_p", ["", "0.2", "1"])
def test_the_hook_injects_what_the_relevance_gate_passes_as_in_process_memory_does(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, min_p: str
) -> None:
    """Over the starter pack, the hook injects those of the top 3 whose gate probability
    reaches MTL_MCP_AUTO_RECALL_MIN_P (default, lower, and 1: none), exactly the notes
    in-process `recall_for_session` gives for the same plan and setting, and the ledger
    records just those."""
    if min_p:
        monkeypatch.setenv("MTL_MCP_AUTO_RECALL_MIN_P", min_p)
    gated = load_settings(settings.home)
    memory = Memory(gated)
    try:
        memory.seed()  # the starter pack: lessons that differ, as a real store's do
        top = memory.recall(FLAKY_PLAN, k=3)
        expected = memory.recall_for_session(FLAKY_PLAN, RecallOrigin(session_id="in-process"))
    finally:
        memory.close()
    assert expected == unasked(top, gated.auto_recall_min_p)
    assert any(h.p is not None and h.p < gated.auto_recall_min_p for h in top)  # one fails
    serve_warm(gated)
    session = Session(gated, tmp_path)
    session.prompt("The suite fails now and then on CI; fix it.")
    session.say(FLAKY_PLAN)
    notes = injected(session.tool())
    assert notes == [h.id for h in expected]
    assert bool(notes) == (min_p != "1")
    recalls = ServiceMemory(gated).sessions(5)
    hooked = [r for report in recalls for r in report.recalls if report.session_id == "s-1"]
    assert [[h.id for h in r.hits] for r in hooked] == ([notes] if notes else [])
