"""The trial harness around a client: the plan, the schedule, resuming, the budget, time
limits, Ctrl-C, refusals up front. The client is the stub agent (a real process speaking
Claude Code's command line, tests.trials.stub); the runner, arms, verifier, ledger and
report are the real ones."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from mtl_mcp.config import Settings, load_settings
from mtl_mcp.errors import InputError
from mtl_mcp.trials.clients import client_adapter
from mtl_mcp.trials.manage import finish_report, plan_trial, preflight
from mtl_mcp.trials.plan import Estimate, choose_tasks, parse_arms, schedule
from mtl_mcp.trials.records import TrialFiles
from mtl_mcp.trials.runner import Runner, TrialStopped
from mtl_mcp.trials.suite import load_suite
from tests.trials.conftest import leftovers, mtl
from tests.trials.stub import STUB_COMMAND, StubClient
from tests.trials.suites import make_suite
from tests.waiting import wait_for


@pytest.fixture
def stub_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    suite = make_suite(tmp_path / "suite", 6)
    values = {"STUB_SUITE": str(suite), "STUB_STATE": str(tmp_path / "state"), "STUB_SEED": "1"}
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    return values


def start(user: Settings, **plan: object) -> tuple[TrialFiles, Runner]:
    adapter = StubClient()
    arms = plan.pop("arms", ["none", "memory"])
    spec, suite = plan_trial(user, adapter, suite=os.environ["STUB_SUITE"], arms=arms, **plan)  # type: ignore[arg-type]
    files = TrialFiles(user.home, spec.id)
    files.create(spec)
    return files, Runner(files, suite, adapter, user)


# -- the plan ---------------------------------------------------------------------------------


def test_arms_rotate_from_task_to_task_in_a_latin_square(
    user_memory: Settings, stub_env: dict[str, str]
) -> None:
    """Each task runs every arm back to back, in an order rotated one step from the task
    before (ABC, BCA, CAB), and from its own order in the run before: each arm goes first,
    second and third equally often."""
    spec, _ = plan_trial(
        user_memory, StubClient(), suite=stub_env["STUB_SUITE"],
        arms=["none", "memory", "placebo"], runs=2, seed=3,
    )  # fmt: skip
    slots = schedule(spec)
    assert len(slots) == 6 * 3 * 2
    blocks = [slots[n : n + 3] for n in range(0, len(slots), 3)]
    orders = [tuple(s.arm for s in block) for block in blocks]
    assert all(len({s.task for s in block}) == 1 for block in blocks)

    def rotated(order: tuple[str, ...]) -> tuple[str, ...]:
        return order[1:] + order[:1]

    first_run, second_run = orders[:6], orders[6:]
    for run in (first_run, second_run):
        for before, after in itertools.pairwise(run):
            assert after == rotated(before)  # task to task
    for before, after in zip(first_run, second_run, strict=True):
        assert after == rotated(before)  # run to run, for each task
    for position in range(3):
        assert set(Counter(order[position] for order in orders).values()) == {4}
    assert [s.index for s in slots] == list(range(len(slots)))


def test_a_subset_of_tasks_spreads_over_the_domains(stub_env: dict[str, str]) -> None:
    suite = load_suite(stub_env["STUB_SUITE"])
    chosen = choose_tasks(suite, 3)
    assert len({t.domain for t in chosen}) == 3
    assert choose_tasks(suite, None) == list(suite.tasks)
    with pytest.raises(InputError):
        choose_tasks(suite, 0)


@pytest.mark.parametrize(
    ("text", "message"),
    [("none", "at least two"), ("none,memory,memory", "twice"), ("none,magic", "unknown arm")],
)
def test_bad_arms_are_refused_with_the_fix(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_arms(text)


# -- running and resuming ---------------------------------------------------------------------


def test_the_budget_stops_cleanly_and_a_resume_with_more_finishes_the_same_plan(
    user_memory: Settings, stub_env: dict[str, str], private_tmp: Path
) -> None:
    """With room for about three sessions the trial stops before the fourth, says why and
    how to go on, and the report says what each arm spent. A resume with a larger budget
    runs exactly the sessions left: each slot once, the same plan."""
    files, runner = start(user_memory, runs=1, max_tokens=6000, seed=9)
    runner.prepare()
    with pytest.raises(TrialStopped, match="token budget") as stopped:
        runner.run(Estimate(None, None, ""))
    assert stopped.value.budget
    spent = files.runs()
    assert 2 <= len(spent) <= 4 and sum(r.tokens for r in spent) <= 6000
    report = finish_report(files)
    assert report["status"] == "stopped" and "--resume" in report["stop_reason"]
    by_arm = {arm: sum(r.tokens for r in spent if r.arm == arm) for arm in ("none", "memory")}
    assert {arm: report["arms"][arm]["tokens"] for arm in by_arm} == by_arm
    assert any("incomplete" in caveat for caveat in report["caveats"])

    spec = files.spec()
    spec.max_tokens = None
    files.save(spec)
    again = Runner(files, load_suite(stub_env["STUB_SUITE"]), StubClient(), user_memory)
    again.prepare()
    again.run(Estimate(None, None, ""))
    slots = [r.slot for r in files.runs()]
    assert sorted(slots) == list(range(12))  # every slot once: none ran twice
    assert finish_report(files)["status"] == "complete"
    assert sorted(p.name for p in files.folder.iterdir()) == [
        "report.json",
        "runs.jsonl",
        "trial.json",
    ]
    assert leftovers(private_tmp) == []


def test_a_torn_last_line_is_run_again_and_client_errors_are_not_scored(
    user_memory: Settings, stub_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash mid-append leaves a torn line: it is ignored and its session runs again. A
    session the client could not run is recorded unscored; three in a row stop the trial
    with the client's own message."""
    monkeypatch.setenv("STUB_POLICY", "fail")
    files, runner = start(user_memory, runs=1, seed=2)
    runner.prepare()
    with pytest.raises(TrialStopped, match=r"3 sessions in a row.*401 invalid x-api-key"):
        runner.run(Estimate(None, None, ""))
    assert [r.passed for r in files.runs()] == [None, None, None]
    with files.runs_file.open("a") as ledger:
        ledger.write('{"slot": 3, "task": "task-0')  # the crash
    assert len(files.runs()) == 3
    monkeypatch.setenv("STUB_POLICY", "blind")
    Runner(files, load_suite(stub_env["STUB_SUITE"]), StubClient(), user_memory).run(
        Estimate(None, None, "")
    )
    report = finish_report(files)
    assert report["sessions"] == {"planned": 12, "done": 12, "scored": 12, "errors": 0}


