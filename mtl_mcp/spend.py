"""A per-day token budget for distillation, shared by every process on the machine.

Spend is kept as append-only JSON lines, one file per UTC day (`<directory>/YYYY-MM-DD.jsonl`).
Each record is one small `write()` on a file opened with O_APPEND, so concurrent writers
(hooks, queue workers, the CLI) never interleave or overwrite each other's lines; a line that
is malformed (or half-written by a crashed process) is ignored when summing.

`check()` then `record()` is not a reservation: processes that check at the same moment may
together overshoot the budget by at most one run each, which is the price of needing no lock.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path

from mtl_mcp.errors import ConfigError, DistillError

__all__ = ["BudgetExceeded", "SpendLedger"]

_RAISE_IT = "raise it with MTL_MCP_DAILY_TOKENS or daily_token_budget in config.toml"


def _utc_now() -> datetime:
    return datetime.now(UTC)


class BudgetExceeded(DistillError):
    """Today's token budget cannot cover the next run.

    `retryable` is True (the budget resets at the next UTC midnight), except when one run
    alone needs more than the whole daily budget: then only a larger budget helps.
    """

    def __init__(
        self, message: str, *, used: int, budget: int, resets_at: datetime, retryable: bool = True
    ) -> None:
        super().__init__(message)
        self.used = used
        self.budget = budget
        self.resets_at = resets_at
        self.retryable = retryable


class SpendLedger:
    """Tokens spent per UTC day, in `directory`; `daily_tokens` is the budget (0 = spend nothing).

    `clock` returns the current time (timezone-aware; naive is taken as UTC). Tests inject it.
    """

    def __init__(
        self,
        directory: Path,
        daily_tokens: int,
        *,
        clock: Callable[[], datetime] = _utc_now,
    ) -> None:
        if daily_tokens < 0:
            raise ConfigError(
                f"daily_token_budget={daily_tokens} is negative: set MTL_MCP_DAILY_TOKENS or "
                "daily_token_budget to 0 (no distillation) or a positive number of tokens"
            )
        self.directory = Path(directory)
        self.daily_tokens = daily_tokens
        self._clock = clock

    # -- time ------------------------------------------------------------------------------

    def now(self) -> datetime:
        now = self._clock()
        return now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)

    def today(self) -> date:
        return self.now().date()

    def resets_at(self) -> datetime:
        """The next UTC midnight, when today's spend stops counting."""
        return datetime.combine(self.today() + timedelta(days=1), time(0), tzinfo=UTC)

    def path_for(self, day: date) -> Path:
        return self.directory / f"{day.isoformat()}.jsonl"

    # -- reading ---------------------------------------------------------------------------

    def used_on(self, day: date) -> int:
        """Tokens recorded for `day` (UTC); malformed lines are skipped."""
        try:
            data = self.path_for(day).read_bytes()
        except FileNotFoundError:
            return 0
        total = 0
        for line in data.splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            tokens = record.get("tokens") if isinstance(record, dict) else None
            if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens > 0:
                total += tokens
        return total

    def used_today(self) -> int:
        return self.used_on(self.today())

    def remaining(self) -> int:
        return max(0, self.daily_tokens - self.used_today())

    # -- the budget ------------------------------------------------------------------------

    def check(self, estimated_tokens: int) -> None:
        """Raise BudgetExceeded unless today's budget still covers `estimated_tokens`."""
        used = self.used_today()
        if used + max(0, estimated_tokens) <= self.daily_tokens:
            return
        resets = self.resets_at()
        wait = resets - self.now()
        hours, minutes = divmod(max(0, int(wait.total_seconds())) // 60, 60)
        budget = self.daily_tokens
        if estimated_tokens > budget:
            raise BudgetExceeded(
                f"one distillation run needs about {estimated_tokens:,} tokens, more than the "
                f"whole daily budget of {budget:,}: {_RAISE_IT}, or lower MTL_MCP_DIGEST_TOKENS",
                used=used,
                budget=budget,
                resets_at=resets,
                retryable=False,
            )
        raise BudgetExceeded(
            f"daily token budget reached: {used:,} of {budget:,} tokens used today and this run "
            f"needs about {estimated_tokens:,}; it resets at {resets:%Y-%m-%d %H:%M} UTC "
            f"(in {hours}h{minutes:02d}m) and the job stays queued until then; {_RAISE_IT}",
            used=used,
            budget=budget,
            resets_at=resets,
        )

    def record(self, usage_tokens: int, *, session: str | None) -> None:
        """Append `usage_tokens` to today's file: one O_APPEND write, safe across processes."""
        if usage_tokens < 0:
            raise ValueError(f"usage_tokens must be >= 0, got {usage_tokens}")
        now = self.now()
        line = json.dumps(
            {
                "ts": now.isoformat(timespec="seconds"),
                "tokens": usage_tokens,
                "session": session,
                "pid": os.getpid(),
            },
            separators=(",", ":"),
        )
        payload = (line + "\n").encode("utf-8")
        self._ensure_directory()
        fd = os.open(
            self.path_for(now.date()),
            os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0),
            0o600,
        )
        try:
            # A writer that died mid-line left no newline: start on a fresh line, or this
            # record would be glued to the fragment and lost with it.
            size = os.fstat(fd).st_size
            if size and hasattr(os, "pread") and os.pread(fd, 1, size - 1) != b"\n":
                payload = b"\n" + payload
            written = os.write(fd, payload)
            if written != len(payload):  # never for a line this small on a local disk
                os.write(fd, payload[written:])
        finally:
            os.close(fd)

    def prune(self, keep_days: int = 31) -> int:
        """Delete day files older than `keep_days`; returns how many were removed."""
        cutoff = self.today() - timedelta(days=keep_days)
        removed = 0
        for path in self.directory.glob("*.jsonl"):
            try:
                day = date.fromisoformat(path.stem)
            except ValueError:
                continue
            if day < cutoff:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                    removed += 1
        return removed

    def _ensure_directory(self) -> None:
        if self.directory.is_dir():
            return
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        with contextlib.suppress(OSError):  # e.g. a directory someone else owns
            self.directory.chmod(0o700)
