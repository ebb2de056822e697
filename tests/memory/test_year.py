"""The small simulated year (tests/fixtures/year, written by bench/year_stream.py) through
the real Memory with a pass every simulated night: every cluster one lesson, the planted
contradictions flagged, the changed flag superseded, the store near its distinct lessons.
The truth beside the stream is read here, never by mtl-mcp. bench/year.py is the full year,
with recall, verdicts and the evaluation plans."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from mtl_mcp import Memory
from mtl_mcp.config import load_settings
from mtl_mcp.schemas import Provenance

pytestmark = pytest.mark.slow

YEAR = Path(__file__).resolve().parents[1] / "fixtures" / "year"
START = datetime(2025, 1, 6, tzinfo=UTC)


def pairs(labels: dict[str, Any], kind: str) -> set[frozenset[str]]:
    return {
        frozenset((lesson, meta["partner"]))
        for lesson, meta in labels["lessons"].items()
        if meta["kind"] == kind
    }


def test_a_small_year_consolidated_every_night(tmp_path: Path) -> None:
    sessions = [json.loads(line) for line in (YEAR / "year.jsonl").read_text().splitlines()]
    labels = json.loads((YEAR / "year-labels.json").read_text())
    now = [START]
    memory = Memory(
        load_settings(tmp_path / "home", starter=False, retire_unused_days=0),
        clock=lambda: now[0],
    )
    lesson_of: dict[str, str] = {}
    day = sessions[0]["day"]
    for session in [*sessions, None]:
        if session is None or session["day"] != day:
            now[0] = START + timedelta(days=day, hours=23)
            memory.consolidate(trigger="test")
            if session is None:
                break
            day = session["day"]
        if not session["insights"]:
            continue
        now[0] = START + timedelta(days=day, hours=9)
        provenance = Provenance(project=session["project"], session_id=session["session"])
        results = memory.record([i["draft"] for i in session["insights"]], provenance)
        for item, result in zip(session["insights"], results, strict=True):
            if result.id:
                lesson_of.setdefault(result.id, labels["items"][str(item["n"])]["lesson"])

    runs = memory.consolidation_runs(limit=1000)
    merged = [(kept, members) for run in runs for kept, members in run.merged]
    assert merged, "the year's wordings were merged"
    impure = [(k, m) for k, m in merged if {lesson_of[k]} != {lesson_of[i] for i in m}]
    assert impure == []
    flagged = {frozenset(lesson_of[i] for i in pair) for run in runs for pair in run.conflicts}
    assert pairs(labels, "contradiction") <= flagged
    assert len(flagged - pairs(labels, "contradiction")) == 0  # no false flag
    superseded = {
        frozenset((lesson_of[old], lesson_of[new])) for run in runs for old, new in run.superseded
    }
    assert superseded == pairs(labels, "supersedes")
    active = [i for i in memory.export() if i.status == "active"]
    distinct = len(set(lesson_of.values()))
    assert len(active) <= 1.2 * distinct, (len(active), distinct)
    per_lesson = Counter(lesson_of[i.id] for i in active if i.id in lesson_of)
    assert max(per_lesson.values()) <= 2
    # The year's last run is undone cleanly.
    last = next(run for run in runs if run.merged)
    memory.undo_consolidation(last.run)
    back = {i.id: i.status for i in memory.export()}
    assert all(back[i] == "active" for _, members in last.merged for i in members)
    memory.close()
