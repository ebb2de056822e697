"""mtl-mcp inside the real Claude Code CLI driven interactively: its TUI in tmux, not `-p`.

Issue 17 wants plan-triggered recall "in `claude -p` ... and interactively". The `-p` side
is test_claude_code.py's closed loop; this is the other: a throwaway HOME whose first-run
screens are answered in `~/.claude.json`, keys sent to a detached tmux session, the screen
read with `capture-pane`, the model played by `FakeAnthropic`. Everything is polled with
deadlines; the tmux server is killed whatever happens.
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mtl_mcp import Memory
from mtl_mcp.config import Settings, load_settings
from mtl_mcp.index.gate import unasked
from mtl_mcp.learning.proposals import DistilledInsights
from mtl_mcp.learning.spool import Spool
from tests.claude_code import ClaudeCode
from tests.conftest import FLAKY_PLAN as PLAN
from tests.fake_anthropic import FakeAnthropic, RecordedRequest
from tests.frontdoors.test_claude_code import (
    MIN_P,
    calls_of,
    hook_notes,
    note_ids,
    note_titles,
    run_mtl,
)
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.alone]

TMUX = "/usr/bin/tmux"
INPUT_MARK = "\N{HEAVY RIGHT-POINTING ANGLE QUOTATION MARK ORNAMENT}"  # starts the input line
DUMMY_KEY = "sk-ant-test-dummy-key"  # what ClaudeCode.environment() exports
# The plan-mode plan: other lessons than PLAN's, so both recalls have notes left to give.
PLAN_MODE_PLAN = (
    "I will write a regression test that reproduces the month-start defect, land the bug fix "
    "together with that regression test, and then run the project's own test suite with its "
    "own runner, not a one-off script."
)
READ_NOTES = (
    "PostToolUse:Read hook additional context: mtl-mcp recalled these for the plan you just stated"
)
EXIT_PLAN_NOTES = (
    "PostToolUse:ExitPlanMode hook additional context: mtl-mcp recalled these for the plan "
    "you just stated"
)
PLAN_PROMPT = "Plan a fix for the month-start crash."
FIX_PROMPT = "Fix the month-start crash."
APPROVED = "The plan is approved; I will start with the regression test."
FIXED = "Fixed; the suite passes."
# Claude Code's plan-mode reminder names the file the model is to write its plan to.
PLAN_FILE = re.compile(r"(/\S+?/\.claude/plans/[\w.-]+\.md)")


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


@pytest.fixture
def data(tmp_path: Path) -> Settings:
    return load_settings(tmp_path / "mtl-home", starter=True)


class Tui:
    """One Claude Code TUI in a detached tmux session on a socket of its own."""

    def __init__(self, socket: Path, env: dict[str, str]) -> None:
        self.socket, self.env = socket, env

    def tmux(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [TMUX, "-S", str(self.socket), *args],
            capture_output=True, text=True, env=self.env, timeout=10,
        )  # fmt: skip

    def start(self, command: str, cwd: Path) -> None:
        started = self.tmux(
            "new-session", "-d", "-x", "200", "-y", "50", "-s", "claude", "-c", str(cwd), command
        )
        assert started.returncode == 0, started.stderr

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "claude").stdout

    def keys(self, *keys: str, literal: bool = False) -> None:
        sent = self.tmux("send-keys", "-t", "claude", *(["-l"] if literal else []), *keys)
        assert sent.returncode == 0, sent.stderr

    def wait_for(self, condition: Callable[[str], bool], what: str, timeout: float = 60) -> str:
        """The screen once `condition` holds for it; the screen in the error otherwise."""
        deadline = time.monotonic() + timeout
        while not condition(screen := self.screen()):
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; the screen:\n{screen}")
            time.sleep(0.2)
        return screen

    def footer(self) -> str:
        lines = [line for line in self.screen().splitlines() if line.strip()]
        return lines[-1] if lines else ""

    def prompt(self, text: str) -> None:
        """Type `text` at the input line and submit it once the TUI shows it there."""
        self.keys(text, literal=True)
        typed = re.compile(rf"^{INPUT_MARK}\s{re.escape(text)}\s*$", re.M)  # \xa0 after the mark
        self.wait_for(lambda s: bool(typed.search(s)), f"the prompt {text!r} typed")
        self.keys("Enter")

    def answer(self, dialog: str, key: str, timeout: float = 30) -> None:
        """Press `key` in the dialog showing `dialog` until it closes: a dialog that has
        just opened ignores keys for a moment (Claude Code guards against a stray Enter)."""
        deadline = time.monotonic() + timeout
        while dialog in self.screen():
            if time.monotonic() > deadline:
                raise AssertionError(f"the dialog stayed open; the screen:\n{self.screen()}")
            self.keys(key)
            with contextlib.suppress(AssertionError):
                self.wait_for(lambda s: dialog not in s, f"{dialog!r} to close", timeout=1)

    def close(self) -> None:
        self.tmux("kill-server")


def first_run_answered(claude: ClaudeCode, project: Path) -> None:
    """Claude Code's first-run screens, answered as a user who has seen them would have:
    onboarding done (else it checks api.anthropic.com and exits), a theme, this folder
    trusted, the API key in the environment accepted."""
    path = claude.home / ".claude.json"
    config = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    config.update(
        hasCompletedOnboarding=True,
        theme="dark",
        customApiKeyResponses={"approved": [DUMMY_KEY[-20:]], "rejected": []},
    )
    config.setdefault("projects", {})[str(project)] = {"hasTrustDialogAccepted": True}
    path.write_text(json.dumps(config, indent=2), encoding="utf-8")


@dataclass(frozen=True)
class HookCall:
    """One PostToolUse or SessionEnd hook call: its payload, and the session's transcript as
    it was when the hook started."""

    payload: dict[str, Any]
    transcript: str


def record_hook_calls(claude: ClaudeCode, folder: Path) -> None:
    """Beside mtl-mcp's hooks, one that copies the transcripts first (a `cp`, so it starts
    before mtl-mcp's Python hook reads them), then keeps the payload. It prints nothing, so
    Claude Code hands the model nothing from it."""
    projects = shlex.quote(str(claude.home / ".claude" / "projects"))
    keep = (
        f'call={shlex.quote(str(folder))}/$(date +%s%N)-$$; mkdir -p "$call"; '
        f'cp -r {projects} "$call/projects"; cat > "$call/payload.json"'
    )
    hooks = claude.settings()["hooks"]
    for event in ("PostToolUse", "SessionEnd"):
        hooks[event][0]["hooks"].append({"type": "command", "command": keep})
    claude.update_settings(hooks=hooks)


def hook_calls(claude: ClaudeCode, folder: Path) -> list[HookCall]:
    """The recorded hook calls, oldest first."""
    projects = claude.home / ".claude" / "projects"
    calls = []
    for call in sorted(folder.iterdir(), key=lambda path: int(path.name.split("-")[0])):
        payload = json.loads((call / "payload.json").read_text(encoding="utf-8"))
        copy = call / "projects" / Path(payload["transcript_path"]).relative_to(projects)
        calls.append(HookCall(payload, copy.read_text(encoding="utf-8") if copy.is_file() else ""))
    return calls


def user_texts(request: RecordedRequest) -> list[str]:
    """The text blocks of the request's user messages, oldest first."""
    found = []
    for message in request.body["messages"]:
        if message["role"] == "user":
            content = message["content"]
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            found += [block["text"] for block in blocks if block.get("type") == "text"]
    return found


