"""`mtl-mcp install` for Gemini CLI and opencode, checked by the real clients (npm, pinned).

A new user: a throwaway HOME, a fresh data directory, `mtl-mcp install <client>` as they
would run it in a shell. Each client's own `mcp list` starts the configured server and
reports it connected (no model, no network); after `mtl-mcp uninstall` it is gone and the
user's config is as it was, byte for byte. Then one real session per client against a
fake model API on 127.0.0.1 (see tests.gemini_cli, tests.opencode_cli): the tools are
offered, a recall is answered, the session-start context and the notes recalled for the
plan reach the model, and the session's end is queued for distillation.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mtl_mcp.config import Settings, load_settings
from mtl_mcp.learning.spool import Spool
from mtl_mcp.learning.transcripts import read_transcript
from mtl_mcp.operations.context import INVITATION
from mtl_mcp.text.render import PLAN_NOTES_HEADER
from tests.conftest import FLAKY_PLAN
from tests.copilot_cli import CopilotCli
from tests.fake_chat_stream import FakeChatStream
from tests.fake_gemini import FakeGemini
from tests.gemini_cli import GeminiCli
from tests.opencode_cli import Opencode
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.alone]

PLAN = FLAKY_PLAN  # one a starter lesson fits, which the relevance gate passes


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The user's data directory, in the environment of everything the test starts (the
    client and its hooks too)."""
    monkeypatch.setenv("MTL_MCP_HOME", str(tmp_path / "mtl-home"))
    monkeypatch.setenv("MTL_MCP_STARTER", "1")
    return load_settings(tmp_path / "mtl-home", starter=True)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "report.py").write_text("def month_start(d):\n    return d - 1\n")
    return folder


def mtl(home: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`mtl-mcp ARGS` as the user runs it in a shell (their HOME, in the project)."""
    exe = Path(sys.executable).parent / "mtl-mcp"
    return subprocess.run(
        [str(exe), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "HOME": str(home)},
        timeout=120,
        check=True,
    )


def warm_service(home: Path, cwd: Path) -> None:
    """A running service, as after a first window: the tool-use hook's budget is 0.8 s."""
    exe = Path(sys.executable).parent / "mtl-mcp"
    env = {**os.environ, "HOME": str(home)}
    subprocess.run([str(exe), "serve"], env=env, cwd=cwd, stdin=subprocess.DEVNULL, timeout=60)
    mtl(home, cwd, "recall", "warm the service up")


def output(done: subprocess.CompletedProcess[str]) -> str:
    """What the client printed, without its colours."""
    return re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)


# ------------------------------------------------------------------ Gemini CLI


@pytest.fixture
def fake_gemini() -> Iterator[FakeGemini]:
    with FakeGemini() as server:
        yield server


def test_gemini_mcp_list_connects_after_install_and_forgets_after_uninstall(
    tmp_path: Path, project: Path, data: Settings
) -> None:
    """Install says the folder is not trusted (and does not trust it); Gemini agrees: the
    server is listed but disabled. Once the user trusts the folder, `gemini mcp list` starts
    it and reports it connected; `mtl-mcp doctor` says so too. Uninstall restores the
    user's settings.json byte for byte and Gemini lists no server."""
    gemini = GeminiCli.install(tmp_path)
    original = gemini.settings.read_bytes()
    installed = mtl(gemini.home, project, "install", "gemini-cli")
    assert f"Gemini CLI has not been told whether to trust {project}" in installed.stderr
    assert not (gemini.home / ".gemini/trustedFolders.json").exists()
    doctor = mtl(gemini.home, project, "doctor")
    assert "[!!] gemini-cli folder trust" in doctor.stdout
    untrusted = output(gemini.run(["mcp", "list"], cwd=project))  # Gemini lists on stderr
    assert "mtl-mcp" in untrusted and "- Disabled" in untrusted, untrusted

    gemini.trust(project)
    listed = output(gemini.run(["mcp", "list"], cwd=project))
    assert "mtl-mcp" in listed and "- Connected" in listed, listed
    assert "[ok] gemini-cli folder trust" in mtl(gemini.home, project, "doctor").stdout

    mtl(gemini.home, project, "uninstall", "gemini-cli")
    assert gemini.settings.read_bytes() == original
    assert not (gemini.home / ".gemini/policies/mtl-mcp.toml").exists()
    gone = output(gemini.run(["mcp", "list"], cwd=project))
    assert "mtl-mcp" not in gone and "No MCP servers configured" in gone, gone


