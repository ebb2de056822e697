"""The first session right after install, in the real Claude Code, on a busy machine: no
plan is lost while the service warms.

`mtl-mcp install claude-code`, no service running, two CPU-bound neighbours on the 2-core
machine, and a scripted model (the fake Messages API) that states its plan and calls its
first tool at once, then a second one. The service starts with the session (its start hook
and its window both start it) and is still warming when the first PostToolUse hook asks:
that hook misses its budget and keeps the plan; the plan's note must reach the model after
the first or the second tool call, once. A scripted model shows that the machinery works,
never that memory helps.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mtl_mcp.config import Settings, load_settings
from mtl_mcp.operations.service import is_running, stop_services
from tests.claude_code import ClaudeCode
from tests.conftest import FLAKY_LESSON, FLAKY_PLAN
from tests.fake_anthropic import FakeAnthropic, RecordedRequest
from tests.frontdoors.test_claude_code import hook_notes, note_ids, note_titles, run_mtl

pytestmark = [pytest.mark.slow, pytest.mark.alone]

MODEL_TURN = 3.0  # seconds the scripted model takes for its second turn, as a model would


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


@pytest.fixture
def data(tmp_path: Path) -> Iterator[Settings]:
    settings = load_settings(tmp_path / "mtl-home", starter=True)
    yield settings
    stop_services(settings.home)


@pytest.fixture
def neighbours() -> Iterator[None]:
    """Two processes that keep both cores busy for the whole test."""
    burners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)
        for _ in range(2)
    ]
    try:
        yield
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


def tool_results(request: RecordedRequest) -> int:
    return len(request.tool_results())


def test_the_first_sessions_plan_gets_its_note_after_its_first_or_second_tool_call(
    tmp_path: Path, fake: FakeAnthropic, data: Settings, neighbours: None
) -> None:
    claude = ClaudeCode.install(tmp_path, fake)
    run_mtl(data, claude, "install", "claude-code")
    stop_services(data.home)  # right after install: nothing warm
    assert not is_running(data)
    project = tmp_path / "project"
    project.mkdir()
    for name in ("test_clock.py", "conftest.py"):
        (project / name).write_text("import time\n\ndef test_tick():\n    assert time.time()\n")
    answered: list[float] = []

    def turn(request: RecordedRequest) -> dict[str, Any] | None:
        done = tool_results(request)
        answered.append(time.monotonic())
        if done == 0:  # the plan and the first tool call, at once
            read = {"file_path": str(project / "test_clock.py")}
            blocks = [
                {"type": "text", "text": FLAKY_PLAN},
                {"type": "tool_use", "id": "toolu_read1", "name": "Read", "input": read},
            ]
            return fake.message(blocks=blocks, stop_reason="tool_use")
        if done == 1:  # a second look, after a model's turn
            time.sleep(MODEL_TURN)
            read = {"file_path": str(project / "conftest.py")}
            blocks = [{"type": "tool_use", "id": "toolu_read2", "name": "Read", "input": read}]
            return fake.message(blocks=blocks, stop_reason="tool_use")
        return None

    fake.reply_while(turn)
    fake.reply_text("The clock is now injected; the test is deterministic.")
    started = time.monotonic()
    done = claude.run(
        ["-p", "The clock test fails now and then on CI; fix it.", "--output-format", "json"],
        cwd=project,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    session_id = json.loads(done.stdout)["session_id"]
    assert answered and answered[0] - started < 30  # Claude Code's own start, then at once

    conversation = [r for r in fake.message_requests if r.body.get("stream")]
    with_notes = [r for r in conversation if hook_notes(r)]  # at most one note block each
    logs = [data.home / "logs" / f"{name}.log" for name in ("hooks", "service")]
    assert with_notes, "\n".join(log.read_text() for log in logs if log.exists())
    notes = hook_notes(with_notes[0])
    assert notes is not None
    assert tool_results(with_notes[0]) in (1, 2)  # after the first or second tool call
    assert FLAKY_LESSON in note_titles(notes)
    [report] = json.loads(run_mtl(data, claude, "sessions", "--json").stdout)
    assert report["session_id"] == session_id
    start_ids = [h["id"] for r in report["recalls"] if r["trigger"] == "session-start"
                 for h in r["hits"]]  # fmt: skip
    hooked = [[h["id"] for h in r["hits"]] for r in report["recalls"] if r["trigger"] == "hook"]
    assert hooked == [note_ids(notes)]  # once
    assert not set(note_ids(notes)) & set(start_ids)  # never what the session was given
