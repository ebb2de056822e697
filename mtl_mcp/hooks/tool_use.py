"""`mtl-mcp hook tool-use`: after a tool call, recall for the plan the model stated.

The paper's method is plan -> top-3 insights -> act. A model that states its plan and starts
working without calling `recall_insights` would never get the lessons; this hook gives
them to it. It runs after every tool call (Claude Code's PostToolUse and PostToolUseFailure,
Codex's PostToolUse, Cursor's postToolUse), so it is lean: no heavy import, and one small
state file per session decides in a few milliseconds that there is nothing to do.

Per task (a user prompt; a prompt of a few words continues the one before):
- once a plan is known (`hooks.plans`), recall once through the warm service, keep those
  of the top 3 whose relevance gate probability reaches `auto_recall_min_p`, never a note
  the session was already given (by any trigger), and hand the framed notes to the model
  as hook context;
- not when the model called `recall_insights` itself for this task, nor for a task whose
  first tool calls state no plan;
- after REPLAN_AFTER failed tool calls the model usually re-plans: what it says next may
  trigger one more recall (at most MAX_REPLANS a task).

It never blocks the assistant: past `hook_budget_seconds` it returns nothing and logs
why; with no service running it starts one in the background. Either way the plan is kept
(`SessionState.waiting`) and its notes go out once, at the next tool call of the same task
(the service keeps a recall it finished after the hook gave up, so that call gets it at
once). The session-start hook starts the service, so a session's first tool call seldom
finds it cold.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mtl_mcp.config import Settings
from mtl_mcp.hooks.fast import STATE_FOLDER, copilot_events, served_already, state_name
from mtl_mcp.hooks.plans import (
    PLAN_MAX_CHARS,
    TaskText,
    is_plan,
    is_trivial_prompt,
    plan_from_tool,
    signature,
    task_text,
)
from mtl_mcp.operations.service import is_running, request, start_in_background
from mtl_mcp.untrusted import json_loads

logger = logging.getLogger(__name__)

REPLAN_AFTER = 3  # failed tool calls since the last recall
MAX_REPLANS = 2
PLAN_CALLS = 8  # a task whose first tool calls state no plan gets no recall
CATCH_UP_SECONDS = 0.3  # waited at most for a transcript to show the tool call
STATE_DAYS = 7  # session state files older than this are removed
RECALL_TOOL = "recall_insights"
FAILURE_EVENTS = ("PostToolUseFailure", "postToolUseFailure")


@dataclass(frozen=True)
class ToolCall:
    """One hook payload, whatever client sent it."""

    client: str
    event: str
    session: str
    task: str | None  # the client's id of the current prompt, when it gives one
    tool: str
    arguments: Any
    response: Any
    call_key: str | None  # how the transcript names this call (its id, or its signature)
    transcript: str | None
    cwd: str | None
    failed: bool = False
    said: str | None = None  # the assistant's text before the call, when the client hands it
    # Claude Code and Codex write the call to the transcript before the hook runs (or just
    # after): a transcript without it is an older turn's. Gemini and Copilot may not yet.
    transcript_first: bool = True
    # Whether to wait a moment for the transcript to show the call: Copilot writes its
    # record a little after the hook starts; Gemini writes the call with its result, later.
    catch_up: bool = True


def parse_call(payload: Any) -> ToolCall | None:
    """The tool call in a client's hook payload; None for a payload of an unknown shape (Claude
    Code's hook entries are also run by other clients, with payloads of their own)."""
    if not isinstance(payload, dict):
        return None
    if "sessionId" in payload and "toolName" in payload and "hookEventName" not in payload:
        return _copilot_call(payload)
    event = payload.get("hook_event_name")
    session = payload.get("session_id") or payload.get("conversation_id")
    tool = payload.get("tool_name")
    if not isinstance(session, str) or not isinstance(tool, str) or not session:
        return None
    arguments = payload.get("tool_input")
    if event in ("PostToolUse", "PostToolUseFailure"):
        client = "codex" if "turn_id" in payload else "claude-code"
        task = payload.get("prompt_id") or payload.get("turn_id")
    elif event in ("postToolUse", "postToolUseFailure") and "cursor_version" in payload:
        client, task = "cursor", None  # its generation ids change within a task
    elif event == "AfterTool":
        response = payload.get("tool_response")
        failed = isinstance(response, dict) and bool(response.get("error"))
        return ToolCall(
            "gemini-cli", event, session, None, tool, arguments, response,
            call_key=signature(tool, arguments), transcript=_text(payload.get("transcript_path")),
            cwd=_text(payload.get("cwd")), failed=failed, transcript_first=False,
            catch_up=False,
        )  # fmt: skip
    elif event == "tool.execute.after" and payload.get("client") == "opencode":
        said = payload.get("assistant_text")
        return ToolCall(
            "opencode", event, session, _text(payload.get("turn_id")), tool, arguments, None,
            call_key=None, transcript=None, cwd=_text(payload.get("cwd")),
            said=said if isinstance(said, str) else "", transcript_first=False,
        )  # fmt: skip
    else:
        return None
    return ToolCall(
        client=client,
        event=event,
        session=session,
        task=task if isinstance(task, str) else None,
        tool=tool,
        arguments=arguments,
        response=payload.get("tool_response", payload.get("tool_output")),
        call_key=_text(payload.get("tool_use_id")),
        transcript=_text(payload.get("transcript_path")),
        cwd=_text(payload.get("cwd")),
        failed=event in FAILURE_EVENTS,
    )


