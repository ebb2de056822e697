"""Which team rows your own memory already holds, so that recall shows each lesson once.

A team row is yours already when your memory has the same id (you shared it) or a
near-duplicate of it: cosine similarity at or above the dedup threshold, the test that
would have merged the two had they been recorded into one store (an insight you shared
that merged into a teammate's, or the same lesson learnt twice independently). Your copy
is kept (it carries your ratings and notes); the team's is left out of recall, listings and
the keyword statistics alike.

Comparing every team row with every personal one is a matrix product: on two cores ~90 ms
for a 1,000-row pool against 10,000 insights. It is done once per pair of snapshots, in
blocks (bounded memory), and only for the new rows when either snapshot gains rows
(this process's own writes). The team tier's background refresh does it for each new pool
snapshot, so a recall rarely pays for it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from mtl_mcp.storage.snapshot import Mask, Snapshot

TEAM_BLOCK = 256
PERSONAL_BLOCK = 8192  # 256 x 8192 float32 similarities: 8 MB at a time


def best_similarity(
    rows: npt.NDArray[np.float32], others: npt.NDArray[np.float32]
) -> npt.NDArray[np.float32]:
    """For each of `rows`, its highest cosine similarity to any of `others` (-inf if none)."""
    best = np.full(len(rows), -np.inf, dtype=np.float32)
    for start in range(0, len(others), PERSONAL_BLOCK):
        block = others[start : start + PERSONAL_BLOCK].T
        for first in range(0, len(rows), TEAM_BLOCK):
            part = slice(first, first + TEAM_BLOCK)
            np.maximum(best[part], (rows[part] @ block).max(axis=1), out=best[part])
    return best


@dataclass(frozen=True)
class _Compared:
    """The hidden mask of one (team, personal) pair of snapshot lineages, for their first
    rows (snapshots of one lineage differ only by rows appended, or counters)."""

    team: object
    personal: object
    team_rows: int
    personal_rows: int
    hidden: Mask


class Overlap:
    """The team rows your memory holds already (see the module docstring), remembered for
    the last pair of snapshots compared. Thread-safe."""

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        self._lock = threading.Lock()
        self._compared: _Compared | None = None

    def hidden(self, team: Snapshot, personal: Snapshot) -> Mask:
        """Team rows (a mask over `team`) that duplicate one of `personal`'s rows."""
        with self._lock:
            known = self._compared
        team_rows, personal_rows = len(team), len(personal)
        if (
            known is None
            or known.team is not team.lineage
            or known.personal is not personal.lineage
            or known.team_rows > team_rows
            or known.personal_rows > personal_rows
        ):
            hidden = self._duplicates(team, personal, 0, 0)
        elif (known.team_rows, known.personal_rows) == (team_rows, personal_rows):
            return known.hidden
        else:  # either snapshot gained rows: compare only what is new
            hidden = np.zeros(team_rows, dtype=bool)
            hidden[: known.team_rows] = known.hidden[:team_rows]
            hidden |= self._duplicates(team, personal, 0, known.personal_rows)
            hidden[known.team_rows :] |= self._duplicates(team, personal, known.team_rows, 0)[
                known.team_rows :
            ]
        with self._lock:
            self._compared = _Compared(
                team.lineage, personal.lineage, team_rows, personal_rows, hidden
            )
        return hidden

    def _duplicates(
        self, team: Snapshot, personal: Snapshot, team_from: int, personal_from: int
    ) -> Mask:
        """A mask over all team rows: those from `team_from` on that duplicate one of the
        personal rows from `personal_from` on."""
        hidden = np.zeros(len(team), dtype=bool)
        rows, others = team.vectors[team_from:], personal.vectors[personal_from:]
        if not len(rows) or not len(others):
            return hidden
        ids = personal.rows.column("id").slice(personal_from).to_pylist()
        same = team.column_mask("id", ids)[team_from:]
        hidden[team_from:] = same | (best_similarity(rows, others) >= self.threshold)
        return hidden
