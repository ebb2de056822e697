"""The transfer protocol's memories, and `mtl-mcp trial check` on a suite."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from mtl_mcp.config import Settings, load_settings
from mtl_mcp.memory import Memory
from mtl_mcp.text.starter import starter_drafts
from mtl_mcp.trials.manage import finish_report, plan_trial
from mtl_mcp.trials.plan import Estimate
from mtl_mcp.trials.records import TrialFiles
from mtl_mcp.trials.runner import Runner
from tests.trials.conftest import mtl
from tests.trials.stub import StubClient
from tests.trials.suites import DOMAINS, make_suite


def titles(settings: Settings) -> set[str]:
    memory = Memory(settings)
    try:
        return {i.title for i in memory.export() if i.status == "active"}
    finally:
        memory.close()


def test_the_transfer_protocol_scores_each_domain_on_a_memory_built_without_it(
    user_memory: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each domain's memory holds the starter lessons the *other* domains' tasks name, and
    none that only its own tasks name; its placebo has as many notes. The tasks of one
    domain run together; the trial completes and its copies are removed."""
    starter = [d.title for d in starter_drafts()]
    lessons = {domain: [starter[n]] for n, domain in enumerate(DOMAINS)}
    suite = make_suite(tmp_path / "suite", len(DOMAINS), lessons=lessons)
    monkeypatch.setenv("STUB_SUITE", str(suite))
    monkeypatch.setenv("STUB_STATE", str(tmp_path / "state"))
    adapter = StubClient()
    spec, loaded = plan_trial(user_memory, adapter, suite=suite, arms=["none", "memory", "placebo"],
                              runs=1, protocol="transfer", seed=8)  # fmt: skip
    files = TrialFiles(user_memory.home, spec.id)
    files.create(spec)
    runner = Runner(files, loaded, adapter, user_memory)
    runner.prepare()
    for domain in DOMAINS:
        pool = load_settings(runner.stores.home_of(f"memory.{domain}"))
        others = {lessons[d][0] for d in DOMAINS if d != domain}
        assert titles(pool) == others, domain
        placebo = load_settings(runner.stores.home_of(f"placebo.{domain}"))
        assert len(titles(placebo)) == len(others)
        assert not titles(placebo) & set(starter)
    assert files.spec().arm_notes["memory.data-parsing"] == len(DOMAINS) - 1
    runner.run(Estimate(None, None, ""))
    order = [spec.domains[t] for t in files.spec().tasks]
    assert order == sorted(order, key=order.index)  # each domain's tasks together
    report = finish_report(files)
    assert report["protocol"] == "transfer" and report["status"] == "complete"
    assert runner.stores.homes() == []


@pytest.mark.slow
def test_trial_check_passes_a_sound_suite_and_names_each_broken_task(tmp_path: Path) -> None:
    suite = make_suite(tmp_path / "suite", 3)
    env = dict(os.environ)
    good = mtl("trial", "check", str(suite), env=env)
    assert good.returncode == 0, good.stdout + good.stderr
    assert good.stdout.count("ok    task-") == 3 and "3 of 3 tasks ok" in good.stderr
    (suite / "task-01" / "reference" / "answer.txt").write_text("wrong\n")
    shutil.rmtree(suite / "task-02" / "tempting")
    (suite / "task-02" / "tempting").mkdir()
    (suite / "task-02" / "tempting" / "answer.txt").write_text("right\n")  # the verifier misses it
    bad = mtl("trial", "check", str(suite), env=env)
    assert bad.returncode == 1
    assert "ok    task-00" in bad.stdout
    assert "FAIL  task-01:" in bad.stdout and "FAIL  task-02:" in bad.stdout
    assert "Traceback" not in bad.stderr