def _copilot_call(payload: dict[str, Any]) -> ToolCall | None:
    """Copilot CLI's postToolUse (camelCase, no event name, no transcript path: its session's
    events.jsonl is at a known place)."""
    session, tool = payload.get("sessionId"), payload.get("toolName")
    if not isinstance(session, str) or not session or not isinstance(tool, str):
        return None
    result = payload.get("toolResult")
    if not isinstance(result, dict):
        return None  # preToolUse, or a shape of another version
    arguments = payload.get("toolArgs")
    return ToolCall(
        "copilot-cli", "postToolUse", session, None, tool, arguments, result,
        call_key=signature(tool, arguments), transcript=copilot_events(session),
        cwd=_text(payload.get("cwd")), failed=result.get("resultType") not in (None, "success"),
        transcript_first=False,
    )  # fmt: skip


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


@dataclass
class SessionState:
    """What the hook remembers of one session between tool calls."""

    task: str | None = None
    done: bool = False  # recalled, or given up, for this task
    calls: int = 0  # tool calls seen in this task
    failures: int = 0  # failed tool calls since the last recall
    replans: int = 0
    shown: list[str] = field(default_factory=list)  # ids the hooks put before the model
    waiting: str | None = None  # a plan whose recall found no service in time: tried again
    read_to: int | None = None  # the transcript's size when done (clients naming no task)
    updated: float = 0.0


def state_dir(settings: Settings) -> Path:
    return settings.home / STATE_FOLDER


def _state_path(settings: Settings, session: str) -> Path:
    return state_dir(settings) / state_name(session)


@contextlib.contextmanager
def session_state(settings: Settings, session: str, wait: float) -> Iterator[SessionState | None]:
    """The session's state, locked against the hooks of parallel tool calls and saved at
    the end of the block; None if another hook holds it for longer than `wait`."""
    path = _state_path(settings, session)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    yield None
                    return
                time.sleep(0.005)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            known = SessionState.__annotations__
            state = SessionState(**{k: v for k, v in data.items() if k in known})
        except (OSError, ValueError, TypeError):
            state = SessionState()
        yield state
        state.updated = time.time()
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(json.dumps(asdict(state)), encoding="utf-8")
        os.replace(temporary, path)
    finally:
        os.close(fd)


def tool_use(raw: str, settings: Settings) -> str:
    """What to print for one tool call: the client's JSON with the recalled notes as
    context, or nothing."""
    started = time.monotonic()
    if not settings.plan_recall:
        return ""
    try:
        call = parse_call(json_loads(raw))
    except ValueError:
        return ""
    if call is None:
        return ""
    with session_state(settings, call.session, settings.hook_budget_seconds) as state:
        if state is None:
            logger.info("tool-use: another hook of the session held it past the budget")
            return ""
        notes = _decide(call, state, settings, started)
        if state.done and call.task is None and call.transcript:
            state.read_to = _size(call.transcript)  # `hooks.fast` reads on from here
    return _output(call, notes) if notes else ""


