"""The normalized shape every reader produces, and the bounds that keep it small.

Readers never hold a whole transcript: each event's text is clipped as it is made, and
only the first quarter and the most recent three quarters of `max_events` are kept.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Literal

from pydantic import BaseModel, Field

from mtl_mcp.errors import InputError


def valid_unicode(text: str) -> str:
    """`text` with lone surrogates (JSON can escape them) replaced: they cannot be encoded,
    so one would fail the request that sends the digest, again at every retry."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", errors="replace").decode("utf-8")
    return text


Format = Literal["auto", "claude-code", "codex", "gemini-cli", "copilot-cli", "trajectory", "text"]
Role = Literal["user", "assistant", "tool", "system"]
Kind = Literal["text", "tool_call", "tool_result", "summary"]

EVENT_TEXT_MAX = 2000
NOTES_MAX = 20

# Lines worth keeping when a long tool result is clipped (no leading \b: "KeyError:" counts).
ERROR_LINE = re.compile(
    r"(?im)^[^\n]*(?:errors?\b|exception\b|\bfailed\b|\bfailure\b|\btraceback\b|\bpanic"
    r"|\bfatal\b|\bexit (?:code|status):? *[1-9]|\bassert)[^\n]*$"
)
_OMITTED = "\n[... {} chars omitted ...]\n"
_OMITTED_ROOM = 40


class Event(BaseModel):
    """One step of a session: a message, a tool call or a tool's result."""

    role: Role
    kind: Kind
    text: str = Field(description="The step's text, already clipped to a per-event cap.")
    tool: str | None = Field(default=None, description="Tool or function name, if any.")
    is_error: bool = False


class Transcript(BaseModel):
    """A session as a bounded list of events, plus what was learned about reading it."""

    format: str
    events: list[Event]
    session_id: str | None = None
    cwd: str | None = None
    model: str | None = None
    skipped: int = Field(default=0, description="Malformed or unreadable lines/records.")
    total_lines: int = Field(default=0, description="Non-blank lines (or records) read.")
    omitted: int = Field(default=0, description="Events dropped from the middle to bound memory.")
    notes: list[str] = Field(default_factory=list, description="Why parts were not read.")


_SPACE = re.compile(r"\s")


def _soft_start(text: str, start: int) -> int:
    """Move a cut forward past whitespace, so no token (a key, a hash) is kept half."""
    space = _SPACE.search(text, start, min(len(text), start + 80))
    return space.end() if space else start


def _soft_end(text: str, end: int) -> int:
    """Move a cut back to whitespace, for the same reason."""
    floor = max(0, end - 80)
    cut = max(text.rfind(" ", floor, end), text.rfind("\n", floor, end))
    return cut if cut > floor else end


def _join(text: str, spans: list[tuple[int, int]]) -> str:
    """The kept spans of `text`, with a marker saying how much each gap left out."""
    parts: list[str] = []
    position = 0
    for raw_start, raw_end in spans:
        start = max(position, _soft_start(text, raw_start) if raw_start > 0 else 0)
        end = _soft_end(text, raw_end) if raw_end < len(text) else raw_end
        if start > position:
            parts.append(_OMITTED.format(start - position))
        if end > start:
            parts.append(text[start:end])
            position = end
    if position < len(text):
        parts.append(_OMITTED.format(len(text) - position))
    return "".join(parts)


def clip(text: str, limit: int = EVENT_TEXT_MAX, *, focus_errors: bool = False) -> str:
    """Shorten `text` to about `limit` chars, keeping its head and tail.

    With `focus_errors` the first error line between them is kept too: a test run's
    failure is rarely in its first lines, and its summary is in the last ones.
    """
    if len(text) <= limit:
        return text
    room = max(limit - 2 * _OMITTED_ROOM, 40)
    n = len(text)
    spans = [(0, room * 3 // 5), (n - room * 2 // 5, n)]
    if focus_errors:
        head, tail = room // 5, room * 3 // 10
        match = ERROR_LINE.search(text, head, n - tail)
        if match is not None:
            start = max(head, match.start() - room // 10)
            middle = (start, min(start + room - head - tail, n - tail))
            spans = [(0, head), middle, (n - tail, n)]
    return _join(text, spans)


class EventBuffer:
    """Keeps the first quarter of `max_events` and a rolling window of the latest events."""

    def __init__(self, max_events: int) -> None:
        if max_events < 1:
            raise InputError(f"max_events must be at least 1, got {max_events}")
        self._head_cap = max_events // 4
        self._head: list[Event] = []
        self._tail: deque[Event] = deque(maxlen=max_events - self._head_cap)
        self.omitted = 0

    def add(self, event: Event) -> None:
        if len(self._head) < self._head_cap:
            self._head.append(event)
            return
        if len(self._tail) == self._tail.maxlen:
            self.omitted += 1
        self._tail.append(event)

    def events(self) -> list[Event]:
        return [*self._head, *self._tail]


class Collector:
    """What a reader accumulates: bounded events, metadata and counts of what it skipped."""

    def __init__(self, max_events: int) -> None:
        self.buffer = EventBuffer(max_events)
        self.session_id: str | None = None
        self.cwd: str | None = None
        self.model: str | None = None
        self.skipped = 0
        self.total_lines = 0
        self.notes: list[str] = []

    def emit(
        self,
        role: Role,
        kind: Kind,
        text: str,
        *,
        tool: str | None = None,
        is_error: bool = False,
    ) -> None:
        """Add an event; empty messages are dropped, empty tool results are kept."""
        text = valid_unicode(text).strip()
        tool = valid_unicode(tool) if tool is not None else None
        if not text and kind in ("text", "summary"):
            return
        clipped = clip(text, focus_errors=kind == "tool_result")
        self.buffer.add(Event(role=role, kind=kind, text=clipped, tool=tool, is_error=is_error))

    def note(self, message: str) -> None:
        if len(self.notes) < NOTES_MAX and message not in self.notes:
            self.notes.append(message)

    def meta(self, *, session_id: object = None, cwd: object = None, model: object = None) -> None:
        """Record metadata the first time a reader sees a usable (string) value."""
        if self.session_id is None and isinstance(session_id, str) and session_id:
            self.session_id = valid_unicode(session_id)
        if self.cwd is None and isinstance(cwd, str) and cwd:
            self.cwd = valid_unicode(cwd)
        if self.model is None and isinstance(model, str) and model and model != "<synthetic>":
            self.model = valid_unicode(model)

    def transcript(self, fmt: str) -> Transcript:
        if self.buffer.omitted:
            self.note(f"{self.buffer.omitted} events from the middle were omitted")
        return Transcript(
            format=fmt,
            events=self.buffer.events(),
            session_id=self.session_id,
            cwd=self.cwd,
            model=self.model,
            skipped=self.skipped,
            total_lines=self.total_lines,
            omitted=self.buffer.omitted,
            notes=self.notes,
        )