def test_a_session_past_its_time_limit_is_killed_with_its_children_and_fails(
    user_memory: Settings, stub_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    suite = Path(stub_env["STUB_SUITE"])
    for toml in suite.glob("*/task.toml"):
        toml.write_text(toml.read_text().replace("timeout = 60", "timeout = 1"))
    monkeypatch.setenv("STUB_POLICY", "sleep")
    files, runner = start(user_memory, runs=1, tasks=1, seed=2)
    runner.prepare()
    started = time.monotonic()
    runner.run(Estimate(None, None, ""))
    assert time.monotonic() - started < 30
    records = files.runs()
    assert [(r.passed, r.timed_out) for r in records] == [(False, True), (False, True)]
    assert "timed out after 1 s" in (records[0].error or "")
    for child in (tmp_path / "state").glob("child-*"):
        pid = int(child.read_text())
        assert (
            not Path(f"/proc/{pid}").exists()
            or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
        )


# -- the command line ------------------------------------------------------------------------


def cli_env(stub_env: dict[str, str], **extra: str) -> dict[str, str]:
    return {**os.environ, **stub_env, "MTL_MCP_CLAUDE_COMMAND": STUB_COMMAND, **extra}


@pytest.mark.slow
def take_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_stops_cleanly_and_resume_goes_on(
    user_memory: Settings, stub_env: dict[str, str], private_tmp: Path, tmp_path: Path
) -> None:
    """Ctrl-C during a session: the session's process group and folder are gone, the trial
    says how to resume and exits 130; `--resume ID` runs what is left."""
    env = cli_env(stub_env, STUB_POLICY="sleep", STUB_SLEEP="60")
    exe = Path(sys.executable).parent / "mtl-mcp"
    args = [str(exe), "trial", "run", "--client", "claude-code", "--suite", stub_env["STUB_SUITE"],
            "--arms", "none,memory", "--runs", "1", "--tasks", "2", "--yes"]  # fmt: skip
    # Ctrl-C as a terminal sends it, to a process that takes it: a child inherits an ignored
    # SIGINT, and some test before this one in the same worker may leave it ignored.
    child = subprocess.Popen(args, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, preexec_fn=take_sigint)  # fmt: skip
    wait_for(lambda: any((tmp_path / "state").glob("child-*")), "the first session", timeout=180)
    sleeper = int(next((tmp_path / "state").glob("child-*")).read_text())
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=120)
    assert child.returncode == 130, err
    [spec] = [json.loads(p.read_text()) for p in (user_memory.home / "trials").glob("*/trial.json")]
    assert f"resume with `mtl-mcp trial run --resume {spec['id']}`" in err
    assert spec["status"] == "interrupted"
    assert leftovers(private_tmp) == []
    wait_for(lambda: not Path(f"/proc/{sleeper}").exists(), "the session's child to go", timeout=10)

    resumed = mtl("trial", "run", "--resume", spec["id"], "--yes", "--json", env=cli_env(stub_env))
    assert resumed.returncode == 0, resumed.stderr
    report = json.loads(resumed.stdout)
    assert report["status"] == "complete" and report["sessions"]["scored"] == 4


