"""What counts as a plan and a task: tool arguments, transcript tails, trivial prompts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mtl_mcp.hooks.plans import (
    TAIL_BYTES,
    is_plan,
    is_trivial_prompt,
    plan_from_tool,
    task_text,
)

PLAN = (
    "First I will reproduce the crash with a test that pins the date. Then I will fix the "
    "range check and rerun the whole suite."
)


def claude_line(kind: str, content: Any, uuid: str, **extra: Any) -> str:
    return json.dumps(
        {"type": kind, "uuid": uuid, "message": {"role": kind, "content": content}, **extra}
    )


def test_planning_tools_state_their_plan_and_other_tools_none() -> None:
    """ExitPlanMode's plan, a todo list's items, a task's subject and description."""
    assert (
        plan_from_tool("ExitPlanMode", {"plan": "## Plan\n1. Reproduce"}) == "## Plan\n1. Reproduce"
    )
    todos = {"todos": [{"content": "Reproduce it", "status": "pending"}, {"content": "Fix it"}]}
    assert plan_from_tool("TodoWrite", todos) == "- Reproduce it\n- Fix it"
    steps = {"explanation": "Two steps.", "plan": [{"step": "Reproduce", "status": "pending"}]}
    assert plan_from_tool("update_plan", steps) == "Two steps.\n- Reproduce"
    assert (
        plan_from_tool("TaskCreate", {"subject": "Fix", "description": "the crash"})
        == "Fix. the crash"
    )
    assert plan_from_tool("Read", {"file_path": "x"}) is None
    assert plan_from_tool("ExitPlanMode", "not a dict") is None


def test_a_plan_has_enough_words_and_a_trivial_prompt_few() -> None:
    assert is_plan(PLAN) and not is_plan("Let me read the file first.") and not is_plan(None)
    assert is_trivial_prompt("go on") and is_trivial_prompt("Thanks!")
    assert not is_trivial_prompt("Fix the crash on the first day of each month")
    assert not is_trivial_prompt(None)


def test_the_task_is_what_the_assistant_said_since_the_last_prompt(tmp_path: Path) -> None:
    """In a Claude Code transcript: the last real prompt (not a tool result, not injected
    context, not a sidechain), and the assistant's text just before the tool call that
    fired (since the tool call before it)."""
    lines = [
        claude_line("user", "An earlier task about logging.", "u0"),
        claude_line("assistant", [{"type": "text", "text": "Done with logging."}], "a0"),
        claude_line("user", PLAN_PROMPT := "Fix the crash on the first day of each month.", "u1"),
        claude_line("user", "<system-reminder>context</system-reminder>", "u1b"),
        claude_line("assistant", [{"type": "text", "text": PLAN}], "a1"),
        claude_line(
            "assistant", [{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}], "a2"
        ),
        claude_line("user", [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}], "u2"),
        claude_line(
            "assistant", [{"type": "text", "text": "Now the fix."}], "a3", isSidechain=True
        ),
        claude_line("assistant", [{"type": "text", "text": "Later words."}], "a4"),
        claude_line(
            "assistant", [{"type": "tool_use", "id": "t2", "name": "Edit", "input": {}}], "a5"
        ),
    ]
    transcript = tmp_path / "t.jsonl"
    transcript.write_text("\n".join(lines) + "\n{not json\n")
    first = task_text(str(transcript), "t1")
    assert (first.prompt, first.prompt_key, first.said) == (PLAN_PROMPT, "u1", PLAN)
    assert first.tool_calls == 1
    later = task_text(str(transcript), "t2")
    assert later.said == "Later words." and later.tool_calls == 2
    assert task_text(str(tmp_path / "missing.jsonl"), "t1").prompt is None


def test_a_codex_rollout_gives_the_same_task(tmp_path: Path) -> None:
    """Codex's rollout items: its injected environment context is not the prompt."""

    def item(payload: dict[str, Any]) -> str:
        return json.dumps({"type": "response_item", "payload": payload})

    def message(role: str, text: str) -> str:
        kind = "input_text" if role == "user" else "output_text"
        return item({"type": "message", "role": role, "content": [{"type": kind, "text": text}]})

    lines = [
        message("user", "<environment_context>cwd</environment_context>"),
        message("user", "Fix the crash."),
        message("assistant", PLAN),
        item({"type": "function_call", "call_id": "c1", "name": "exec_command"}),
    ]
    rollout = tmp_path / "rollout.jsonl"
    rollout.write_text("\n".join(lines) + "\n")
    found = task_text(str(rollout), "c1")
    assert (found.prompt, found.said, found.tool_calls) == ("Fix the crash.", PLAN, 1)


def test_only_the_tail_of_a_long_transcript_is_read(tmp_path: Path) -> None:
    """A transcript longer than the tail still gives the current task; its cut first line
    is skipped, not misread."""
    transcript = tmp_path / "long.jsonl"
    filler = claude_line("assistant", [{"type": "text", "text": "x" * 1000}], "f")
    with transcript.open("w") as out:
        for _ in range(TAIL_BYTES // 1000 + 50):
            out.write(filler + "\n")
        out.write(claude_line("user", "Fix the crash.", "u9") + "\n")
        out.write(claude_line("assistant", [{"type": "text", "text": PLAN}], "a9") + "\n")
    found = task_text(str(transcript), None)
    assert (found.prompt, found.said) == ("Fix the crash.", PLAN)


def test_exit_plan_mode_gives_its_plan_in_the_response_or_its_file(tmp_path: Path) -> None:
    """Interactive Claude Code strips `plan` from ExitPlanMode's input: the plan is in the
    tool's response, or in the plan file it names."""
    assert plan_from_tool("ExitPlanMode", {}, {"plan": PLAN, "filePath": "x"}) == PLAN
    plan_file = tmp_path / "plan.md"
    plan_file.write_text(PLAN)
    assert plan_from_tool("ExitPlanMode", {}, {"filePath": str(plan_file)}) == PLAN
    assert plan_from_tool("ExitPlanMode", {}, {"filePath": str(tmp_path / "gone.md")}) is None


def test_a_tool_call_not_yet_in_the_transcript_is_told_apart(tmp_path: Path) -> None:
    """A transcript that does not show the hook's tool call yet (written after the hook
    started) says so, so the hook never takes an older turn for this one."""
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(
        "\n".join(
            [
                claude_line("user", "An older task.", "u0"),
                claude_line("assistant", [{"type": "text", "text": PLAN}], "a0"),
                claude_line(
                    "assistant",
                    [{"type": "tool_use", "id": "old", "name": "Read", "input": {}}],
                    "a1",
                ),
            ]
        )
    )
    assert task_text(str(transcript), "old").seen
    assert not task_text(str(transcript), "new").seen