def _decide(call: ToolCall, state: SessionState, settings: Settings, started: float) -> str:
    """Update the session's state for this tool call; the notes to show, if any."""
    if call.task is not None and call.task != state.task:
        _new_task(state, call.task)
    if call.failed:
        state.failures += 1
        if state.done and state.failures >= REPLAN_AFTER and state.replans < MAX_REPLANS:
            state.done, state.failures = False, 0
            state.replans += 1
        if state.done or state.waiting is None:
            return ""
        return _deliver(call, state, state.waiting, settings, started)  # a plan waits: now
    if state.done:
        return ""  # the common case: nothing to do until the next task
    if call.tool.endswith(RECALL_TOOL):  # mcp__mtl-mcp__, mcp_mtl-mcp_, mtl-mcp-, mtl-mcp_
        state.done = True  # the model asked for itself
        return ""
    if _loads_recall_tool(call):
        return ""  # it is about to ask for itself
    planned = plan_from_tool(call.tool, call.arguments, call.response)
    if planned is None and call.said is not None:
        planned = call.said  # opencode's plugin saw the text itself
    task = _caught_up(call, settings, started) if planned is None else None
    if task is not None and call.transcript_first and call.call_key and not task.seen:
        logger.info("tool-use: the transcript does not show this tool call yet")
        return ""  # its tail is an older turn's: wait for a later call of this task
    if task is not None and call.task is None and task.prompt_key != state.task:
        _new_task(state, task.prompt_key)  # a client without prompt ids
    if task is not None and is_trivial_prompt(task.prompt) and state.calls == 0:
        state.done = True  # "go on": the task before continues
        return ""
    state.calls += 1
    plan = planned if planned is not None else (task.said if task else "")
    if not is_plan(plan):
        plan = state.waiting or ""
    if not is_plan(plan):
        if state.calls >= PLAN_CALLS:
            state.done = True
        return ""
    return _deliver(call, state, plan, settings, started)


def _deliver(
    call: ToolCall, state: SessionState, plan: str, settings: Settings, started: float
) -> str:
    """The notes for `plan`, and the state that says so; "" with the plan kept waiting
    when the service does not answer in time (the next tool call of the task tries again)."""
    answer = _recall(call, plan[-PLAN_MAX_CHARS:], state.shown, settings, started)
    if answer is None:  # no service yet, or past the budget: the next call tries again
        if plan != state.waiting:
            from mtl_mcp.text.redact import redact  # only here: the common path stays lean

            state.waiting = redact(plan)  # kept on disk for days, as the ledger keeps plans
        return ""
    notes, ids = answer
    state.done, state.failures, state.waiting = True, 0, None
    state.shown += [i for i in ids if i not in state.shown]
    return notes


def _size(path: str) -> int | None:
    try:
        return os.path.getsize(path)
    except OSError:
        return None


def _caught_up(call: ToolCall, settings: Settings, started: float) -> TaskText:
    """The task as the transcript shows it, read again for a moment while it does not show
    this tool call yet (interactive Claude Code, and Copilot CLI, sometimes write it after
    the hook starts)."""
    deadline = started + min(CATCH_UP_SECONDS, settings.hook_budget_seconds / 2)
    while True:
        task = task_text(call.transcript, call.call_key)
        done = task.seen or not call.catch_up or not call.call_key
        if done or not call.transcript or time.monotonic() > deadline:
            return task
        time.sleep(0.02)


def _new_task(state: SessionState, task: str | None) -> None:
    state.task, state.done, state.calls, state.failures, state.replans = task, False, 0, 0, 0
    state.waiting = None


def _loads_recall_tool(call: ToolCall) -> bool:
    """Claude Code's ToolSearch loading our recall tool: the model's own call comes next."""
    query = call.arguments.get("query") if isinstance(call.arguments, dict) else None
    return call.tool == "ToolSearch" and isinstance(query, str) and RECALL_TOOL in query


