"""The daily token ledger: budget checks, UTC day files, concurrent writers, bad lines."""

from __future__ import annotations

import json
import multiprocessing
import stat
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from mtl_mcp.errors import BudgetExceeded, BudgetTooSmall, ConfigError, DistillError, Retryable
from mtl_mcp.learning.spend import SpendLedger

NOON = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


class Clock:
    """A settable clock for the ledger."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def test_budget_blocks_when_exceeded(tmp_path: Path) -> None:
    ledger = SpendLedger(tmp_path / "spend", 1000, clock=Clock(NOON))
    assert ledger.used_today() == 0

    ledger.record(800, session="s1", backend="anthropic")
    ledger.check(200)  # exactly fits

    assert ledger.used_today() == 800
    with pytest.raises(BudgetExceeded) as caught:
        ledger.check(300)
    message = str(caught.value)
    assert isinstance(caught.value, DistillError)
    assert isinstance(caught.value, Retryable)
    assert "800 of 1,000" in message
    assert "2026-11-30 00:00 UTC" in message and "in 12h00m" in message
    assert "MTL_MCP_DAILY_TOKENS" in message and "daily_token_budget" in message
    assert caught.value.retry_at == datetime(2026, 11, 30, tzinfo=UTC)


def test_a_backend_budget_counts_only_that_backends_tokens(tmp_path: Path) -> None:
    """A subscription backend stops at its own budget; the daily budget counts every backend."""
    ledger = SpendLedger(tmp_path, 1000, clock=Clock(NOON))
    ledger.record(500, session="api", backend="anthropic")
    ledger.record(250, session="cc", backend="claude-code")
    (tmp_path / "2026-11-29.jsonl").open("a").write('{"tokens": 50}\n')  # an older API line

    assert ledger.used_today() == 800
    assert ledger.used_today("anthropic") == 550 and ledger.used_today("claude-code") == 250
    ledger.check(50, backend="claude-code", backend_daily_tokens=300)  # exactly fits
    ledger.check(100, backend="codex", backend_daily_tokens=300)  # codex spent nothing yet
    with pytest.raises(BudgetExceeded) as own:
        ledger.check(100, backend="claude-code", backend_daily_tokens=300)
    assert "claude-code daily token budget reached: 250 of 300" in str(own.value)
    assert "MTL_MCP_SUBSCRIPTION_DAILY_TOKENS" in str(own.value)
    with pytest.raises(BudgetExceeded, match="MTL_MCP_DAILY_TOKENS"):
        ledger.check(250, backend="codex", backend_daily_tokens=300)  # the machine's budget
    with pytest.raises(BudgetTooSmall, match="whole codex daily budget of 0"):
        ledger.check(1, backend="codex", backend_daily_tokens=0)


def test_a_run_larger_than_the_whole_budget_is_not_retryable(tmp_path: Path) -> None:
    ledger = SpendLedger(tmp_path, 1000, clock=Clock(NOON))
    with pytest.raises(BudgetTooSmall, match="more than the whole daily budget") as caught:
        ledger.check(5000)
    assert not isinstance(caught.value, Retryable)


def test_zero_budget_spends_nothing_and_negative_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(BudgetTooSmall):
        SpendLedger(tmp_path, 0, clock=Clock(NOON)).check(1)
    with pytest.raises(ConfigError, match="MTL_MCP_DAILY_TOKENS"):
        SpendLedger(tmp_path, -1)


def test_budget_resets_each_utc_day(tmp_path: Path) -> None:
    clock = Clock(datetime(2026, 11, 29, 23, 59, tzinfo=UTC))
    ledger = SpendLedger(tmp_path, 1000, clock=clock)
    ledger.record(1000, session=None, backend="anthropic")
    with pytest.raises(BudgetExceeded):
        ledger.check(1)

    clock.now += timedelta(minutes=2)  # past UTC midnight
    ledger.check(1000)
    assert ledger.used_today() == 0
    ledger.record(10, session="next-day", backend="anthropic")

    assert sorted(p.name for p in tmp_path.iterdir()) == ["2026-11-29.jsonl", "2026-11-30.jsonl"]
    assert ledger.used_on(datetime(2026, 11, 29).date()) == 1000


def test_days_are_utc_days_whatever_the_clock_zone(tmp_path: Path) -> None:
    new_york = timezone(timedelta(hours=-5))
    ledger = SpendLedger(
        tmp_path, 1000, clock=Clock(datetime(2026, 11, 29, 21, 0, tzinfo=new_york))
    )
    ledger.record(5, session=None, backend="anthropic")
    assert (tmp_path / "2026-11-30.jsonl").is_file()


def test_files_are_private(tmp_path: Path) -> None:
    directory = tmp_path / "spend"
    SpendLedger(directory, 1000, clock=Clock(NOON)).record(1, session="s", backend="anthropic")
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert stat.S_IMODE((directory / "2026-11-29.jsonl").stat().st_mode) == 0o600


def test_malformed_lines_are_ignored(tmp_path: Path) -> None:
    ledger = SpendLedger(tmp_path, 10_000, clock=Clock(NOON))
    ledger.record(100, session="a", backend="anthropic")
    with (tmp_path / "2026-11-29.jsonl").open("a", encoding="utf-8") as f:
        f.write("not json\n")
        f.write('{"tokens": "many"}\n[1, 2]\n{"tokens": true}\n{"tokens": -50}\n\n')
        f.write('{"tokens": 7}\n')
        f.write('{"tokens": 40, "sess')  # a writer died mid-line
    ledger.record(200, session="b", backend="anthropic")  # starts a fresh line after the fragment

    assert ledger.used_today() == 307


def test_record_lines_are_json(tmp_path: Path) -> None:
    SpendLedger(tmp_path, 10, clock=Clock(NOON)).record(3, session="abc", backend="anthropic")
    (line,) = (tmp_path / "2026-11-29.jsonl").read_text(encoding="utf-8").splitlines()
    record = json.loads(line)
    assert record["tokens"] == 3 and record["session"] == "abc" and record["backend"] == "anthropic"
    assert record["ts"].startswith("2026-11-29T12:00:00")


def test_prune_keeps_recent_days(tmp_path: Path) -> None:
    clock = Clock(NOON - timedelta(days=40))
    ledger = SpendLedger(tmp_path, 10, clock=clock)
    ledger.record(1, session=None, backend="anthropic")
    clock.now = NOON
    ledger.record(1, session=None, backend="anthropic")
    (tmp_path / "notes.jsonl").write_text("", encoding="utf-8")
    assert ledger.prune(keep_days=31) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["2026-11-29.jsonl", "notes.jsonl"]


def _append_many(directory: str, worker: int, count: int) -> None:
    ledger = SpendLedger(Path(directory), 10**9, clock=lambda: NOON)
    for n in range(count):
        ledger.record(7, session=f"worker{worker}-{n}", backend="anthropic")


def test_concurrent_appends_from_processes_are_all_counted(tmp_path: Path) -> None:
    workers, count = 4, 50
    context = multiprocessing.get_context("spawn")
    processes = [
        context.Process(target=_append_many, args=(str(tmp_path), w, count)) for w in range(workers)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0

    ledger = SpendLedger(tmp_path, 10**9, clock=Clock(NOON))
    assert ledger.used_today() == workers * count * 7
    lines = (tmp_path / "2026-11-29.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == workers * count
    sessions = {json.loads(line)["session"] for line in lines}
    assert len(sessions) == workers * count
