"""`mtl-mcp tune gate`, run as a user runs it: it needs 50 judged recalls, reports the refit
on held-out sessions, writes nothing on a dry run or without consent, applies what earns its
place (every door then gives the tuned p, a running service included), and goes back to the
shipped fit with --reset."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mtl_mcp import Memory
from mtl_mcp.config import Settings, load_settings
from mtl_mcp.index.gate import GATE_FILE, shipped_gate
from mtl_mcp.operations.service import stop_services
from mtl_mcp.quality.evaluation import load_pool, load_queries, shipped_set
from mtl_mcp.quality.gate_fit import MIN_GAIN_Z
from mtl_mcp.schemas import VerdictEntry

pytestmark = pytest.mark.slow

MTL_MCP = str(Path(sys.executable).with_name("mtl-mcp"))
# The user's judge: a note helped when it shares the plan's own words far more than the
# other candidates do (the gate's keyword signal, log1p of its BM25 over the mean, at least
# this), whatever its cosine: a user the shipped fit does not describe, whom a refit learns.
# (A judge of cosine alone is one the shipped fit already describes: its refits gain under
# MIN_GAIN_Z standard errors, or keep under half the notes, and are rightly not applied.)
WORDY = 1.3


def run(settings: Settings, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MTL_MCP_HOME": str(settings.home)}
    done = subprocess.run(
        [MTL_MCP, *args], capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL
    )
    assert not check or done.returncode == 0, done.stderr
    return done


def judge_sessions(memory: Memory, first: int, last: int) -> None:
    """Sessions `first` to `last` - 1, one plan each (the evaluation set's), their top 3
    judged by the user's judge (WORDY)."""
    pool_path, queries_path = shipped_set()
    plans = [q.plan for q in load_queries(queries_path, load_pool(pool_path))]
    verdicts = []
    for n, plan in enumerate(plans[first:last], start=first):
        ids = [hit.id for hit in memory.recall(plan, k=3)]
        signals = memory.gate_signals(plan, ids)
        verdicts += [
            VerdictEntry(
                session_id=f"s-{n}",
                insight=insight,
                verdict="helped" if signals[insight][1] >= WORDY else "misled",
                plan=plan,
            )
            for insight in ids
        ]
    memory.record_verdicts(verdicts)


def test_tune_gate_asks_reports_applies_and_resets(settings: Settings) -> None:
    memory = Memory(settings)
    memory.seed()
    judge_sessions(memory, 0, 10)
    memory.close()
    few = run(settings, "tune", "gate", check=False)
    assert few.returncode == 1 and "30 judged recalls" in few.stderr and "50" in few.stderr

    memory = Memory(settings)
    judge_sessions(memory, 10, 45)
    plan = "Reproduce the failing import on a tiny sample file before fixing the parser."
    shipped = [h.p for h in memory.recall(plan)]
    memory.close()
    tuned = settings.home / GATE_FILE
    dry = json.loads(run(settings, "tune", "gate", "--dry-run", "--json").stdout)
    assert dry["judged"] == 135 and dry["sessions"] == 45 and dry["better"]
    assert dry["gain_z"] >= MIN_GAIN_Z  # surely better on held-out sessions, not by chance
    assert dry["after_figures"]["precision"] >= dry["before_figures"]["precision"]
    assert not tuned.exists()
    refused = run(settings, "tune", "gate", check=False)  # stdin is not a terminal
    assert refused.returncode == 2 and "pass --yes" in refused.stderr and not tuned.exists()
    shown = run(settings, "tune", "gate", "--yes")
    assert "refit" in shown.stdout and "--reset" in shown.stdout and tuned.is_file()
    assert oct(tuned.stat().st_mode & 0o777) == "0o600"

    run(settings, "serve")  # a service: it reads the tuned gate as in-process memory does
    try:
        through_service = [r["p"] for r in json.loads(run(settings, "recall", plan, "--json").stdout)["results"]]  # fmt: skip  # noqa: E501
        memory = Memory(load_settings(settings.home))
        in_process = [h.p for h in memory.recall(plan)]
        memory.close()
        assert through_service == in_process != shipped
        run(settings, "tune", "gate", "--reset", "--yes")
        assert not tuned.exists()
        back = [r["p"] for r in json.loads(run(settings, "recall", plan, "--json").stdout)["results"]]  # fmt: skip  # noqa: E501
        assert back == shipped  # the running service is back on the shipped fit too
    finally:
        stop_services(settings.home)
    assert shipped_gate().source == "shipped"
