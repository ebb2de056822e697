"""The first few milliseconds of every tool-use hook: read the client's JSON, and see whether
this session's task was served already. The standard library only, and as little of it as
will do: this runs after every tool call, and almost always ends here.
"""

from __future__ import annotations

import json
import os
import select
import sys

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
        json.loads(data)
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
        payload = json.loads(raw)
    except ValueError:
        return False
    if not isinstance(payload, dict) or payload.get("hook_event_name") != "PostToolUse":
        return False
    session, task = payload.get("session_id"), payload.get("prompt_id") or payload.get("turn_id")
    if not isinstance(session, str) or not isinstance(task, str) or not session or not task:
        return False
    try:
        with open(os.path.join(home, STATE_FOLDER, state_name(session)), encoding="utf-8") as f:
            state = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(state, dict) and state.get("task") == task and state.get("done") is True


def named_home(home: str | None) -> str | None:
    """The data directory as `load_settings` resolves it, when the command line or the
    environment names it (`install` names any but the default); None for the default."""
    named = home or os.environ.get("MTL_MCP_HOME")
    return os.path.realpath(os.path.expanduser(named)) if named else None
