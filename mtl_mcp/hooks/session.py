"""The hooks front door: session-end spools a job, session-start injects context.

Hooks never fail the user's session: every error is logged to `<home>/logs/hooks.log` and
the exit code is 0. They import nothing heavy: session-end returns in a fraction of a second
and leaves distillation to a detached worker; session-start prints context precomputed for
the project by a detached refresh (or, in a project's first session, the general context),
so it never waits for LanceDB or the model.

Both do nothing in a session mtl-mcp itself started to distil another (its environment
carries the marker of `learning.backends.child`): queueing it would distil it, and that run
would queue itself again, for ever.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mtl_mcp.config import Settings
from mtl_mcp.errors import InputError, MtlError
from mtl_mcp.files import open_private
from mtl_mcp.hooks.fast import copilot_events
from mtl_mcp.hooks.tool_use import prune_states, session_state
from mtl_mcp.learning.backends.child import is_distill_child
from mtl_mcp.learning.discovery import memories_of_session, unread
from mtl_mcp.learning.spool import Job, Spool
from mtl_mcp.learning.transcripts import Format, missing_conversation
from mtl_mcp.operations.context import Context, cached_context
from mtl_mcp.operations.service import request, start_in_background
from mtl_mcp.project import resolve_project
from mtl_mcp.schemas import validation_problems
from mtl_mcp.text.frames import neutral
from mtl_mcp.untrusted import json_loads

logger = logging.getLogger(__name__)

OUR_OWN_RUN = "ignored: a distillation run started by mtl-mcp"


class HookInput(BaseModel):
    """The JSON a client sends on stdin; unknown fields are ignored. Codex and Gemini CLI send
    Claude Code's fields; Codex's session hooks carry no `turn_id`, but its transcript is a
    rollout file (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`), and Gemini's a chat file
    (`~/.gemini/tmp/<project>/chats/session-*.jsonl`). Copilot CLI sends camelCase fields
    and no event name or transcript path; opencode's plugin names itself (`client`)."""

    model_config = ConfigDict(extra="ignore")

    session_id: str | None = None
    conversation_id: str | None = None  # Cursor's name for the session
    sessionId: str | None = None  # Copilot CLI's (VS Code's too, with `hookEventName`)
    hookEventName: str | None = None
    client_name: str | None = Field(None, alias="client")  # opencode's plugin
    transcript_path: str | None = None
    cwd: str | None = None
    workspace_roots: list[str] | None = None
    reason: str | None = None
    source: str | None = None
    hook_event_name: str | None = None
    cursor_version: str | None = None
    turn_id: str | None = None  # Codex's, in its turn events

    @property
    def client(self) -> str | None:
        """Which client sent this; None for a shape no installed hook sends (VS Code runs
        Claude Code's and Copilot's hook files with payloads of its own)."""
        if self.client_name == "opencode":
            return "opencode"
        if self.hookEventName:
            return None
        if self.sessionId:
            return "copilot-cli"
        if self.cursor_version:
            return "cursor"
        if self.turn_id or _is_rollout(self.transcript_path):
            return "codex"
        if _is_gemini_chat(self.transcript_path):
            return "gemini-cli"
        return "claude-code"

    @property
    def session(self) -> str | None:
        return self.session_id or self.conversation_id or self.sessionId

    @property
    def transcript(self) -> str | None:
        if self.transcript_path:
            return self.transcript_path
        if self.client == "copilot-cli" and self.sessionId:
            return copilot_events(self.sessionId)
        return None

    @property
    def project_dir(self) -> str | None:
        return (
            self.cwd
            or (self.workspace_roots[0] if self.workspace_roots else None)
            or (os.environ.get("CLAUDE_PROJECT_DIR"))
        )


def _is_rollout(path: str | None) -> bool:
    name = Path(path).name if path else ""
    return name.startswith("rollout-") and name.endswith(".jsonl")


def _is_gemini_chat(path: str | None) -> bool:
    if not path:
        return False
    where = Path(path)
    return where.parent.name == "chats" and where.name.startswith("session-")


# The transcript format of each client's sessions (see learning.transcripts).
_FORMATS: dict[str, Format] = {
    "codex": "codex",
    "gemini-cli": "gemini-cli",
    "copilot-cli": "copilot-cli",
    "opencode": "trajectory",
}


def parse_input(raw: str) -> HookInput:
    """The client's hook input; InputError (one line, for the hooks' log) if it is not a
    JSON object of the shape any client sends."""
    try:
        data: Any = json_loads(raw) if raw.strip() else {}
    except ValueError as exc:
        raise InputError(f"the hook input is not JSON ({exc}): ignored") from None
    if not isinstance(data, dict):
        raise InputError("the hook input is not a JSON object: ignored")
    try:
        return HookInput.model_validate(data)
    except ValidationError as exc:
        raise InputError(
            f"the hook input is of no shape a client sends ({validation_problems(exc)[0]}): ignored"
        ) from None


def spawn_detached(settings: Settings, *args: str) -> None:
    """Start `mtl-mcp <args>` fully detached: it outlives the hook and the client session.
    StoreReadOnly (or ConfigError) when the data directory cannot take its log: the child
    could not do its work there either."""
    log = open_private(settings.logs_dir / "worker.log", os.O_WRONLY | os.O_APPEND)
    try:
        subprocess.Popen(
            [sys.executable, "-m", "mtl_mcp", *args, "--home", str(settings.home)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,
            close_fds=True,
            env={**os.environ, "MTL_MCP_HOME": str(settings.home)},
        )
    finally:
        os.close(log)


def session_end(raw: str, settings: Settings) -> str:
    """Spool a session that holds a conversation and start a worker; returns what was done."""
    if is_distill_child():
        return OUR_OWN_RUN
    payload = parse_input(raw)
    session, transcript, client = payload.session, payload.transcript, payload.client
    if client is None:
        return "a hook input of no shape mtl-mcp installs: ignored"
    if not transcript or not session:
        return "no transcript_path or session id in the hook input: nothing to distil"
    # `claude mcp list` ends a "session" whose transcript never exists: no job for that.
    if problem := missing_conversation(Path(transcript)):
        return f"session {session} dropped: its transcript {problem}"
    job = Job(
        session_id=session,
        transcript_path=transcript,
        cwd=payload.project_dir,
        reason=payload.reason,
        client=client,
        format=_FORMATS.get(client, "auto"),
    )
    spool = Spool(settings)
    spool.enqueue(job)
    # What the assistant remembered in the session is learnt as well, once per content.
    found = memories_of_session(client, Path(transcript), payload.project_dir)
    memories = unread(found, spool.done()) if found else []
    for notes in memories:
        spool.enqueue(notes.job())
    spawn_detached(settings, "hook", "worker")
    also = f" and {len(memories)} changed memory files" if memories else ""
    return f"queued session {session}{also}"


def session_start(raw: str, settings: Settings) -> str:
    """The context to inject: this project's, fresh from the running service; else as
    precomputed for it (or the general context), refreshed in the background. Either way
    the ledger records what the session was shown."""
    if is_distill_child():
        logger.info("session-start %s", OUR_OWN_RUN)
        return ""
    payload = parse_input(raw)
    client = payload.client
    if client is None:
        logger.info("session-start: a hook input of no shape mtl-mcp installs: ignored")
        return ""
    prune_states(settings)
    project_dir = str(payload.project_dir or Path.cwd())
    session = payload.session
    origin = {"session_id": session, "client": client, "trigger": "session-start"}
    context = None
    if settings.service:
        params = {
            "project_dir": project_dir,
            "origin": origin if session else None,
            "min_p": settings.auto_recall_min_p,
        }
        fresh = request(settings, "call", timeout=3.0, method="context", params=params)
        if fresh is None:  # none runs: start it now, so the first tool call finds it warm
            start_in_background(settings)
        if fresh and fresh.get("ok"):
            _start_background(settings, [])
            context = Context(str(fresh["result"]["text"]), list(fresh["result"]["ids"]))
    if context is None:
        context = cached_context(settings, resolve_project(project_dir))
        shown = ["--session", session, "--client", client] if session else []
        if session and context.ids:
            shown += ["--shown", ",".join(context.ids)]
        _start_background(settings, ["hook", "refresh", "--project-dir", project_dir, *shown])
    if session and context.ids:
        _remember_shown(settings, session, context.ids)
    return _as_context(client, context.text)


def _as_context(client: str, text: str) -> str:
    """The context as the client takes it: plain text on stdout (Claude Code, Codex), or JSON
    (Gemini CLI and Cursor read nothing else; Copilot CLI and opencode's plugin take it so)."""
    if not text:
        return ""
    text = neutral(text)  # a context file an older version wrote may hold a note's markup
    if client == "gemini-cli":
        context = {"hookEventName": "SessionStart", "additionalContext": text}
        return json.dumps({"hookSpecificOutput": context})
    if client in ("copilot-cli", "opencode"):
        return json.dumps({"additionalContext": text})
    if client == "cursor":  # its sessionStart output, as for postToolUse
        return json.dumps({"additional_context": text})
    return text


def _remember_shown(settings: Settings, session: str, ids: list[str]) -> None:
    """Tell the session's tool-use hook what the context showed: it never shows it again."""
    try:
        with session_state(settings, session, wait=0.5) as state:
            if state is not None:
                state.shown += [i for i in ids if i not in state.shown]
    except OSError as exc:  # a data directory that cannot take it: the ledger still knows
        logger.info("session-start: the session state is not written: %s", exc)


def _start_background(settings: Settings, refresh: list[str]) -> None:
    """Start a worker for sessions not yet distilled, and the context `refresh`, if any.
    They are catching up, so a data directory that cannot take them (read-only, say) is
    logged and the session still gets the context as it is."""
    try:
        if any(Spool(settings).pending.glob("*.json")):
            spawn_detached(settings, "hook", "worker")
        if refresh:
            spawn_detached(settings, *refresh)
    except MtlError as exc:
        logger.warning("session-start: the context is not refreshed: %s", exc)
