"""`mtl-mcp trial run` driving the real Claude Code (npm, pinned) against a scripted fake
Messages API on 127.0.0.1, whose agent's choice depends on what is in its context.

A demonstration of the harness: a scripted model shows the machinery finds an effect that
is there (and not one that is not), never that memory helps a real model.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mtl_mcp.config import Settings
from mtl_mcp.trials.arms import memory_hash
from mtl_mcp.trials.suite import load_suite
from tests.claude_code import claude_binary
from tests.fake_anthropic import FakeAnthropic
from tests.trials.agents import Policy, claude_policy, planted_lessons, planted_title
from tests.trials.conftest import (
    SECRET,
    files_containing,
    leftovers,
    mtl,
    tree_hashes,
)

pytestmark = [pytest.mark.slow, pytest.mark.alone]
API_KEY = "sk-ant-api03-trial-test-key-abcdefghijklmnopqrstuvwxyz012345"


def trial_env(fake: FakeAnthropic, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "MTL_MCP_CLAUDE_COMMAND": str(claude_binary()),
        "ANTHROPIC_BASE_URL": fake.base_url,
        "ANTHROPIC_API_KEY": API_KEY,
        "CLAUDE_CODE_MAX_RETRIES": "0",
        **extra,
    }


def test_a_lesson_sensitive_agent_shows_memory_helps_and_the_placebo_does_not(
    tmp_path: Path, user_memory: Settings, user_home: Path, private_tmp: Path
) -> None:
    """Six tasks of the built-in suite, one run, arms none, memory and placebo, through the
    real Claude Code: the
    agent writes the right fix only when the lesson planted for the task reaches it, which
    only the memory arm can do. memory > none with exact McNemar p < 0.05 (6 helped, 0
    hurt); the placebo is no better than none. The user's memory, their Claude Code config
    and their TMPDIR are as they were; no secret reached a trial file."""
    suite = load_suite("builtin")
    user = user_memory
    memory_before = memory_hash(user)
    home_before = tree_hashes(user_home)
    with FakeAnthropic() as fake:
        policy = Policy(suite, "sensitive", use_tool=False)  # the hooks bring the notes
        fake.reply_while(claude_policy(policy, fake))
        done = mtl(
            "trial", "run", "--client", "claude-code", "--suite", "builtin", "--tasks", "6",
            "--arms", "none,memory,placebo", "--runs", "1", "--yes", "--json",
            env=trial_env(fake),
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    print(done.stderr)
    report = json.loads(done.stdout)

    assert report["status"] == "complete"
    assert report["arms"]["memory"]["passed"] == 6 and report["arms"]["none"]["passed"] == 0
    versus_none = report["comparisons"]["memory_vs_none"]
    assert (versus_none["helped"], versus_none["hurt"]) == (6, 0)
    assert versus_none["p"] < 0.05 and versus_none["significant"]
    placebo = report["comparisons"]["placebo_vs_none"]
    assert placebo["helped"] == 0 and not placebo["significant"]
    assert report["arms"]["placebo"]["pass_rate"] <= report["arms"]["none"]["pass_rate"]
    assert report["comparisons"]["memory_vs_placebo"]["p"] < 0.05
    # What the memory arm showed each task is in the report: its planted lesson among it.
    planted = {lesson.title: lesson.id for lesson in planted_lessons(suite)}
    for task in report["tasks"]:
        lesson = planted[planted_title(next(t for t in suite.tasks if t.id == task["id"]))]
        assert len(report["tasks"]) == 6
        assert lesson in task["recalled"]["memory"], task
        assert lesson not in task["recalled"]["placebo"]
    for arm in ("none", "memory", "placebo"):
        row = report["arms"][arm]
        assert row["tokens_in"] > 0 and row["mean_turns"] == 3 and row["mean_tool_calls"] == 2
    assert report["overhead"]["tokens"]["ratio"] > 1  # the notes cost context

    assert memory_hash(user) == memory_before and report["memory"]["unchanged"]
    assert tree_hashes(user_home) == home_before  # no config outside the throwaway homes
    assert leftovers(private_tmp) == []  # every session's folder removed
    trial_folder = user.home / "trials" / report["id"]
    assert sorted(p.name for p in trial_folder.iterdir()) == [
        "report.json",
        "runs.jsonl",
        "trial.json",
    ]
    for secret in (SECRET, API_KEY):
        assert files_containing(user.home, secret) == []