def play_the_model(fake: FakeAnthropic, source: Path) -> None:
    """Script the model for the whole TUI session as one function of each request, since
    Claude Code also makes side requests whose timing no fixed script can follow (a name
    for the session, asked for after a plan is approved):
    - a request offering no tools is such a side request: it gets a name;
    - after PLAN_PROMPT, in plan mode, the model does what Claude Code's reminder asks:
      write the plan to the plan file, call ExitPlanMode (the plan also as its input),
      then answer in text;
    - after FIX_PROMPT it states PLAN and Reads `source` in one turn, then answers.
    The first request that does not stream is the SessionEnd worker's: the replies scripted
    after this one answer it."""

    def turn(request: RecordedRequest) -> dict[str, Any] | None:
        if not request.body.get("stream"):
            return None
        if not request.body.get("tools"):
            return fake.message(json.dumps({"name": "fix-month-start"}))
        [*_, prompt] = [t for t in user_texts(request) if t in (PLAN_PROMPT, FIX_PROMPT)]
        if prompt == FIX_PROMPT:
            if calls_of(request, "Read"):
                return fake.message(FIXED)
            read = {"type": "tool_use", "id": f"toolu_read{len(fake.requests)}", "name": "Read"}
            blocks = [{"type": "text", "text": PLAN}, {**read, "input": {"file_path": str(source)}}]
            return fake.message(blocks=blocks, stop_reason="tool_use")
        if calls_of(request, "ExitPlanMode"):
            return fake.message(APPROVED)
        if calls_of(request, "Write"):
            return fake.tool_use("ExitPlanMode", {"plan": PLAN_MODE_PLAN})
        [plan_file, *_] = PLAN_FILE.findall(request.text)
        return fake.tool_use("Write", {"file_path": plan_file, "content": PLAN_MODE_PLAN})

    fake.reply_while(turn)


