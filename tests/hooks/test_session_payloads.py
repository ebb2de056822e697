"""The session hooks read each client's payload: who sent it, and how its transcript reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mtl_mcp.config import Settings
from mtl_mcp.hooks import session
from mtl_mcp.hooks.session import parse_input, session_end
from mtl_mcp.learning.spool import Spool

ROLLOUT = Path(__file__).parents[1] / "fixtures" / "transcripts" / "codex-rollout.jsonl"
CODEX_ROLLOUT = "/u/.codex/sessions/2026/12/01/rollout-2026-12-01T10-58-03-01a23141.jsonl"


@pytest.mark.parametrize(
    ("payload", "client"),
    [
        # Codex 0.171.0's SessionStart and SessionEnd, as its hooks received them
        (
            {
                "session_id": "01a23141",
                "transcript_path": CODEX_ROLLOUT,
                "cwd": "/w",
                "hook_event_name": "SessionStart",
                "model": "gpt-5.5",
                "permission_mode": "bypassPermissions",
                "source": "startup",
            },
            "codex",
        ),
        (
            {
                "session_id": "01a23141",
                "transcript_path": CODEX_ROLLOUT,
                "cwd": "/w",
                "hook_event_name": "SessionEnd",
                "reason": "other",
            },
            "codex",
        ),
        ({"session_id": "01a", "turn_id": "t1", "hook_event_name": "UserPromptSubmit"}, "codex"),
        (
            {
                "session_id": "0b7e",
                "transcript_path": "/u/.claude/projects/-w/0b7e.jsonl",
                "hook_event_name": "SessionEnd",
            },
            "claude-code",
        ),
        ({"conversation_id": "c", "cursor_version": "1.7"}, "cursor"),
    ],
)
def test_the_client_is_told_by_its_payload(payload: dict[str, object], client: str) -> None:
    assert parse_input(json.dumps(payload)).client == client


def test_a_codex_session_end_queues_a_codex_job(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(session, "spawn_detached", lambda *args: None)
    rollout = tmp_path / "rollout-2026-03-02T09-00-00-019a2b3c.jsonl"
    rollout.write_bytes(ROLLOUT.read_bytes())
    payload = {
        "session_id": "019a2b3c",
        "transcript_path": str(rollout),
        "cwd": str(tmp_path),
        "hook_event_name": "SessionEnd",
        "reason": "other",
    }
    assert session_end(json.dumps(payload), settings) == "queued session 019a2b3c"
    [(_, job)] = list(Spool(settings).jobs())
    assert (job.client, job.format, job.cwd) == ("codex", "codex", str(tmp_path))