def test_off_a_terminal_a_trial_needs_yes_and_writes_nothing(
    user_memory: Settings, stub_env: dict[str, str]
) -> None:
    done = mtl("trial", "run", "--client", "claude-code", "--suite", stub_env["STUB_SUITE"],
               env=cli_env(stub_env))  # fmt: skip
    assert done.returncode == 2
    assert "plan: 6 tasks x 3 arms (none, memory, placebo) x 3 runs = 54 sessions" in done.stderr
    assert "pass --yes" in done.stderr and "nothing was run" in done.stderr
    assert not (user_memory.home / "trials").exists()


@pytest.mark.slow
def test_a_missing_or_logged_out_client_is_refused_up_front_with_the_fix(
    user_memory: Settings, stub_env: dict[str, str], user_home: Path
) -> None:
    missing = mtl("trial", "run", "--client", "claude-code", "--yes",
                  env=cli_env(stub_env, MTL_MCP_CLAUDE_COMMAND="claude-is-not-here"))  # fmt: skip
    assert missing.returncode == 1
    assert "Claude Code is not installed here" in missing.stderr
    assert "npm install -g @anthropic-ai/claude-code" in missing.stderr
    out = mtl(
        "trial",
        "run",
        "--client",
        "claude-code",
        "--yes",
        env=cli_env(stub_env, STUB_LOGGED_OUT="1"),
    )
    assert out.returncode == 1 and "Claude Code is not logged in" in out.stderr
    assert "/login" in out.stderr
    env = {k: v for k, v in cli_env(stub_env).items() if not k.startswith(("GEMINI", "GOOGLE"))}
    gemini = mtl(
        "trial", "run", "--client", "gemini-cli", "--command", STUB_COMMAND, "--yes", env=env
    )
    assert gemini.returncode == 1 and "GEMINI_API_KEY is not set" in gemini.stderr
    assert "Traceback" not in missing.stderr + out.stderr + gemini.stderr
    assert not (user_memory.home / "trials").exists()


@pytest.mark.slow
def test_the_real_claude_code_logged_out_is_refused(user_memory: Settings, user_home: Path) -> None:
    """The real `claude`, with no API key and no login file: refused before anything runs."""
    from tests.claude_code import claude_binary

    (user_home / ".claude" / ".credentials.json").unlink()
    adapter = client_adapter("claude-code", str(claude_binary()), environ={
        k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC")
    })  # fmt: skip
    with pytest.raises(InputError, match=r"not logged in.*claude auth login"):
        preflight(adapter)


@pytest.mark.slow
def test_list_and_report_show_a_trial_and_its_html_is_self_contained(
    user_memory: Settings, stub_env: dict[str, str], tmp_path: Path
) -> None:
    files, runner = start(user_memory, runs=1, tasks=3, seed=4)
    runner.prepare()
    runner.run(Estimate(None, None, ""))
    finish_report(files)
    listed = mtl("trial", "list", env=cli_env(stub_env))
    assert files.id in listed.stdout and "complete" in listed.stdout
    page = tmp_path / "report.html"
    shown = mtl("trial", "report", files.id, "--html", str(page), env=cli_env(stub_env))
    assert shown.returncode == 0 and "memory vs none: helped" in shown.stdout
    html = page.read_text()
    assert html.startswith("<!doctype html>") and "exact McNemar" in html
    assert "<script" not in html and "http" not in html.replace("http-equiv", "")
    as_json = json.loads(mtl("trial", "report", "--json", env=cli_env(stub_env)).stdout)
    assert as_json["id"] == files.id  # the latest trial without an id
    missing = mtl("trial", "report", "no-such-trial", env=cli_env(stub_env))
    assert missing.returncode == 1 and "mtl-mcp trial list" in missing.stderr


def test_the_report_keeps_its_json_contract(
    user_memory: Settings, stub_env: dict[str, str]
) -> None:
    files, runner = start(user_memory, runs=2, tasks=2, seed=5, arms=["none", "memory", "placebo"])
    runner.prepare()
    runner.run(Estimate(None, None, ""))
    report = finish_report(files)
    assert {"id", "client", "suite", "arms", "comparisons", "tasks", "harms"} <= set(report)
    for row in report["arms"].values():
        assert {"runs", "passed", "pass_rate", "wilson95", "tokens", "seconds"} <= set(row)
        assert len(row["wilson95"]) == 2
    for name in ("memory_vs_none", "memory_vs_placebo"):
        assert {"helped", "hurt", "p"} <= set(report["comparisons"][name])
    for task in report["tasks"]:
        assert {"id", "domain", "results", "recalled"} <= set(task)
        assert all(len(values) == 2 for values in task["results"].values())
    for harm in report["harms"]:
        assert {"task", "insights"} <= set(harm)
    assert (
        report["arms"]["memory"]["notes_in_memory"] == report["arms"]["placebo"]["notes_in_memory"]
    )