def after_tool(fake: FakeAnthropic, tui: Tui, tool: str, what: str) -> RecordedRequest:
    """The first request that carries the result of the model's call of `tool`."""

    def found() -> RecordedRequest | None:
        for request in fake.message_requests:
            ids = {
                block["id"]
                for message in request.body["messages"]
                if message["role"] == "assistant" and isinstance(message["content"], list)
                for block in message["content"]
                if block.get("type") == "tool_use" and block.get("name") == tool
            }
            if any(r["tool_use_id"] in ids for r in request.tool_results()):
                return request
        return None

    try:
        wait_for(lambda: found() is not None, what, timeout=60)
    except AssertionError as timeout:
        raise AssertionError(f"{timeout}; the screen:\n{tui.screen()}") from None
    request = found()
    assert request is not None
    return request


def test_interactive_claude_code_recalls_for_stated_and_plan_mode_plans(
    tmp_path: Path, fake: FakeAnthropic, data: Settings
) -> None:
    """In Claude Code's TUI after `mtl-mcp install claude-code`: a plan made in plan mode and
    approved in the ExitPlanMode dialog, then a plan stated in text before a Read, each bring
    notes recalled for that plan in the next request; `/exit` ends the session and its
    SessionEnd hook queues it for the worker, which is given the Read's notes.

    Interactive Claude Code hands the hook ExitPlanMode's plan in the tool's response, and
    may write the turn to the transcript after the hook starts: both are handled."""
    claude = ClaudeCode.install(tmp_path, fake)
    run_mtl(data, claude, "install", "claude-code")
    project = tmp_path / "project"
    project.mkdir()
    source = project / "report.py"
    source.write_text("def month_start(d):\n    return d - 1\n")
    first_run_answered(claude, project)
    recorded = tmp_path / "hook-calls"
    record_hook_calls(claude, recorded)
    # A warm service, as in the -p test: the hook's budget is met at the first call.
    env = {**claude.environment(), "MTL_MCP_HOME": str(data.home), "MTL_MCP_STARTER": "1"}
    mtl = str(Path(sys.executable).parent / "mtl-mcp")
    subprocess.run([mtl, "serve"], env=env, stdin=subprocess.DEVNULL, check=True, timeout=60)
    run_mtl(data, claude, "recall", "warm the service up")

    play_the_model(fake, source)
    fake.reply_json({"outcome": "success", "reason": "passes", "verdicts": []})  # the worker's
    fake.reply_json(DistilledInsights.model_validate({"insights": []}))

    exit_code = tmp_path / "claude-exit-code"
    command = f"{shlex.quote(str(claude.binary))}; echo $? > {shlex.quote(str(exit_code))}"
    tui = Tui(tmp_path / "tmux.sock", claude.environment())
    try:
        tui.start(command, project)
        ready = ("shift+tab to cycle", "? for shortcuts")  # the footer under the input line
        tui.wait_for(lambda s: any(r in s for r in ready), "the input line (no first-run screen)")

        # Plan mode: shift+tab cycles the permission modes; the footer names the current one.
        for _ in range(6):
            if "plan mode on" in (mode := tui.footer()):
                break
            tui.keys("BTab")
            tui.wait_for(lambda s, was=mode: tui.footer() != was, "the next permission mode")
        assert "plan mode on" in tui.footer(), tui.screen()
        tui.prompt(PLAN_PROMPT)
        proceed = "Would you like to proceed?"
        tui.wait_for(lambda s: proceed in s, "the ExitPlanMode dialog")
        tui.answer(proceed, "Enter")  # its first option: "Yes, and use auto mode"
        exited = after_tool(fake, tui, "ExitPlanMode", "the request after the approved plan")
        [approved] = [r for r in exited.tool_results() if "approved" in str(r["content"])]
        assert not approved.get("is_error"), approved
        tui.wait_for(lambda s: APPROVED in s, "the answer to the plan")
        plan_notes = hook_notes(exited)

        # A plan stated in text before a Read, in the same session.
        tui.prompt(FIX_PROMPT)
        read = after_tool(fake, tui, "Read", "the request after the Read")
        notes = hook_notes(read)
        tui.wait_for(lambda s: FIXED in s, "the answer to the fix")

        tui.prompt("/exit")
        wait_for(
            lambda: exit_code.is_file() and exit_code.read_text().strip() != "",
            "the exit",
            timeout=60,
        )
        assert exit_code.read_text().strip() == "0", tui.screen()
    finally:
        tui.close()

    calls = hook_calls(claude, recorded)
    ended = [c.payload for c in calls if c.payload["hook_event_name"] == "SessionEnd"]
    assert [p["reason"] for p in ended] == ["prompt_input_exit"]
    session_id = ended[0]["session_id"]
    spool = Spool(data)
    wait_for(
        lambda: spool.done_log.exists() and not any(spool.pending.glob("*.json")),
        "the SessionEnd worker",
        timeout=60,
    )
    done = [json.loads(line) for line in spool.done_log.read_text().splitlines()]
    assert [entry["session_id"] for entry in done] == [session_id]
    assert fake.pending == 0

    [started] = json.loads(run_mtl(data, claude, "sessions", "--json").stdout)
    assert started["session_id"] == session_id
    hits = [(r["trigger"], [h["id"] for h in r["hits"]]) for r in started["recalls"]]
    start_ids = [i for trigger, ids in hits if trigger == "session-start" for i in ids]
    memory = Memory(data)
    try:  # what the plan-mode plan brings, none of it given at session start
        found = unasked(memory.recall(PLAN_MODE_PLAN, k=3, exclude_ids=start_ids), MIN_P)
        expected = [h.id for h in found]
    finally:
        memory.close()
    assert expected  # so a hook that recalls for the plan has notes to give
    [read_call] = [c for c in calls if c.payload.get("tool_name") == "Read"]
    assert read_call.payload["prompt_id"] and read_call.payload["transcript_path"]  # as in -p
    # Interactive Claude Code may write the turn to the transcript only after starting the
    # hook (`-p` writes it first): the hook reads it again for a moment, never an older turn.
    assert notes is not None, "no notes after the Read"
    assert notes.startswith(READ_NOTES), notes
    assert not set(note_ids(notes)) & set(start_ids + expected)
    judged = next(
        r for r in fake.message_requests if "Notes the assistant was given" in r.user_text
    )
    assert all(title in judged.user_text for title in note_titles(notes))
    # After an approved plan Claude Code 2.1.332 hands the hook not the model's input (it
    # strips `plan`) but the plan file's text, in the tool's response: the hook reads it there.
    [exit_call] = [c.payload for c in calls if c.payload.get("tool_name") == "ExitPlanMode"]
    assert exit_call["tool_input"] == {} and exit_call["tool_response"]["plan"] == PLAN_MODE_PLAN
    assert plan_notes is not None, "no notes after the approved plan"
    assert plan_notes.startswith(EXIT_PLAN_NOTES), plan_notes
    assert note_ids(plan_notes) == expected
    given = [note_ids(plan_notes), note_ids(notes)]
    assert [ids for trigger, ids in hits if trigger == "hook"] == given  # in the ledger