def test_a_gemini_session_gets_context_recall_on_the_plan_and_is_captured(
    tmp_path: Path, project: Path, data: Settings, fake_gemini: FakeGemini
) -> None:
    """`gemini -p` in a trusted folder, the model played by the fake: it is offered the
    memory's tools; the session-start context reaches the first request; it states a plan
    and reads a file, and the notes recalled for that plan come back appended to the
    file's contents (Gemini's AfterTool context); its own recall_insights call runs without
    a prompt (install's policy) and is answered; the session's end queues a Gemini job whose
    transcript mtl-mcp reads."""
    gemini = GeminiCli.install(tmp_path)
    mtl(gemini.home, project, "install", "gemini-cli")
    gemini.trust(project)
    warm_service(gemini.home, project)
    fake_gemini.reply_call("read_file", {"file_path": str(project / "report.py")}, text=PLAN)
    fake_gemini.reply_call("mcp_mtl-mcp_recall_insights", {"plan": PLAN})
    fake_gemini.reply_text("Fixed; the suite passes.")
    done = gemini.run(["-p", "Fix the month-start crash."], cwd=project, fake=fake_gemini)
    assert "Fixed; the suite passes." in done.stdout, done.stderr[-3000:]

    first, after_read, after_recall = fake_gemini.agent_requests
    assert {"mcp_mtl-mcp_recall_insights", "mcp_mtl-mcp_list_memories"} <= set(first.tool_names())
    assert any(INVITATION in text for text in first.texts("user"))  # session-start
    read = after_read.function_responses()["read_file"]
    assert "month_start" in str(read) and PLAN_NOTES_HEADER in str(read)  # AfterTool
    recalled = after_recall.function_responses()["mcp_mtl-mcp_recall_insights"]
    assert "error" not in recalled and "id " in str(recalled), recalled

    wait_for(lambda: bool(list(Spool(data).jobs())), "the SessionEnd job")
    [(_, job)] = list(Spool(data).jobs())
    assert (job.client, job.format) == ("gemini-cli", "gemini-cli")
    assert Path(job.transcript_path).is_relative_to(gemini.home / ".gemini" / "tmp")
    transcript = read_transcript(Path(job.transcript_path), job.format)
    said = [(e.role, e.kind, e.tool) for e in transcript.events]
    assert ("user", "text", None) in said and ("assistant", "tool_call", "read_file") in said
    assert transcript.session_id == job.session_id


# ------------------------------------------------------------------ opencode


def test_opencode_mcp_list_connects_after_install_and_forgets_after_uninstall(
    tmp_path: Path, project: Path, data: Settings
) -> None:
    """`opencode mcp list` starts the server install registered and reports it connected;
    after uninstall the user's opencode.json is as it was and the plugin is gone."""
    opencode = Opencode.install(tmp_path)
    opencode.config.parent.mkdir(parents=True)
    opencode.config.write_text('{\n  "$schema": "https://opencode.ai/config.json",\n  "autoupdate": false\n}\n')  # fmt: skip  # noqa: E501
    original = opencode.config.read_bytes()
    mtl(opencode.home, project, "install", "opencode")
    listed = output(opencode.run(["mcp", "list"], cwd=project))
    assert re.search(r"✓ mtl-mcp\W+connected", listed), listed
    mtl(opencode.home, project, "uninstall", "opencode")
    assert opencode.config.read_bytes() == original
    assert not (opencode.config.parent / "plugin" / "mtl-mcp.js").exists()
    gone = output(opencode.run(["mcp", "list"], cwd=project))
    assert "mtl-mcp" not in gone, gone


@pytest.fixture
def fake_chat() -> Iterator[FakeChatStream]:
    with FakeChatStream() as server:
        yield server


