"""A small storm (bench/stress.py at CI size): concurrent writer and reader servers."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from bench.stress import distinct_lessons, run_storm, verify
from mtl_mcp import Memory
from mtl_mcp.config import load_settings
from mtl_mcp.storage.table import OPTIMIZE_EVERY

pytestmark = pytest.mark.slow

WRITERS, PER_WRITER = 3, 17  # 51 inserts: every server sees a compaction threshold pass


def test_three_writers_and_a_reader_lose_nothing_while_compaction_runs(tmp_path: Path) -> None:
    """3 windows x 17 records while another recalls, all through the shared service: all
    stored once, compaction ran, no errors."""
    home = tmp_path / "home"
    settings = load_settings(home, starter=True)
    lessons = distinct_lessons(WRITERS * PER_WRITER, settings)
    Memory(settings).stats()  # the store and its starter pack exist before the storm
    assert len(lessons) > OPTIMIZE_EVERY

    report = anyio.run(run_storm, home, lessons, WRITERS, 1, 0.05)

    assert verify(settings, report, lessons) == []
    assert report.recalls_during_storm > 0 and len(report.write_ms) == len(lessons)
    logs = "".join(Path(p).read_text() for p in report.stderr_logs if Path(p).exists())
    # Rarely a write commits first and the compaction yields; either way it ran mid-storm.
    assert "compacted the table" in logs or "compaction deferred" in logs
    assert "Traceback" not in logs
    assert not any(str(x["title"]) in logs or str(x["content"]) in logs for x in lessons)
