"""The compact, redacted summary of a session that is sent to an LLM for distillation.

What the model needs to find a transferable lesson: what was asked, what was done (tool
names and commands; for edits only the kind of file), what failed or passed, and how it
ended. File contents and full paths stay out; secrets are redacted before returning.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PureWindowsPath

from pydantic import BaseModel, Field

from mtl_mcp.errors import InputError
from mtl_mcp.learning.transcripts.events import Transcript
from mtl_mcp.text.redact import redact
from mtl_mcp.text.render import one_line
from mtl_mcp.text.tokens import chars_for_tokens, estimate_tokens

FIRST_REQUEST_MAX = 2000
LATER_REQUEST_MAX = 240
SUMMARY_MAX = 600
OUTCOME_MAX = 800
ACTION_MAX = 160
RESULT_LINE_MAX = 200
RESULT_LINES_PER_EVENT = 3
TRIVIAL_TURNS = 3

_RESULT_LINE = re.compile(
    r"(?i)(?:errors?|exception)\b|\b(?:failed|failures?|passed|panicked|assertion\w*)\b"
    r"|\bexit (?:code|status):? *(?:-|[1-9])"
)
# Lines that match but say nothing: banners and the traceback header (the line after it
# names the exception).
_NOISE_LINE = re.compile(
    r"(?i)^\s*(?:[=_*-]+\s*\w+\s*[=_*-]+|traceback \(most recent call last\):?)\s*$"
)
_PATCH_FILE = re.compile(r"(?m)^\*\*\* (Add|Update|Delete) File: (.+)$")

_EDIT_TOOLS = frozenset(
    {
        "edit", "multiedit", "write", "notebookedit", "str_replace_editor", "apply_patch",
        "str_replace_based_edit_tool", "create_file", "edit_file", "write_file", "replace",
    }
)  # fmt: skip
_CREATE_TOOLS = frozenset({"write", "create_file", "write_file"})
_READ_TOOLS = frozenset({"read", "read_file", "view", "notebookread", "view_file"})
_SHELL_TOOLS = frozenset(
    {
        "bash", "shell", "exec_command", "execute_bash", "local_shell", "run", "terminal",
        "run_shell_command", "execute_command", "run_terminal_cmd", "execute_ipython_cell",
    }
)  # fmt: skip
_SEARCH_TOOLS = frozenset(
    {"grep", "glob", "search", "find", "ls", "list_files", "search_files", "file_search"}
)
_PLAN_TOOLS = frozenset({"todowrite", "update_plan", "todo_write"})
_DELEGATE_TOOLS = frozenset({"task", "agent", "delegate", "spawn_agent"})
_WEB_TOOLS = frozenset({"webfetch", "websearch", "web_search", "browse", "fetch"})


class Digest(BaseModel):
    """A session, shortened to fit a token budget, with secrets redacted."""

    text: str
    estimated_tokens: int = Field(description="A conservative estimate (`text.tokens`).")
    user_turns: int
    tool_calls: int
    errors: int = Field(description="Tool results that reported a failure.")
    trivial: bool = Field(description="Too little happened to learn from: skip distillation.")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _shorten(text: str, limit: int) -> str:
    """Keep the head of `text`, cut at whitespace, with a marker if anything was cut."""
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit - 20)
    cut = cut if cut > limit // 2 else limit - 20
    return text[:cut].rstrip() + " [...]"


def _file_kind(path: str) -> str:
    """'.py' for src/app/main.py, 'Makefile' for a Makefile: what was touched, not where."""
    name = PureWindowsPath(path.strip().strip("'\"")).name  # splits on / and \ alike
    if "." in name.strip("."):
        return "." + name.rsplit(".", 1)[1]
    return name or "file"


def _a_file(path: str) -> str:
    kind = _file_kind(path)
    return "a file" if kind == "file" else f"a {kind} file"


def _edit(tool: str, text: str) -> str:
    patched = _PATCH_FILE.findall(text)
    if patched:
        verbs = {"Add": "created", "Update": "edited", "Delete": "deleted"}
        verb = verbs[patched[0][0]] if len({op for op, _ in patched}) == 1 else "changed"
        if len(patched) == 1:
            return f"{verb} {_a_file(patched[0][1])}"
        kinds = sorted({_file_kind(path) for _, path in patched})
        return f"{verb} {len(patched)} files ({', '.join(kinds)})"
    operation, _, path = text.partition(" ")
    if not path or operation not in ("create", "str_replace", "insert", "view", "write"):
        operation, path = "", text
    if operation == "view":
        return f"viewed {_a_file(path)}"
    created = tool in _CREATE_TOOLS or operation in ("create", "write")
    return f"{'created' if created else 'edited'} {_a_file(path)}"


def _action(tool_name: str | None, text: str) -> str:
    """One line saying what a tool call did."""
    tool = (tool_name or "tool").strip()
    name = tool.lower()
    if name in _EDIT_TOOLS or _PATCH_FILE.search(text):
        return _edit(name, text)
    if name in _READ_TOOLS:
        return f"read {_a_file(text)}"
    if name in _SHELL_TOOLS:
        return f"ran `{one_line(text, ACTION_MAX)}`"
    if name in _SEARCH_TOOLS:
        return f"searched ({tool}) for `{one_line(text, 80)}`"
    if name in _PLAN_TOOLS:
        return "updated the plan"
    if name in _DELEGATE_TOOLS:
        return f"delegated a subtask: {one_line(text, 80)}"
    if name in _WEB_TOOLS:
        return f"used the web ({tool}): {one_line(text, 80)}"
    detail = one_line(text, 80)
    return f"called {tool}" + (f": {detail}" if detail else "")


def _result_lines(text: str, is_error: bool) -> list[str]:
    """The lines of a tool result that say whether something failed or passed."""
    lines = [
        one_line(line, RESULT_LINE_MAX)
        for line in text.splitlines()
        if _RESULT_LINE.search(line) and not _NOISE_LINE.match(line)
    ]
    if len(lines) > RESULT_LINES_PER_EVENT:
        # The first match names the failure; the last ones are the run's summary.
        lines = [lines[0], *lines[1 - RESULT_LINES_PER_EVENT :]]
    if is_error and not lines:
        first = next((line for line in text.splitlines() if line.strip()), "(no output)")
        lines = [one_line(first, RESULT_LINE_MAX)]
    marker = "[error] " if is_error else ""
    return [f"- {marker}{line}" for line in lines]


def _collapse(actions: list[str]) -> list[str]:
    """Number the actions, folding immediate repeats into one line with a count."""
    folded: list[tuple[str, int]] = []
    for action in actions:
        if folded and folded[-1][0] == action:
            folded[-1] = (action, folded[-1][1] + 1)
        else:
            folded.append((action, 1))
    return [
        f"{i}. {action}" + (f" (x{count})" if count > 1 else "")
        for i, (action, count) in enumerate(folded, 1)
    ]


@dataclass
class _Section:
    title: str
    lines: list[str] = field(default_factory=list)

    def render(self) -> str:
        return f"## {self.title}\n" + "\n".join(self.lines) if self.lines else ""


def _fit(lines: list[str], room: int, what: str) -> list[str]:
    """Keep lines from both ends, dropping the middle, so they fit in `room` chars."""
    if sum(len(line) + 1 for line in lines) <= room:
        return lines
    marker = f"- [... {{}} more {what} ...]"
    budget = room - len(marker.format(len(lines))) - 1
    if budget < 0:
        return []
    head: list[str] = []
    tail: list[str] = []
    low, high = 0, len(lines) - 1
    while low <= high:
        take_head = len(head) <= len(tail)
        line = lines[low] if take_head else lines[high]
        if len(line) + 1 > budget:
            break
        budget -= len(line) + 1
        if take_head:
            head.append(line)
            low += 1
        else:
            tail.append(line)
            high -= 1
    dropped = len(lines) - len(head) - len(tail)
    return [*head, marker.format(dropped), *reversed(tail)]


def _render(header: str, sections: list[_Section]) -> str:
    return "\n\n".join([header, *(s.render() for s in sections if s.lines)]) + "\n"


def _fit_budget(header: str, sections: list[_Section], limit: int) -> str:
    """Render within `limit` chars, shrinking the least essential parts first.

    The middle of the action list goes first, down to a quarter of the budget, then the
    middle of the results and of later messages; then those go further, then the
    summary; the first request and the ending are shortened last.
    """
    request, summary, later, actions, outcomes, ending = sections
    lists = ((actions, "actions", 4), (outcomes, "results", 5), (later, "messages", 10))

    def over() -> int:
        return len(_render(header, sections)) - limit

    for floors in (True, False):
        for section, what, share in lists:
            excess = over()
            if excess <= 0:
                break
            size = sum(len(line) + 1 for line in section.lines)
            floor = limit // share if floors else 0
            section.lines = _fit(section.lines, max(floor, size - excess), what)
    if over() > 0:
        summary.lines = []
    for section in (request, ending):
        excess = over()
        if excess > 0 and section.lines:
            section.lines[0] = _shorten(section.lines[0], max(200, len(section.lines[0]) - excess))
    text = _render(header, sections)
    return text if len(text) <= limit else _shorten(text, limit)


def build_digest(t: Transcript, *, token_budget: int = 6000) -> Digest:
    """Summarize `t` for distillation in about `token_budget` tokens, secrets redacted.

    When too long, the middle of the action list goes first, then that of the results,
    then later requests and the summary; the first request and the outcome go last.
    """
    if token_budget < 50:
        raise InputError(f"token_budget must be at least 50, got {token_budget}")
    user_texts = [e for e in t.events if e.role == "user" and e.kind == "text"]
    assistant_texts = [e for e in t.events if e.role == "assistant" and e.kind == "text"]
    calls = [e for e in t.events if e.kind == "tool_call"]
    results = [e for e in t.events if e.kind == "tool_result"]
    summaries = [e for e in t.events if e.kind == "summary"]
    errors = sum(1 for e in results if e.is_error)

    request = _Section("Request")
    if user_texts:
        request.lines = [_shorten(redact(user_texts[0].text), FIRST_REQUEST_MAX)]
    later = _Section(
        "Later user messages",
        [f"- {one_line(redact(e.text), LATER_REQUEST_MAX)}" for e in user_texts[1:]],
    )
    summary = _Section("Summary of earlier context")
    if summaries:
        summary.lines = [_shorten(redact(summaries[-1].text), SUMMARY_MAX)]
    # Each text is redacted whole before it is cut, so no secret survives in part.
    actions = _Section("Actions", _collapse([_action(e.tool, redact(e.text)) for e in calls]))
    outcomes = _Section("Errors and test results")
    for event in results:
        outcomes.lines.extend(_result_lines(redact(event.text), event.is_error))
    ending = _Section("How it ended")
    if assistant_texts:
        ending.lines = [_shorten(redact(assistant_texts[-1].text), OUTCOME_MAX)]
    if t.events and t.events[-1].kind == "tool_result" and t.events[-1].is_error:
        ending.lines.append("(The last step was a failed tool result.)")

    header = (
        f"Session digest ({t.format}): {_count(len(user_texts), 'user message')}, "
        f"{_count(len(calls), 'tool call')}, {_count(errors, 'failed tool result')}."
    )
    if t.omitted:
        header += f" {t.omitted} events from the middle of the session were not read."
    sections = [request, summary, later, actions, outcomes, ending]
    limit = chars_for_tokens(token_budget)
    while True:
        text = redact(_fit_budget(header, sections, limit))
        if len(text) > limit:  # a marker longer than the secret it replaced
            text = _shorten(text, limit)
        tokens = estimate_tokens(text)
        if tokens <= token_budget or limit <= 40:  # 40 ASCII characters: the floor of 50 tokens
            break
        # Characters beyond ASCII count a token each: shrink in proportion and fit again.
        limit = max(40, limit * token_budget // tokens - 1)
    trivial = len(user_texts) + len(assistant_texts) < TRIVIAL_TURNS and not calls
    return Digest(
        text=text,
        estimated_tokens=tokens,
        user_turns=len(user_texts),
        tool_calls=len(calls),
        errors=errors,
        trivial=trivial,
    )