def test_an_opencode_session_gets_context_recall_on_the_plan_and_is_captured(
    tmp_path: Path, project: Path, data: Settings, fake_chat: FakeChatStream
) -> None:
    """`opencode run` with the installed plugin, the model played by the fake: the tools are
    offered; the session-start context is in the system prompt; the model states a plan and
    reads a file, and the notes recalled for that plan come back in the tool's output; its
    recall_insights call is answered; when the session goes idle the plugin writes its
    transcript and session-end queues it."""
    opencode = Opencode.install(tmp_path)
    opencode.use_fake(fake_chat)
    mtl(opencode.home, project, "install", "opencode")
    warm_service(opencode.home, project)
    fake_chat.reply_call("read", {"filePath": str(project / "report.py")}, text=PLAN)
    fake_chat.reply_call("mtl-mcp_recall_insights", {"plan": PLAN})
    fake_chat.reply_text("Fixed; the suite passes.")
    done = opencode.run(["run", "Fix the month-start crash."], cwd=project)
    assert "Fixed; the suite passes." in done.stdout + done.stderr, done.stderr[-3000:]

    first, after_read, after_recall = fake_chat.agent_requests
    assert "mtl-mcp_recall_insights" in first.tool_names()
    assert any(INVITATION in text for text in first.messages("system"))  # session-start
    [read] = after_read.tool_results().values()
    assert "month_start" in read and PLAN_NOTES_HEADER in read  # tool.execute.after
    recalled = list(after_recall.tool_results().values())[-1]
    assert "id " in recalled, recalled

    wait_for(lambda: bool(list(Spool(data).jobs())), "the session-end job")
    [(_, job)] = list(Spool(data).jobs())
    assert (job.client, job.format) == ("opencode", "trajectory")
    transcript = read_transcript(Path(job.transcript_path), job.format)
    assert any(e.role == "user" and "month-start" in e.text for e in transcript.events)


# ------------------------------------------------------------------ Copilot CLI


def test_a_copilot_session_gets_context_recall_on_the_plan_and_is_captured(
    tmp_path: Path, project: Path, data: Settings
) -> None:
    """`copilot -p` in bring-your-own-key mode, the model played by the fake. Copilot CLI
    has no `mcp list` that connects: `mcp get` shows what install wrote. In the session the
    tools are offered; the session-start context is a user message; the model states a plan
    and views a file, and the notes recalled for it are appended to the file's contents
    (postToolUse); its recall_insights call runs without a prompt and is answered; the
    session's end queues a Copilot job whose events.jsonl mtl-mcp reads. Uninstall removes
    the server and the hook file."""
    copilot = CopilotCli.install(tmp_path)
    mtl(copilot.home, project, "install", "copilot-cli")
    shown = output(copilot.run(["mcp", "get", "mtl-mcp"], cwd=project))
    assert "Status: Enabled" in shown and "mtl-mcp serve" in shown, shown
    warm_service(copilot.home, project)
    with FakeChatStream("gpt-4.1") as fake:
        fake.reply_call("view", {"path": str(project / "report.py")}, text=PLAN)
        fake.reply_call("mtl-mcp-recall_insights", {"plan": PLAN})
        fake.reply_text("Fixed; the suite passes.")
        done = copilot.run(["-p", "Fix the month-start crash."], cwd=project, fake=fake)
        assert "Fixed; the suite passes." in done.stdout, output(done)[-3000:]
        first, after_view, after_recall = fake.agent_requests

    assert "mtl-mcp-recall_insights" in first.tool_names()
    assert any(text.startswith(INVITATION) for text in first.messages("user"))
    [viewed] = after_view.tool_results().values()
    assert "month_start" in viewed and PLAN_NOTES_HEADER in viewed  # postToolUse
    recalled = list(after_recall.tool_results().values())[-1]
    assert "id ins_" in recalled and PLAN_NOTES_HEADER not in recalled, recalled

    wait_for(lambda: bool(list(Spool(data).jobs())), "the sessionEnd job")
    [(_, job)] = list(Spool(data).jobs())
    assert (job.client, job.format) == ("copilot-cli", "copilot-cli")
    assert Path(job.transcript_path).is_relative_to(copilot.copilot_home / "session-state")
    transcript = read_transcript(Path(job.transcript_path), job.format)
    assert ("assistant", "tool_call", "view") in [
        (e.role, e.kind, e.tool) for e in transcript.events
    ]

    mtl(copilot.home, project, "uninstall", "copilot-cli")
    assert not (copilot.copilot_home / "mcp-config.json").exists()
    assert not (copilot.copilot_home / "hooks" / "mtl-mcp.json").exists()
    assert "mtl-mcp" not in output(copilot.run(["mcp", "list"], cwd=project))
