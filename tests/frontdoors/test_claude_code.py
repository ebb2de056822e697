"""mtl-mcp inside the real Claude Code CLI (npm, pinned), scripted by a fake Messages API.

Each test is a new user: a throwaway HOME, a fresh data directory, `claude -p` sessions
against `FakeAnthropic` on 127.0.0.1. The fake plays the model: it loads our tool through
ToolSearch (Claude Code defers MCP tools), calls it, and answers; later it plays the
distillation API for the SessionEnd worker.
"""

from __future__ import annotations

import json
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
from mtl_mcp.learning.proposals import DistilledInsights, Judgement
from mtl_mcp.learning.spool import Spool
from mtl_mcp.operations.context import INVITATION
from mtl_mcp.text.render import RECALL_HEADER
from mtl_mcp.text.starter import starter_drafts
from tests.claude_code import ClaudeCode
from tests.conftest import FLAKY_PLAN
from tests.fake_anthropic import FakeAnthropic, RecordedRequest
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.alone]

REPO = Path(__file__).resolve().parent.parent.parent
RECALL = "mcp__mtl-mcp__recall_insights"
PLUGIN_RECALL = "mcp__plugin_mtl-mcp_mtl-mcp__recall_insights"
PLAN = (
    "First I will reproduce the failing test on its own to see the real error. Then I will "
    "read the code it exercises and make the smallest fix. Finally I will rerun the whole "
    "suite before saying it is done."
)
LESSON = {
    "title": "Search the memory before planning a fix",
    "description": "When starting a bug fix in an unfamiliar project.",
    "content": "Recall lessons for the plan before editing; earlier sessions often name the "
    "check that proves the fix, which saves a wrong first attempt.",
    "polarity": "success",
    "category": "workflow-discipline",
    "domain": "repo-bugfix",
    "languages": [],
    "tags": ["memory"],
}
STARTER_TITLES = [draft.title for draft in starter_drafts()]


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


@pytest.fixture
def data(tmp_path: Path) -> Settings:
    return load_settings(tmp_path / "mtl-home", starter=True)


def calls_of(request: RecordedRequest, tool: str) -> list[str]:
    """The ids of the model's calls of `tool` so far in the conversation."""
    return [
        block["id"]
        for message in request.body["messages"]
        if message["role"] == "assistant"
        for block in message["content"]
        if isinstance(block, dict) and block.get("name") == tool
    ]


def agent_calls(tool: str, arguments: dict[str, Any], fake: FakeAnthropic) -> None:
    """Script the model: load `tool` through ToolSearch (again while its server is still
    connecting, up to 5 searches), call it once, then answer in text."""

    def turn(request: RecordedRequest) -> dict[str, Any] | None:
        if calls_of(request, tool) or len(calls_of(request, "ToolSearch")) >= 5:
            return None  # the next scripted reply answers
        if tool in request.tool_names:
            return fake.tool_use(tool, arguments)
        return fake.tool_use("ToolSearch", {"query": f"select:{tool}"})

    fake.reply_while(turn)
    fake.reply_text("I reproduced the failure, fixed it and the suite passes.")


def tool_result_of(request: RecordedRequest, tool_use_id: str) -> dict[str, Any]:
    [result] = [r for r in request.tool_results() if r["tool_use_id"] == tool_use_id]
    return result


def loaded_by_tool_search(request: RecordedRequest, tool: str) -> bool:
    """Whether a ToolSearch result in the conversation handed the model `tool`."""
    reference = {"type": "tool_reference", "tool_name": tool}
    return any(
        isinstance(result["content"], list) and reference in result["content"]
        for result in request.tool_results()
    )


def result_text(result: dict[str, Any]) -> str:
    """What the model read: Claude Code sends a string, or text blocks."""
    content = result["content"]
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content)


