"""Consolidation runs on disk: one small JSON file per run in `<home>/consolidation/`.

A run file holds what the run did and why (what `mtl-mcp consolidate` prints and the
dashboard shows) and what undoing it needs: each changed row's values before the run, what
the run added to the rows it kept, and the ledger rows it moved. It lives beside the store,
not in it: the insight table's schema is unchanged, so an older mtl-mcp still reads the
store (it sees merged members as retired insights, with the run named in their notes).

Files are written atomically and owner-only; a purge scrubs them like any other plain file
of the data directory. Run ids sort by time.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from mtl_mcp.errors import NotFoundError, StoreError
from mtl_mcp.files import write_private
from mtl_mcp.schemas import ConsolidationRun

RUNS_DIR = "consolidation"
LAST_FILE = "last"  # when the service last finished a pass, for its daily schedule


def new_run_id(at: datetime) -> str:
    """`run-YYYYMMDD-HHMMSS-xxxx`: sortable by time, unique."""
    return f"run-{at:%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


@dataclass
class Undo:
    """What undoing a run needs.

    `before`: each changed row's fields before the run (status, counters, lists,
    updated_at); `added`: what the run added to each row it kept (counter increments and
    list items); `notes`: the notes it appended to each row; `written`: the updated_at it
    wrote to the kept rows; `ledger`: (table, rowid, former insight) of each ledger row it
    moved; `created`: rows the run added (a merge the distillation backend wrote).
    """

    before: dict[str, dict[str, Any]] = field(default_factory=dict)
    added: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: dict[str, list[str]] = field(default_factory=dict)
    written: dict[str, str] = field(default_factory=dict)
    ledger: list[tuple[str, int, str]] = field(default_factory=list)
    created: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "before": self.before,
            "added": self.added,
            "notes": self.notes,
            "written": self.written,
            "ledger": [list(row) for row in self.ledger],
            "created": self.created,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Undo:
        return cls(
            before=dict(data.get("before") or {}),
            added=dict(data.get("added") or {}),
            notes=dict(data.get("notes") or {}),
            written=dict(data.get("written") or {}),
            ledger=[(str(t), int(r), str(i)) for t, r, i in data.get("ledger") or []],
            created=list(data.get("created") or []),
        )

    def touched(self) -> set[str]:
        """Every insight the run changed or created."""
        return set(self.before) | set(self.created)


class RunFiles:
    """The run files of one data directory."""

    def __init__(self, home: Path) -> None:
        self.folder = home / RUNS_DIR
        # Parsed runs by file name, with the file's modification time: a pass reads every
        # earlier run (the conflicts they flagged), and a year of daily runs is hundreds.
        self._parsed: dict[str, tuple[int, ConsolidationRun, Undo]] = {}

    def _path(self, run: str) -> Path:
        if not run.startswith("run-") or "/" in run or "\\" in run or run.startswith("."):
            raise NotFoundError(
                f"{run!r} is not a consolidation run id: list them with `mtl-mcp consolidate "
                "--list` (they look like run-20250101-120000-ab12)"
            )
        return self.folder / f"{run}.json"

    def save(self, run: ConsolidationRun, undo: Undo) -> None:
        data = {**run.model_dump(mode="json"), "undo": undo.to_json()}
        write_private(self._path(run.run), json.dumps(data, ensure_ascii=False, indent=1))

    def load(self, run: str) -> tuple[ConsolidationRun, Undo]:
        path = self._path(run)
        try:
            stamp = path.stat().st_mtime_ns
            cached = self._parsed.get(run)
            if cached is not None and cached[0] == stamp:
                return cached[1].model_copy(deep=True), cached[2]
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise NotFoundError(
                f"no consolidation run {run!r}: list them with `mtl-mcp consolidate --list`"
            ) from None
        except (OSError, ValueError) as exc:
            raise StoreError(f"the run file {path} cannot be read ({exc}): delete it") from exc
        parsed = ConsolidationRun.model_validate(data), Undo.from_json(data.get("undo") or {})
        self._parsed[run] = (stamp, *parsed)
        return parsed[0].model_copy(deep=True), parsed[1]

    def runs(self, limit: int | None = None) -> list[tuple[ConsolidationRun, Undo]]:
        """The runs, newest first (unreadable files are skipped)."""
        if not self.folder.is_dir():
            return []
        names = sorted((p.stem for p in self.folder.glob("run-*.json")), reverse=True)
        found = []
        for name in names[:limit] if limit else names:
            try:
                found.append(self.load(name))
            except StoreError:
                continue
        return found

    def last_pass(self) -> datetime | None:
        """When the service last finished a pass (None: never)."""
        try:
            return datetime.fromisoformat((self.folder / LAST_FILE).read_text().strip())
        except (OSError, ValueError):
            return None

    def mark_pass(self, at: datetime) -> None:
        write_private(self.folder / LAST_FILE, at.isoformat())
