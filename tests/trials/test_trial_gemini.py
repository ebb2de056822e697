"""`mtl-mcp trial run` driving the real Gemini CLI (npm, pinned) against a scripted fake
Gemini API on 127.0.0.1: a misled agent, whose failures must show up under harms with the
id of the bad lesson that misled it. A demonstration of the harness, not of memory."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from mtl_mcp.config import Settings
from mtl_mcp.trials.arms import memory_hash
from mtl_mcp.trials.suite import load_suite
from tests.fake_gemini import FakeGemini
from tests.gemini_cli import gemini_script
from tests.trials.agents import BAD_LESSON, Policy, gemini_policy
from tests.trials.conftest import leftovers, mtl, tree_hashes
from tests.trials.suites import make_suite

pytestmark = [pytest.mark.slow, pytest.mark.alone]


def test_a_misled_agent_s_failures_are_harms_tied_to_the_planted_lesson(
    tmp_path: Path, user_memory: Settings, user_home: Path, private_tmp: Path
) -> None:
    """Three tasks, none against memory: the agent fixes every task, except where the
    planted bad lesson reaches it, which is in every memory session (its recall for the
    plan finds it). Each of those failures is a harm, listing the bad lesson's id and the
    command that shows it."""
    suite_dir = make_suite(tmp_path / "suite", 3)
    suite = load_suite(suite_dir)
    user = user_memory
    memory_before, home_before = memory_hash(user), tree_hashes(user_home)
    node = shutil.which("node")
    assert node, "node runs Gemini CLI"
    with FakeGemini() as fake:
        fake.reply_while(gemini_policy(Policy(suite, "misled")))
        env = {
            **os.environ,
            "GEMINI_API_KEY": "fake-gemini-key",
            "GOOGLE_GEMINI_BASE_URL": fake.base_url,
            "GEMINI_CLI_NO_RELAUNCH": "1",
        }
        done = mtl(
            "trial", "run", "--client", "gemini-cli", "--command", f"{node} {gemini_script()}",
            "--suite", str(suite_dir), "--arms", "none,memory", "--runs", "1", "--yes", "--json",
            env=env,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout)

    assert report["arms"]["none"]["passed"] == 3 and report["arms"]["memory"]["passed"] == 0
    assert report["comparisons"]["memory_vs_none"]["hurt"] == 3
    assert [harm["task"] for harm in report["harms"]] == report_order(report)
    for harm in report["harms"]:
        assert BAD_LESSON.id in harm["insights"], harm
        assert f"mtl-mcp show {BAD_LESSON.id}" in harm["show"]
    assert report["arms"]["memory"]["mean_tool_calls"] == 3  # ls, recall, the fix
    assert report["arms"]["none"]["mean_tool_calls"] == 2
    assert memory_hash(user) == memory_before
    assert tree_hashes(user_home) == home_before
    assert leftovers(private_tmp) == []


def report_order(report: dict[str, object]) -> list[str]:
    return [task["id"] for task in report["tasks"]]  # type: ignore[attr-defined]