def assert_framed_starter_notes(text: str) -> None:
    """Recall's structured content, as Claude Code shows it: framed notes, starter titles."""
    shown = json.loads(text)
    assert list(shown) == ["notes", "results"]
    notes = shown["notes"]
    assert notes.startswith(RECALL_HEADER)
    assert sum(f". {title} [" in notes for title in STARTER_TITLES) == len(shown["results"]) == 3
    for n, block in enumerate(notes.split("\n\n")[1:], 1):  # title, When, Lesson: a line each
        lines = block.split("\n")
        assert [line.split()[0] for line in lines] == [f"{n}.", "When:", "Lesson:"]


def run_mtl(settings: Settings, claude: ClaudeCode, *args: str) -> subprocess.CompletedProcess[str]:
    """`mtl-mcp ARGS` as the user runs it in a shell, beside their Claude Code."""
    env = {
        **claude.environment(),
        "MTL_MCP_HOME": str(settings.home),
        "MTL_MCP_STARTER": "1",
    }
    mtl = Path(sys.executable).parent / "mtl-mcp"
    return subprocess.run(
        [str(mtl), *args], capture_output=True, text=True, env=env, timeout=120, check=True
    )


def test_one_session_after_install_uses_and_grows_the_memory(
    tmp_path: Path, fake: FakeAnthropic, data: Settings
) -> None:
    """After `mtl-mcp install claude-code` and in ONE `claude -p` session, without
    --allowedTools: the session-start context reaches the model, recall_insights loads
    through ToolSearch, is allowed, and its framed notes reach the model; the SessionEnd
    worker distils the session; `claude mcp list` then leaves no job in the queue."""
    claude = ClaudeCode.install(tmp_path, fake)
    installed = run_mtl(data, claude, "install", "claude-code")
    assert "without asking" in installed.stderr
    agent_calls(RECALL, {"plan": PLAN}, fake)
    fake.reply_json(Judgement(outcome="success", reason="the suite passes"))  # the worker's
    fake.reply_json(DistilledInsights.model_validate({"insights": [LESSON]}))

    project = tmp_path / "project"
    done = claude.run(["-p", "Fix the failing date test.", "--output-format", "json"], cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["permission_denials"] == []

    first = fake.message_requests[0]
    assert f"SessionStart:startup hook success: {INVITATION}" in first.messages_text
    assert RECALL_HEADER in first.messages_text
    assert sum(f"- {title}: " in first.messages_text for title in STARTER_TITLES) == 4

    session = [r for r in fake.message_requests if r.body.get("stream")]  # not the worker's
    assert RECALL not in session[0].tool_names  # deferred: it has to be loaded
    assert loaded_by_tool_search(session[-1], RECALL)
    [recall_id] = calls_of(session[-1], RECALL)
    result = tool_result_of(session[-1], recall_id)
    assert not result.get("is_error"), result  # allowed: no permission prompt, no refusal
    assert_framed_starter_notes(result_text(result))
    # The tool call is in the ledger, under Claude Code's session id (which the window
    # passes to the service).
    [report] = json.loads(run_mtl(data, claude, "sessions", "--json").stdout)
    assert report["session_id"] == json.loads(done.stdout)["session_id"]
    tool_ids = [r["id"] for r in json.loads(result_text(result))["results"]]
    assert [(r["trigger"], [h["id"] for h in r["hits"]]) for r in report["recalls"]][-1] == (
        "tool",
        tool_ids,
    )

    spool = Spool(data)
    wait_for(
        lambda: spool.done_log.exists() and not any(spool.pending.glob("*.json")),
        "the SessionEnd worker",
        timeout=60,
    )
    memory = Memory(data)
    try:
        [learned] = memory.list(query=LESSON["title"], limit=1)[0]
    finally:
        memory.close()
    assert learned.title == LESSON["title"]
    assert learned.session_id == json.loads(done.stdout)["session_id"]  # from this session
    assert fake.pending == 0  # the judge and the distiller were asked, nothing else

    listed = claude.run(["mcp", "list"], cwd=project)
    assert "mtl-mcp" in listed.stdout and "Connected" in listed.stdout, listed.stdout
    assert json.loads(run_mtl(data, claude, "queue", "--json").stdout) == []
    hook_log = (data.home / "logs" / "hooks.log").read_text()
    assert "dropped: its transcript does not exist" in hook_log


# ------------------------------------------------------------------ the plugin


def validated(claude: ClaudeCode, folder: Path) -> dict[str, Any]:
    done = claude.run(["plugin", "validate", "--strict", "--json", str(folder)], cwd=folder)
    assert done.returncode == 0, done.stdout + done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    assert report["success"] is True and report["manifest"]["errors"] == [], report
    return report


def test_the_marketplace_and_the_plugin_pass_strict_validation(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    """`claude plugin validate --strict` accepts both manifests; the plugin provides the
    server, both session hooks and /mtl-mcp:recall."""
    claude = ClaudeCode.install(tmp_path, fake)
    validated(claude, REPO)
    provides = validated(claude, REPO / "plugins" / "mtl-mcp")["provides"]
    assert [(s["name"], s["target"], s["args"]) for s in provides["mcpServers"]] == [
        ("mtl-mcp", "mtl-mcp", ["serve"])
    ]
    assert sorted((h["event"], h["command"]) for h in provides["hooks"]) == [
        ("PostToolUse", "mtl-mcp hook tool-use"),
        ("PostToolUseFailure", "mtl-mcp hook tool-use"),
        ("SessionEnd", "mtl-mcp hook session-end"),
        ("SessionStart", "mtl-mcp hook session-start"),
    ]
    assert provides["commands"] == ["mtl-mcp:recall"]


def test_the_plugin_hooks_are_the_ones_install_writes(tmp_path: Path) -> None:
    """Same events, matchers and timeouts; the plugin runs `mtl-mcp` from the PATH."""
    from mtl_mcp.operations.install.plans import apply, plan_install
    from mtl_mcp.operations.install.targets import Launch

    home = tmp_path / "home"
    apply(plan_install("claude-code", "user", Launch("mtl-mcp"), user_home=home, project_dir=home))
    installed = json.loads((home / ".claude" / "settings.json").read_text())["hooks"]
    plugin = json.loads((REPO / "plugins/mtl-mcp/hooks/hooks.json").read_text())["hooks"]
    assert plugin == installed


def test_the_plugin_version_is_the_package_version() -> None:
    from mtl_mcp import __version__

    manifest = json.loads((REPO / "plugins/mtl-mcp/.claude-plugin/plugin.json").read_text())
    market = json.loads((REPO / ".claude-plugin/marketplace.json").read_text())
    assert manifest["version"] == market["plugins"][0]["version"] == __version__


def test_the_plugin_installs_offline_and_its_recall_command_runs(
    tmp_path: Path, fake: FakeAnthropic, data: Settings
) -> None:
    """marketplace add + install from this repository, then `/mtl-mcp:recall` in `claude -p`:
    the plugin's context, its tool (allowed by the command) and its SessionEnd hook work."""
    # The data directory through the environment, as a plugin user would set it; a spent
    # daily budget keeps the SessionEnd worker from calling the API.
    env = {"MTL_MCP_HOME": str(data.home), "MTL_MCP_STARTER": "1", "MTL_MCP_DAILY_TOKENS": "1"}
    claude = ClaudeCode.install(tmp_path, fake, **env)
    project = tmp_path / "project"
    for step in (["marketplace", "add", str(REPO)], ["install", "mtl-mcp@mtl-mcp"]):
        done = claude.run(["plugin", *step], cwd=project)
        assert done.returncode == 0 and "Successfully" in done.stdout, done.stdout + done.stderr
    assert claude.settings()["enabledPlugins"] == {"mtl-mcp@mtl-mcp": True}
    agent_calls(PLUGIN_RECALL, {"plan": PLAN}, fake)

    done = claude.run(["-p", "/mtl-mcp:recall fix the flaky date test"], cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr

    session = fake.message_requests
    assert "<command-name>/mtl-mcp:recall</command-name>" in session[0].user_text
    assert f"SessionStart:startup hook success: {INVITATION}" in session[0].messages_text
    assert loaded_by_tool_search(session[-1], PLUGIN_RECALL)
    [call] = calls_of(session[-1], PLUGIN_RECALL)
    result = tool_result_of(session[-1], call)
    assert not result.get("is_error"), result
    assert_framed_starter_notes(result_text(result))
    [(_, job)] = list(Spool(data).jobs())  # queued by the plugin's SessionEnd hook
    assert job.client == "claude-code" and Path(job.transcript_path).is_file()


# ------------------------------------------------------------------ the closed loop

MIN_P = load_settings(Path("/nonexistent")).auto_recall_min_p


def planned_then_read(fake: FakeAnthropic, plan: str, file: Path) -> None:
    """Script the model: state `plan` and Read a file in the same turn (no recall_insights
    call, ever), then answer in text."""

    def turn(request: RecordedRequest) -> dict[str, Any] | None:
        if request.body["messages"][-1]["role"] == "assistant" or any(
            r.get("tool_use_id", "").startswith("toolu_read") for r in request.tool_results()
        ):
            return None
        read = {"file_path": str(file)}
        blocks = [
            {"type": "text", "text": plan},
            {
                "type": "tool_use",
                "id": f"toolu_read{len(fake.requests)}",
                "name": "Read",
                "input": read,
            },
        ]
        return fake.message(blocks=blocks, stop_reason="tool_use")

    fake.reply_while(turn)
    fake.reply_text("Fixed; the suite passes.")


def hook_notes(request: RecordedRequest) -> str | None:
    """The plan-triggered notes a request carries, as Claude Code hands them to the model."""
    found = [
        block["text"]
        for message in request.body["messages"]
        if message["role"] == "system"
        for block in message["content"]
        if isinstance(block, dict)
        and "hook additional context: mtl-mcp recalled" in block.get("text", "")
    ]
    assert len(found) <= 1, found
    return found[0] if found else None


def note_titles(notes: str) -> list[str]:
    return [m[1] for m in re.finditer(r"^\d+\. (.+?) \[", notes, re.M)]


def note_ids(notes: str) -> list[str]:
    return [
        line.rsplit("id ", 1)[1].rstrip("]") for line in notes.splitlines() if " · id ins_" in line
    ]


def test_the_plan_the_model_states_brings_its_lessons_and_the_session_rates_them(
    tmp_path: Path, fake: FakeAnthropic, data: Settings
) -> None:
    """A model that states a plan and Reads a file, never calling recall_insights: the next
    request carries the framed notes recalled for that plan that pass the relevance gate
    (none of the session-start ones); a second prompt with the same plan repeats none of
    them; the judge at session end gets the given notes and its verdicts are stored with
    the plan, shown by `show` and `sessions`; purging an insight removes its ledger rows."""
    claude = ClaudeCode.install(tmp_path, fake)
    run_mtl(data, claude, "install", "claude-code")
    project = tmp_path / "project"
    project.mkdir()
    source = project / "report.py"
    source.write_text("def month_start(d):\n    return d - 1\n")
    # A warm service, as after a first window: a cold one answers the hook only after its
    # budget, and the recall then comes at a later tool call.
    env = {**claude.environment(), "MTL_MCP_HOME": str(data.home), "MTL_MCP_STARTER": "1"}
    mtl = str(Path(sys.executable).parent / "mtl-mcp")
    subprocess.run([mtl, "serve"], env=env, stdin=subprocess.DEVNULL, check=True, timeout=60)
    run_mtl(data, claude, "recall", "warm the service up")
    planned_then_read(fake, FLAKY_PLAN, source)

    def judge(request: RecordedRequest) -> dict[str, Any]:
        """The worker's judge, right after the session: the first hook note helped, the
        first session-start note misled."""
        shown = [n for r in fake.message_requests if (n := hook_notes(r))]
        hook_titles.extend(note_titles(shown[0]) if shown else [])
        listed = request.user_text.split("Notes the assistant was given", 1)[1]
        numbered = [line for line in listed.splitlines() if line[:1].isdigit()]
        first_hook_note = next(n for n, line in enumerate(numbered, 1) if hook_titles[0] in line)
        verdicts = [
            {"note": first_hook_note, "verdict": "helped", "mode": None, "reason": "it ran first"},
            {"note": 1, "verdict": "misled", "mode": "misapplied", "reason": "not this time"},
        ]
        return fake.message(
            json.dumps({"outcome": "success", "reason": "passes", "verdicts": verdicts})
        )

    fake.reply_with(judge)
    fake.reply_json(DistilledInsights.model_validate({"insights": []}))
    hook_titles: list[str] = []
    done = claude.run(["-p", "Fix the month-start crash.", "--output-format", "json"], cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr
    session_id = json.loads(done.stdout)["session_id"]

    requests = [r for r in fake.message_requests if r.body.get("stream")]
    requests = requests[: next(n for n, r in enumerate(requests, 1) if hook_notes(r))]
    start = json.loads(run_mtl(data, claude, "sessions", "--json").stdout)[0]
    assert start["session_id"] == session_id
    [context, planned] = start["recalls"]
    assert (context["trigger"], planned["trigger"]) == ("session-start", "hook")
    start_ids = [h["id"] for h in context["hits"]]
    notes = hook_notes(requests[-1])
    assert notes is not None and hook_notes(requests[0]) is None  # after the tool call only
    memory = Memory(data)
    try:
        expected = unasked(memory.recall(FLAKY_PLAN, k=3, exclude_ids=start_ids), MIN_P)
    finally:
        memory.close()
    assert note_ids(notes) == [h.id for h in expected] == [h["id"] for h in planned["hits"]]
    assert not set(note_ids(notes)) & set(start_ids)
    assert len(notes) <= 2400  # ~600 tokens
    wait_for(
        lambda: not any(Spool(data).pending.glob("*.json")), "the SessionEnd worker", timeout=60
    )
    assert hook_titles == [h.title for h in expected]
    judged = next(
        r for r in fake.message_requests if "Notes the assistant was given" in r.user_text
    )
    assert all(title in judged.user_text for title in hook_titles)

    planned_then_read(fake, FLAKY_PLAN, source)  # the same plan, a new prompt and session
    fake.reply_json({"outcome": "success", "reason": "passes", "verdicts": []})
    fake.reply_json(DistilledInsights.model_validate({"insights": []}))
    before = len(fake.message_requests)
    again = claude.run(["-p", "Once more, please.", "--resume", session_id], cwd=project)
    assert again.returncode == 0, again.stdout + again.stderr
    second = [r for r in fake.message_requests[before:] if r.body.get("stream")]
    repeated = hook_notes(second[-1])
    assert repeated is None or not set(note_ids(repeated)) & set(note_ids(notes) + start_ids)
    wait_for(lambda: not any(Spool(data).pending.glob("*.json")), "the second worker", timeout=60)

    helped = expected[0].id
    shown = json.loads(run_mtl(data, claude, "show", helped, "--json").stdout)["history"]
    [verdict] = shown["verdicts"]
    assert (verdict["verdict"], verdict["session_id"], verdict["plan"]) == (
        "helped",
        session_id,
        FLAKY_PLAN,
    )
    assert verdict["backend"] == "anthropic"
    misled = json.loads(run_mtl(data, claude, "show", start_ids[0], "--json").stdout)["history"]
    assert [(v["verdict"], v["mode"]) for v in misled["verdicts"]] == [("misled", "misapplied")]
    ledger = data.home / "ledger.sqlite"
    assert oct(ledger.stat().st_mode & 0o777) == "0o600"

    run_mtl(data, claude, "forget", helped, "--purge", "--yes")
    assert helped.encode() not in ledger.read_bytes()
    after = json.loads(run_mtl(data, claude, "sessions", "--json").stdout)
    assert helped not in json.dumps(after)