def test_the_memory_arm_runs_on_a_frozen_copy(
    user_memory: Settings, stub_env: dict[str, str]
) -> None:
    """The memory arm's data directory is a copy of the user's store, frozen: every write to
    it is refused, distillation is off, and no team pool is attached."""
    from mtl_mcp.errors import StoreReadOnly
    from mtl_mcp.memory import Memory
    from mtl_mcp.schemas import InsightDraft

    files, runner = start(user_memory, runs=1, tasks=1, seed=6)
    runner.prepare()
    copy = load_settings(files.folder / "m")
    assert copy.read_only and copy.distill_backend == "off" and not copy.team_uri
    assert copy.consolidate_idle_seconds == 0  # a frozen memory is not consolidated
    memory = Memory(copy)
    try:
        assert memory.stats()["total"] == Memory(user_memory).stats()["total"]
        draft = InsightDraft(title="A new lesson here", description="When it applies to things.",
                             content="What was learnt, in a sentence or two about it.")  # fmt: skip
        with pytest.raises(StoreReadOnly, match="frozen"):
            memory.record([draft])
    finally:
        memory.close()


def test_a_session_is_over_only_once_the_work_its_hooks_left_behind_is_done(
    user_memory: Settings, stub_env: dict[str, str], tmp_path: Path
) -> None:
    """A session-start hook that found no service shows the cached context and leaves
    recording it in the ledger to a detached, niced `hook refresh`; the runner waits for it
    (`settle`) before it counts the session over, so what the session was shown is in its
    arm's ledger when the trial attributes recalls (a busy machine's last session once
    had its recall missing from the report)."""
    from mtl_mcp.hooks.session import spawn_detached
    from mtl_mcp.memory import Memory
    from mtl_mcp.operations.retiring import detached_workers
    from mtl_mcp.storage.ledger import LEDGER_FILE, Ledger
    from mtl_mcp.trials.runner import settle

    files, runner = start(user_memory, runs=1, tasks=1, seed=6)
    runner.prepare()
    arm = load_settings(files.folder / "m")
    memory = Memory(arm)
    try:
        shown = memory.list(limit=1)[0][0].id  # an insight the arm's copy holds
    finally:
        memory.close()
    spawn_detached(
        arm, "hook", "refresh", "--project-dir", str(tmp_path), "--session", "s-1",
        "--client", "claude-code", "--shown", shown,
    )  # fmt: skip
    wait_for(lambda: bool(detached_workers(arm.home)), "the refresh to show", timeout=10)
    settle(arm.home)
    assert detached_workers(arm.home) == []
    recalls = Ledger(arm.home / LEDGER_FILE).recalls(session_id="s-1")
    assert [hit.id for entry in recalls for hit in entry.hits] == [shown]


def test_the_detached_workers_of_a_home_are_its_hooks_and_no_other(tmp_path: Path) -> None:
    """`detached_workers(home)` finds the processes `spawn_detached` starts for `home`
    (`python -m mtl_mcp hook ... --home HOME`, the path resolved), also when asked through
    a symlink to it, and neither a service of that home nor a hook of a home whose path
    only begins like it."""
    from mtl_mcp.operations.retiring import detached_workers

    fake = tmp_path / "fake" / "mtl_mcp"  # a package of that name that only waits
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "__main__.py").write_text("import time\ntime.sleep(60)\n")
    home, other, link = tmp_path / "home", tmp_path / "home2", tmp_path / "link"
    home.mkdir()
    other.mkdir()
    link.symlink_to(home)
    env = {**os.environ, "PYTHONPATH": str(fake.parent)}

    def start(*args: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, "-m", "mtl_mcp", *args], env=env)

    hook = start("hook", "refresh", "--project-dir", ".", "--home", str(home.resolve()))
    others = [
        start("service", "-v", "--home", str(home.resolve())),
        start("hook", "worker", "--home", str(other.resolve())),
    ]
    try:
        wait_for(lambda: detached_workers(link) == [hook.pid], "the hook's process", timeout=10)
        wait_for(lambda: detached_workers(other) == [others[1].pid], "the other's hook", 10)
        hook.kill()
        hook.wait()
        assert detached_workers(home) == []  # the service of that home is not among them
    finally:
        for process in [hook, *others]:
            process.kill()
            process.wait()
