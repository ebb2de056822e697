"""Crashes for real: kill -9 a bulk import and a busy server, then check the store.

(Killing the distillation worker mid-job is in test_sessions.py.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from mtl_mcp import Memory
from mtl_mcp.config import Settings, load_settings
from mtl_mcp.memory.ingest import insight_id
from mtl_mcp.memory.recording import IMPORT_BATCH
from mtl_mcp.operations.service import request
from mtl_mcp.schemas import InsightDraft
from mtl_mcp.storage.backup import inspect_store
from tests.conftest import distinct_lessons
from tests.raw_window import RawWindow

pytestmark = pytest.mark.slow


def _rows(settings: Settings) -> list[dict[str, Any]]:
    """Every row as another process sees it now (a fresh connection, no snapshot)."""
    import lancedb

    db = lancedb.connect(settings.store_uri)
    try:
        table = db.open_table("insights")
    except ValueError as exc:  # not created yet, or listed while another process creates it
        if "was not found" not in str(exc):
            raise
        return []
    return table.to_arrow().drop_columns(["vector"]).to_pylist()


def _wait_for(condition: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _numbered_lessons(count: int) -> list[dict[str, str]]:
    """Short (cheap to embed) and near-identical lessons: they differ only in a number."""
    return [
        {
            "title": f"Small change {n}",
            "description": f"When making change {n}.",
            "content": f"Keep change {n} small and run the tests.",
        }
        for n in range(count)
    ]


def test_a_bulk_import_killed_half_way_keeps_whole_batches_and_reruns_without_duplicates(
    settings: Settings, tmp_path: Path
) -> None:
    """kill -9 after the first batch lands: whole batches only; a rerun completes, idempotently."""
    lessons = _numbered_lessons(2 * IMPORT_BATCH)
    source = tmp_path / "bulk.jsonl"
    source.write_text("".join(json.dumps(x) + "\n" for x in lessons), encoding="utf-8")
    # Near-identical on purpose; only identical text merges, so every line is its own row.
    env = {**os.environ, "MTL_MCP_HOME": str(settings.home), "MTL_MCP_DEDUP_THRESHOLD": "1.0"}
    command = [sys.executable, "-m", "mtl_mcp", "import", str(source), "--json"]
    importer = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _wait_for(lambda: len(_rows(settings)) >= IMPORT_BATCH)
    assert importer.poll() is None, "the import finished before it could be killed"
    importer.send_signal(signal.SIGKILL)
    importer.wait(10)

    assert inspect_store(settings) is None
    survived = _rows(settings)
    expected = {insight_id(InsightDraft.model_validate(x)): x for x in lessons}
    assert len(survived) == IMPORT_BATCH  # the first batch, whole; nothing of the second
    for row in survived:  # every committed insight is whole
        assert {k: row[k] for k in ("title", "description", "content")} == expected[row["id"]]

    rerun = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    report = json.loads(rerun.stdout)
    assert (report["stored"], report["merged"]) == (len(lessons) - len(survived), len(survived))
    ids = [row["id"] for row in _rows(settings)]
    assert len(ids) == len(set(ids)) == len(lessons) and set(ids) == set(expected)


def test_a_service_killed_during_writes_loses_no_acknowledged_insight(settings: Settings) -> None:
    """kill -9 of the service with record calls in flight: the window answers every call
    (the unfinished ones with a clear tool error), acknowledged insights are whole, and a
    retry completes."""
    Memory(settings).close()
    server = RawWindow({**os.environ, "MTL_MCP_HOME": str(settings.home)})
    server.handshake()
    lessons = distinct_lessons(72)
    calls = [lessons[n : n + 3] for n in range(0, len(lessons), 3)]
    for insights in calls:  # all 24 in flight at once
        server.send(
            "tools/call",
            {"name": "record_session", "arguments": {"summary": "s", "insights": insights}},
        )
    acknowledged: list[dict[str, Any]] = []
    while len(acknowledged) < 3:
        answer = server.receive()
        assert not answer["result"].get("isError"), answer
        acknowledged += answer["result"]["structuredContent"]["results"]
    status = request(settings, "status")
    assert status is not None
    os.kill(status["pid"], signal.SIGKILL)
    answered = len(acknowledged) // 3
    stopped = []
    while answered < len(calls):  # every call is answered: none hangs
        result = server.receive()["result"]
        answered += 1
        if result.get("isError"):
            stopped.append(result["content"][0]["text"])
        else:
            acknowledged += result["structuredContent"]["results"]
    assert stopped and all("service stopped" in text for text in stopped)
    server.close()

    assert inspect_store(settings) is None
    rows = {row["id"]: row for row in _rows(settings)}
    assert len(rows) < len(lessons), "every write finished before the kill"
    by_title = {str(x["title"]): x for x in lessons}
    for result in acknowledged:
        assert result["status"] == "stored"
        row = rows[result["id"]]
        assert row["content"] == by_title[row["title"]]["content"]
    store = Memory(load_settings(settings.home))
    retried = store.record(lessons)
    assert {r.status for r in retried} == {"stored", "merged"}
    ids = [i.id for i in store.export()]
    assert len(ids) == len(set(ids)) == len(lessons)
