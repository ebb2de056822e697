"""The relevance gate's runtime part: its signals, the fit it loads (a tuned one in the data
directory first), what it lets through, and the setting that replaced 0.3's cosine floor."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import numpy as np
import pytest

from mtl_mcp.config import AUTO_RECALL_MIN_P, load_settings
from mtl_mcp.errors import ConfigError
from mtl_mcp.index.gate import (
    GATE_FILE,
    Gate,
    GateFile,
    hit_signals,
    shipped_gate,
    unasked,
    unasked_positions,
)
from mtl_mcp.schemas import RecallHit


def test_signals_are_measured_against_every_candidate() -> None:
    cosine = np.array([0.1, 0.2, 0.3, 0.6], dtype=np.float32)
    bm25 = np.array([0.0, 1.0, 3.0, 0.0], dtype=np.float32)
    found = hit_signals(cosine, bm25, cosine[[3, 2]], bm25[[3, 2]])
    z = (np.array([0.6, 0.3]) - cosine.mean()) / cosine.std()
    assert found[:, 0] == pytest.approx(z, abs=1e-6)
    assert found[:, 1] == pytest.approx([0.0, np.log1p(3.0 / 2.0)])  # mean of matches: 2
    flat = hit_signals(np.full(3, 0.4, np.float32), None, np.array([0.4], np.float32), None)
    assert flat.tolist() == [[0.0, 0.0]]  # no spread, no keyword ranking: nothing stands out
    assert hit_signals(cosine, bm25, cosine[:0], bm25[:0]).shape == (0, 2)


def test_a_tuned_gate_in_the_data_directory_comes_first_and_reset_removes_it(
    tmp_path: Path,
) -> None:
    gate = GateFile(tmp_path)
    assert gate.current() == shipped_gate()
    tuned = Gate(intercept=-1.0, weights=(0.5, 0.25), source="tuned", fitted_on="a test")
    gate.write(tuned)
    assert oct((tmp_path / GATE_FILE).stat().st_mode & 0o777) == "0o600"
    assert gate.current() == tuned
    again = Gate(intercept=-2.0, weights=(0.5, 0.25), source="tuned")
    gate.write(again)
    stamp = (tmp_path / GATE_FILE).stat().st_mtime_ns + 1_000_000
    os.utime(tmp_path / GATE_FILE, ns=(stamp, stamp))  # another process wrote it
    assert gate.current() == again  # read again when the file changes
    assert gate.reset() and not gate.reset()
    assert gate.current() == shipped_gate()


@pytest.mark.parametrize(
    "text",
    ["not json", "[]", '{"intercept": 1}', '{"intercept": 1, "weights": {"cosine": 2}}'],
)
def test_a_damaged_tuned_gate_says_how_to_go_back(tmp_path: Path, text: str) -> None:
    (tmp_path / GATE_FILE).write_text(text)
    with pytest.raises(ConfigError, match="tune gate --reset"):
        GateFile(tmp_path).current()


def test_only_the_most_probable_hit_reaching_the_threshold_goes_out_unasked() -> None:
    base = {
        "title": "t",
        "description": "d",
        "content": "c",
        "polarity": "success",
        "category": "other",
        "domain": None,
        "project": None,
        "score": 0.5,
        "similarity": 0.5,
    }
    hits = [
        RecallHit.model_validate({**base, "id": str(n), "p": p})
        for n, p in enumerate([0.9, 0.2, 0.5])
    ]
    hits.append(RecallHit.model_validate({**base, "id": "3"}))  # no p (the session-start kind)
    assert [h.id for h in unasked(hits, 0.5)] == ["0"]  # one note a plan: the most probable
    assert unasked(hits, 1.0) == [] and [h.id for h in unasked(hits, 0.0)] == ["0"]
    assert [h.id for h in unasked(hits[1:], 0.5)] == ["2"]  # not the first, when it fails
    assert unasked_positions([0.5, 0.7, 0.7], 0.45) == [1]  # a tie: the better ranked
    assert unasked_positions([0.3, 0.6, 0.55], 0.5) == [1]


def test_the_cosine_floor_of_0_3_is_ignored_with_a_warning_naming_its_successor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("MTL_MCP_PLAN_RECALL_FLOOR", "0.3")
    (tmp_path / "config.toml").write_text("plan_recall_floor = 0.3\n")
    with caplog.at_level(logging.WARNING):
        settings = load_settings(tmp_path)
    assert settings.auto_recall_min_p == AUTO_RECALL_MIN_P
    warned = caplog.text
    assert (
        "MTL_MCP_PLAN_RECALL_FLOOR is ignored" in warned and "MTL_MCP_AUTO_RECALL_MIN_P" in warned
    )
    assert f"plan_recall_floor in {tmp_path / 'config.toml'} is ignored" in warned
    monkeypatch.setenv("MTL_MCP_AUTO_RECALL_MIN_P", "1.5")
    with pytest.raises(ConfigError, match="a probability between 0 and 1"):
        load_settings(tmp_path)


def test_the_shipped_gate_file_is_the_fit_bench_writes() -> None:
    data = json.loads((Path(__file__).parents[2] / "mtl_mcp" / "data" / GATE_FILE).read_text())
    assert Gate.from_json(data, "shipped") == shipped_gate()
    assert shipped_gate().source == "shipped" and "dev split" in shipped_gate().fitted_on
