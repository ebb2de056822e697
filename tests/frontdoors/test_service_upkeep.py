"""The shared service consolidates the memory in its idle time: never while windows keep
asking, once when they stop, then not again until the next day. A real service process."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mtl_mcp import Memory, Provenance
from mtl_mcp.config import Settings
from mtl_mcp.operations.service import ensure_service
from mtl_mcp.server.calls import ServiceMemory
from mtl_mcp.storage.runs import RunFiles
from tests.frontdoors.test_service import wait_for
from tests.memory.test_consolidation import WORDINGS

pytestmark = pytest.mark.slow


def test_an_idle_service_consolidates_once_and_not_while_windows_ask(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = Memory(settings)
    ids = [r.id for r in memory.record(WORDINGS, Provenance(project="p", session_id="s1"))]
    memory.close()
    monkeypatch.setenv("MTL_MCP_CONSOLIDATE_IDLE_SECONDS", "3")
    sock, _ = ensure_service(settings, "status")
    sock.close()
    quick = ServiceMemory.running(settings)
    assert quick is not None
    runs = RunFiles(settings.home)
    asking_until = time.monotonic() + 8
    while time.monotonic() < asking_until:  # a window that keeps asking
        quick.recall("Reproduce the reported failure with a test before fixing it.")
        time.sleep(0.3)
    assert runs.runs() == []

    wait_for(lambda: bool(runs.runs()), timeout=60)

    [(run, _)] = runs.runs()
    assert run.trigger == "idle"
    assert sorted(i for kept, members in run.merged for i in [kept, *members]) == sorted(ids)
    assert sorted(quick.get(i).status for i in ids) == ["active", "retired", "retired"]
    time.sleep(5)  # idle on: the pass is done for the day
    assert len(runs.runs()) == 1


def test_a_service_told_not_to_consolidates_nothing(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("MTL_MCP_CONSOLIDATE_IDLE_SECONDS", "0")
    sock, _ = ensure_service(settings, "status")
    sock.close()
    quick = ServiceMemory.running(settings)
    assert quick is not None
    quick.record(WORDINGS, Provenance(project="p", session_id="s1"))
    time.sleep(5)
    assert RunFiles(settings.home).runs() == []