def _recall(
    call: ToolCall, plan: str, shown: list[str], settings: Settings, started: float
) -> tuple[str, list[str]] | None:
    """The framed notes for `plan` from the service, and their ids ("" and none when no
    note passes the relevance gate); None when there is no answer within the budget. The service
    records the recall in the ledger only if it answers in time for the hook to use it."""
    left = settings.hook_budget_seconds - (time.monotonic() - started)
    if left <= 0.05:
        logger.info("tool-use: no time left in the budget for a recall")
        return None
    origin = {"session_id": call.session, "client": call.client, "trigger": "hook"}
    params = {
        "plan": plan,
        "origin": origin,
        "min_p": settings.auto_recall_min_p,
        "project": _project(call),
        "exclude_ids": shown,
        "deadline": time.time() + left - 0.05,
    }
    reply = request(settings, "call", timeout=left, method="session_recall", params=params)
    if reply is None:
        if is_running(settings):
            logger.info("tool-use: the service did not answer within %.2f s", left)
        else:
            start_in_background(settings)
            logger.info("tool-use: no service ran; one is starting for the next tool call")
        return None
    if reply.get("retiring"):  # an older service steps aside: a new one for the next call
        start_in_background(settings)
        logger.info("tool-use: the service is being replaced; the plan waits for the next call")
        return None
    if not reply.get("ok"):
        found = reply.get("error")
        error: dict[str, Any] = found if isinstance(found, dict) else {}
        if _passes(error.get("type")):
            logger.info("tool-use: the store is busy; the plan waits for the next tool call")
            return None
        logger.warning("tool-use: recall failed: %s", error.get("message"))
        return "", []  # an error that will not go away by itself: this task gets no recall
    result = reply["result"]
    if result.get("late"):
        logger.info("tool-use: the service answered after the budget of %.2f s", left)
        return None
    ids = [str(i) for i in result["ids"]]
    logger.info("tool-use: %d notes for session %s", len(ids), call.session)
    return (str(result["notes"]) if ids else ""), ids


def _passes(kind: Any) -> bool:
    """Whether an error the service answered with goes away by itself (a busy store)."""
    from mtl_mcp import errors

    found = getattr(errors, str(kind), None)
    return isinstance(found, type) and issubclass(found, errors.Retryable)


def _project(call: ToolCall) -> str | None:
    from mtl_mcp.project import window_project

    found = window_project(None, os.environ.get("CLAUDE_PROJECT_DIR"), None, call.cwd)
    return found.id if found else None


def _output(call: ToolCall, notes: str) -> str:
    """The hook's answer in the calling client's shape."""
    from mtl_mcp.text.frames import neutral  # only with notes: the common path stays lean

    notes = neutral(notes)  # the service renders them so; an older service may not
    if call.client == "cursor":
        return json.dumps({"additional_context": notes})
    if call.client in ("copilot-cli", "opencode"):
        return json.dumps({"additionalContext": notes})
    context = {"hookEventName": call.event, "additionalContext": notes}
    return json.dumps({"hookSpecificOutput": context})


def prune_states(settings: Settings) -> None:
    """Remove the state of sessions idle for STATE_DAYS (the session-start hook calls this)."""
    cutoff = time.time() - STATE_DAYS * 86400
    with contextlib.suppress(OSError):
        for path in state_dir(settings).iterdir():
            with contextlib.suppress(OSError):
                if path.stat().st_mtime < cutoff:
                    path.unlink()


def run(home: str | None, raw: str) -> int:
    """`mtl-mcp hook tool-use` without the CLI's imports, once `hooks.fast` found work:
    the client's JSON in `raw`, the answer on stdout, everything else in
    `<home>/logs/hooks.log`, and exit 0 whatever happens (a memory bug must never break the
    user's session)."""
    import sys

    from mtl_mcp.config import load_settings, private_umask
    from mtl_mcp.errors import MtlError
    from mtl_mcp.hooks.io import log_to_file

    try:
        private_umask()
        settings = load_settings(Path(home) if home else None)
        if served_already(str(settings.home), raw):
            return 0
        log_to_file(settings)
    except (MtlError, OSError) as exc:
        sys.stderr.write(f"mtl-mcp hook: {exc}\n")
        return 0
    try:
        answer = tool_use(raw, settings)
    except Exception:  # a front door: nothing may escape into the user's session
        logger.exception("hook tool-use failed")
        return 0
    if answer:
        sys.stdout.write(answer + "\n")
    return 0
