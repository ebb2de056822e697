"""The first few milliseconds of every tool-use hook: read the client's JSON, and see whether
this session's task was served already. The standard library only, and as little of it as
will do: this runs after every tool call, and almost always ends here.
"""

from __future__ import annotations

import os
import select
import sys

from mtl_mcp.untrusted import json_loads, open_regular

STDIN_TIMEOUT = 1.0  # some clients never close stdin for session hooks
STDIN_LIMIT = 1 << 20
STATE_FOLDER = "hooks"
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


def read_stdin(timeout: float = STDIN_TIMEOUT) -> str:
    """The hook input: stdin up to its end, a complete JSON object, `timeout` seconds of
    silence or 1 MB, whichever comes first (a client may leave stdin open)."""
    if sys.stdin is None or sys.stdin.closed:
        return ""
    chunks: list[bytes] = []
    fd = sys.stdin.fileno()
    size = 0
    while size < STDIN_LIMIT:
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            break
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if chunk.rstrip().endswith(b"}") and _is_json(b"".join(chunks)):
            break
    return b"".join(chunks).decode("utf-8", errors="replace")


def _is_json(data: bytes) -> bool:
    try:
        json_loads(data)
    except ValueError:
        return False
    return True


def state_name(session: str) -> str:
    """The file name of a session's state: the id itself when it is plain (Claude Code's and
    Codex's are UUIDs), else a hash of it."""
    if 0 < len(session) <= 80 and set(session) <= _PLAIN and not session.startswith("."):
        return f"{session}.json"
    import hashlib

    return f"{hashlib.sha256(session.encode()).hexdigest()[:32]}.json"


def served_already(home: str, raw: str) -> bool:
    """Whether this successful tool call belongs to a task the hook is done with (the common
    case after the first tool calls of a task): then there is nothing to do at all. Any
    doubt (another shape, a failure, no task id, no state yet) says False."""
    try:
        payload = json_loads(raw)
    except ValueError:
        return False
    if not isinstance(payload, dict):
        return False
    untracked = _untracked_task(payload)
    if untracked is not None:
        state = _state(home, untracked[0])
        read_to = state.get("read_to") if state else None
        if not (state and state.get("done") is True and isinstance(read_to, int)):
            return False
        return not _prompt_since(untracked[1], read_to)
    # Claude Code's and Codex's, and the opencode plugin's: the payloads with a task id
    if payload.get("hook_event_name") not in ("PostToolUse", "tool.execute.after"):
        return False
    session, task = payload.get("session_id"), payload.get("prompt_id") or payload.get("turn_id")
    if not isinstance(session, str) or not isinstance(task, str) or not session or not task:
        return False
    found = _state(home, session)
    return found is not None and found.get("task") == task and found.get("done") is True


def _state(home: str, session: str) -> dict[str, object] | None:
    try:
        with open_regular(os.path.join(home, STATE_FOLDER, state_name(session))) as f:
            state = json_loads(f.read(STDIN_LIMIT))
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def copilot_events(session: str) -> str:
    """Copilot CLI's record of a session (`$COPILOT_HOME/session-state/<id>/events.jsonl`)."""
    home = os.environ.get("COPILOT_HOME") or os.path.join(os.path.expanduser("~"), ".copilot")
    return os.path.join(home, "session-state", os.path.basename(session), "events.jsonl")


def _untracked_task(payload: dict[str, object]) -> tuple[str, str] | None:
    """(session, transcript) of a successful tool call from a client that names no task
    (Gemini CLI, Copilot CLI): its task is over only while no prompt follows in the
    transcript the point where the hook was done with it."""
    if payload.get("hook_event_name") == "AfterTool":
        session, transcript = payload.get("session_id"), payload.get("transcript_path")
        response = payload.get("tool_response")
        failed = isinstance(response, dict) and bool(response.get("error"))
    elif "sessionId" in payload and "hookEventName" not in payload:
        session, result = payload.get("sessionId"), payload.get("toolResult")
        if not isinstance(session, str) or not isinstance(result, dict):
            return None
        transcript = copilot_events(session)
        failed = result.get("resultType") not in (None, "success")
    else:
        return None
    if failed or not isinstance(session, str) or not isinstance(transcript, str) or not session:
        return None
    return session, transcript


def _prompt_since(transcript: str, offset: int) -> bool:
    """Whether the transcript holds a user prompt after `offset` (in doubt: True)."""
    try:
        with open_regular(transcript) as handle:  # a FIFO would block the hook
            if os.fstat(handle.fileno()).st_size < offset:
                return True  # rewritten: no telling
            handle.seek(offset)
            data = handle.read(STDIN_LIMIT + 1)
    except OSError:
        return True
    if len(data) > STDIN_LIMIT:
        return True
    for line in data.splitlines():
        try:
            entry = json_loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict):
            continue
        if entry.get("type") == "user.message":  # Copilot CLI
            return True
        parts = entry.get("content") if entry.get("type") == "user" else None  # Gemini CLI
        if isinstance(parts, list) and any(isinstance(p, dict) and "text" in p for p in parts):
            return True
    return False


def named_home(home: str | None) -> str | None:
    """The data directory as `load_settings` resolves it, when the command line or the
    environment names it (`install` names any but the default); None for the default."""
    named = home or os.environ.get("MTL_MCP_HOME")
    return os.path.realpath(os.path.expanduser(named)) if named else None
