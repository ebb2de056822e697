"""What distillation spends: tokens per run, their price, and a daily budget per machine.

Spend is kept as append-only JSON lines, one file per UTC day (`<directory>/YYYY-MM-DD.jsonl`),
one ledger for every backend: each line names the backend that spent the tokens (lines
without one are the Anthropic API's, the only backend before there were others). The daily
budget covers all backends together; a backend may also have a smaller budget of its own
(the subscription backends do, as they spend the user's interactive quota). Tokens of a
model on this machine (`local` lines) cost neither money nor quota: they count only against
that backend's own budget, never against the daily one.
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

from pydantic import BaseModel

from mtl_mcp.errors import BudgetExceeded, BudgetTooSmall, ConfigError
from mtl_mcp.files import append_private

_RAISE_IT = "raise it with MTL_MCP_DAILY_TOKENS or daily_token_budget in config.toml"
_RAISE_BACKEND = (
    "raise it with MTL_MCP_SUBSCRIPTION_DAILY_TOKENS or subscription_daily_tokens in config.toml"
)
_RAISE_LOCAL = "raise or unset MTL_MCP_LOCAL_DAILY_TOKENS (local_daily_tokens in config.toml)"
API_BACKEND = "anthropic"  # lines written without a backend are this one's
KEEP_DAYS = 31

# USD per million tokens (input, output), matched by model-name prefix, most specific first.
_PRICES: tuple[tuple[str, float, float], ...] = (
    ("claude-haiku-5-5", 0.10, 0.50),
    ("claude-haiku-4-5", 1.00, 5.00),
    ("claude-sonnet-", 3.00, 15.00),
)
# Unknown models are priced high on purpose: an estimate may overstate spend, never hide it.
_FALLBACK_PRICE = (15.00, 75.00)


def estimate_cost(input_tokens: int, output_tokens: int, model: str) -> float:
    """USD for the given tokens on `model` (standard rates; unknown models priced high)."""
    price_in, price_out = _FALLBACK_PRICE
    for prefix, p_in, p_out in _PRICES:
        if model.startswith(prefix):
            price_in, price_out = p_in, p_out
            break
    return (input_tokens * price_in + output_tokens * price_out) / 1_000_000


class Usage(BaseModel):
    """Tokens spent, summed over every call of a run (failed calls included)."""

    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, input_tokens: int, output_tokens: int) -> None:
        self.input_tokens += max(0, input_tokens)
        self.output_tokens += max(0, output_tokens)

    def cost_usd(self, model: str) -> float:
        return estimate_cost(self.input_tokens, self.output_tokens, model)


def _utc_now() -> datetime:
    return datetime.now(UTC)


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

    def used_on(self, day: date, backend: str | None = None) -> int:
        """Tokens recorded for `day` (UTC): by `backend` only, or else by every backend that
        costs money or quota (local lines left out); malformed lines are skipped."""
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
            if not isinstance(record, dict):
                continue
            if backend is not None and record.get("backend", API_BACKEND) != backend:
                continue
            if backend is None and record.get("local") is True:
                continue
            tokens = record.get("tokens")
            if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens > 0:
                total += tokens
        return total

    def by_backend(self, day: date | None = None) -> dict[str, tuple[int, bool]]:
        """Tokens recorded for `day` (default today, UTC) per backend, and whether that
        backend is a model on this machine; malformed lines are skipped."""
        try:
            data = self.path_for(day or self.today()).read_bytes()
        except FileNotFoundError:
            return {}
        found: dict[str, tuple[int, bool]] = {}
        for line in data.splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            tokens = record.get("tokens") if isinstance(record, dict) else None
            if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens <= 0:
                continue
            backend = str(record.get("backend", API_BACKEND))
            before, local = found.get(backend, (0, False))
            found[backend] = (before + tokens, local or record.get("local") is True)
        return found

    def used_today(self, backend: str | None = None) -> int:
        return self.used_on(self.today(), backend)

    # -- the budget ------------------------------------------------------------------------

    def check(
        self,
        estimated_tokens: int,
        *,
        backend: str | None = None,
        backend_daily_tokens: int | None = None,
        local: bool = False,
    ) -> None:
        """Raise unless today's budgets still cover `estimated_tokens`: BudgetExceeded (it
        resets at midnight) or BudgetTooSmall (one run needs more than a whole day's).

        The daily budget counts every backend's tokens but local ones, and does not hold a
        `local` backend; `backend_daily_tokens`, when given, is `backend`'s own budget and
        counts only its tokens.
        """
        if not local:
            self._check_one(estimated_tokens, self.used_today(), self.daily_tokens, "", _RAISE_IT)
        if backend is not None and backend_daily_tokens is not None:
            self._check_one(
                estimated_tokens,
                self.used_today(backend),
                backend_daily_tokens,
                f"{backend} ",
                _RAISE_LOCAL if local else _RAISE_BACKEND,
            )

    def _check_one(
        self, estimated_tokens: int, used: int, budget: int, whose: str, raise_it: str
    ) -> None:
        if used + max(0, estimated_tokens) <= budget:
            return
        if estimated_tokens > budget:
            raise BudgetTooSmall(
                f"one distillation run needs about {estimated_tokens:,} tokens, more than the "
                f"whole {whose}daily budget of {budget:,}: {raise_it}, or lower "
                "MTL_MCP_DIGEST_TOKENS"
            )
        resets = self.resets_at()
        hours, minutes = divmod(max(0, int((resets - self.now()).total_seconds())) // 60, 60)
        raise BudgetExceeded(
            f"{whose}daily token budget reached: {used:,} of {budget:,} tokens used today and "
            f"this run needs about {estimated_tokens:,}; it resets at {resets:%Y-%m-%d %H:%M} "
            f"UTC (in {hours}h{minutes:02d}m) and the job stays queued until then; {raise_it}",
            retry_at=resets,
        )

    def record(
        self, usage_tokens: int, *, session: str | None, backend: str, local: bool = False
    ) -> None:
        """Append `usage_tokens` spent by `backend` (a model on this machine if `local`) to
        today's file: one O_APPEND write, safe across processes."""
        if usage_tokens < 0:
            raise ValueError(f"usage_tokens must be >= 0, got {usage_tokens}")
        now = self.now()
        entry: dict[str, object] = {
            "ts": now.isoformat(timespec="seconds"),
            "tokens": usage_tokens,
            "session": session,
            "backend": backend,
            "pid": os.getpid(),
        }
        if local:
            entry["local"] = True
        line = json.dumps(entry, separators=(",", ":"))
        append_private(self.path_for(now.date()), line)

    def prune(self, keep_days: int = KEEP_DAYS) -> int:
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
