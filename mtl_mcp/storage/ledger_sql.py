"""The recall ledger's tables (`storage.ledger`), and its statements' batching: SQLite
takes at most so many bound values in one statement."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

LEDGER_SCHEMA = """
CREATE TABLE IF NOT EXISTS recalls (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at TEXT NOT NULL,
    session TEXT,
    client TEXT,
    trigger TEXT NOT NULL,
    plan TEXT NOT NULL,
    project TEXT
);
CREATE INDEX IF NOT EXISTS recalls_session ON recalls(session);
CREATE TABLE IF NOT EXISTS recalled (
    recall INTEGER NOT NULL REFERENCES recalls(id) ON DELETE CASCADE,
    rank INTEGER NOT NULL,
    insight TEXT NOT NULL,
    score REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS recalled_insight ON recalled(insight);
CREATE INDEX IF NOT EXISTS recalled_recall ON recalled(recall);
CREATE TABLE IF NOT EXISTS verdicts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at TEXT NOT NULL,
    session TEXT NOT NULL,
    insight TEXT NOT NULL,
    verdict TEXT NOT NULL,
    mode TEXT,
    reason TEXT,
    backend TEXT,
    plan TEXT,
    trigger TEXT,
    vector BLOB,
    model TEXT
);
CREATE INDEX IF NOT EXISTS verdicts_insight ON verdicts(insight);
CREATE INDEX IF NOT EXISTS verdicts_session ON verdicts(session);
CREATE TABLE IF NOT EXISTS reinstated (
    insight TEXT PRIMARY KEY,
    at TEXT NOT NULL
);
"""


def chunks(values: Sequence[Any], size: int = 500) -> Iterator[list[Any]]:
    """`values` in lists of at most `size`, for `IN (?, ...)` clauses."""
    for start in range(0, len(values), size):
        yield list(values[start : start + size])
