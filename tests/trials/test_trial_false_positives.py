"""The harness does not find an effect that is not there: a lesson-blind agent over 20
seeds (task order, arm rotation and the agent's run noise) makes memory vs none
significant at 0.05 in at most 1 of the 20 trials (5%). A positive control, an agent that
does better when a memory is attached, is found in most trials: the test can fail.

The cheaper path: the agent is the stub (a real process speaking Claude Code's command
line, tests.trials.stub) instead of a real client and a fake model API, so 20 trials of
8 tasks cost a minute or two, not hours. Everything the statistics depend on is the real
harness: the suite and its verifier, the fresh work dirs, the arms' installs, the
schedule, the ledger of runs, the pairing, the test. Only the agent's behaviour is
scripted, and the blind agent cannot see the arm (the control can: MTL_MCP_HOME, which
the memory arms' sessions get).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mtl_mcp.config import Settings
from mtl_mcp.trials.manage import finish_report, plan_trial
from mtl_mcp.trials.plan import Estimate
from mtl_mcp.trials.records import TrialFiles
from mtl_mcp.trials.runner import Runner
from tests.trials.stub import StubClient
from tests.trials.suites import make_suite

pytestmark = pytest.mark.slow
SEEDS = 20
TASKS = 8


def trial_p(user: Settings, suite: Path, seed: int, state: Path) -> float:
    os.environ["STUB_SEED"], os.environ["STUB_STATE"] = str(seed), str(state / str(seed))
    adapter = StubClient()
    spec, loaded = plan_trial(
        user, adapter, suite=suite, arms=["none", "memory"], runs=1, seed=seed
    )
    files = TrialFiles(user.home, spec.id)
    files.create(spec)
    runner = Runner(files, loaded, adapter, user)
    runner.prepare()
    runner.run(Estimate(None, None, ""))
    report = finish_report(files)
    assert report["sessions"]["scored"] == 2 * TASKS
    return float(report["comparisons"]["memory_vs_none"]["p"])


def test_a_lesson_blind_agent_is_found_significant_in_at_most_5_percent_of_trials(
    user_memory: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite = make_suite(tmp_path / "suite", TASKS)
    monkeypatch.setenv("STUB_SUITE", str(suite))
    monkeypatch.setenv("STUB_POLICY", "blind")
    blind = [trial_p(user_memory, suite, seed, tmp_path / "blind") for seed in range(SEEDS)]
    print(f"blind: {sum(p < 0.05 for p in blind)} of {SEEDS} significant; p = {blind}")
    assert sum(p < 0.05 for p in blind) <= SEEDS * 0.05, blind
    assert len(set(blind)) > 1  # the seeds really vary the outcomes

    monkeypatch.setenv("STUB_POLICY", "favoured")
    favoured = [trial_p(user_memory, suite, seed, tmp_path / "favoured") for seed in range(2)]
    print(f"favoured: p = {favoured}")
    assert all(p < 0.05 for p in favoured), favoured
