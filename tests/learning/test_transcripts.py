"""Transcript readers (every format, corrupt and huge inputs) and the distillation digest."""

from __future__ import annotations

import json
import time
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mtl_mcp.errors import InputError, TranscriptError
from mtl_mcp.learning.transcripts import (
    Event,
    Format,
    Transcript,
    build_digest,
    detect_format,
    missing_conversation,
    read_transcript,
)
from mtl_mcp.learning.transcripts.events import EVENT_TEXT_MAX
from mtl_mcp.text.tokens import estimate_tokens

FIXTURES = Path(__file__).parent.parent / "fixtures" / "transcripts"
CLAUDE = FIXTURES / "claude-code-session.jsonl"
CODEX = FIXTURES / "codex-rollout.jsonl"
MINI = FIXTURES / "mini-swe-agent.json"
OPENHANDS = FIXTURES / "openhands.json"
NOTES = FIXTURES / "notes.md"


def _shape(t: Transcript) -> list[tuple[str, str, str | None, bool]]:
    return [(e.role, e.kind, e.tool, e.is_error) for e in t.events]


def _all_text(t: Transcript) -> str:
    return "\n".join(e.text for e in t.events)


def _jsonl(path: Path, lines: list[object]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


# --- Claude Code --------------------------------------------------------------------


def test_claude_code_session_reads_as_ordered_visible_steps() -> None:
    """User text, assistant text and tool calls/results come out in session order."""
    t = read_transcript(CLAUDE)
    assert t.format == "claude-code"
    assert _shape(t) == [
        ("user", "text", None, False),
        ("assistant", "text", None, False),
        ("assistant", "tool_call", "Bash", False),
        ("tool", "tool_result", "Bash", True),
        ("assistant", "text", None, False),
        ("assistant", "tool_call", "Read", False),
        ("tool", "tool_result", "Read", False),
        ("assistant", "tool_call", "Edit", False),
        ("tool", "tool_result", "Edit", False),
        ("assistant", "tool_call", "Bash", False),
        ("tool", "tool_result", "Bash", False),
        ("system", "summary", None, False),
        ("user", "text", None, False),
        ("assistant", "text", None, False),
    ]
    assert t.events[2].text == "pytest tests/test_dates.py -q"


def test_claude_code_split_and_repeated_assistant_lines_yield_each_block_once() -> None:
    """One line per block under one message id, plus a verbatim repeat, make one event each."""
    t = read_transcript(CLAUDE)
    calls = [e.text for e in t.events if e.kind == "tool_call"]
    assert calls.count("pytest tests/test_dates.py -q") == 1
    assert [e.text for e in t.events[:2]][1] == "Let me run the failing test first."


def test_claude_code_thinking_sidechains_and_meta_entries_are_dropped() -> None:
    """Private reasoning, subagent turns and meta entries never become events."""
    text = _all_text(read_transcript(CLAUDE))
    assert "PRIVATE-THINKING" not in text
    assert "SIDECHAIN-SHOULD-NOT-APPEAR" not in text
    assert "/clear" not in text


def test_claude_code_tool_result_list_content_is_flattened_with_its_error_flag() -> None:
    """A tool_result whose content is a list of text blocks reads as one failed result."""
    result = read_transcript(CLAUDE).events[3]
    assert result.is_error
    assert "FAILED tests/test_dates.py::test_midnight" in result.text


def test_claude_code_compact_summary_is_kept_as_a_summary_event() -> None:
    """isCompactSummary entries survive as kind="summary", not as a user request."""
    summaries = [e for e in read_transcript(CLAUDE).events if e.kind == "summary"]
    assert len(summaries) == 1
    assert summaries[0].text.startswith("This session is being continued")


def test_claude_code_bad_lines_are_counted_not_raised_and_metadata_is_read() -> None:
    """A malformed line, a wrong type, an array and a truncated last line are 4 skips."""
    t = read_transcript(CLAUDE)
    assert t.skipped == 4
    assert t.total_lines == 28
    assert t.session_id == "5b1f7c1e-2d4a-4b8e-9c61-0f3e2a7d9b10"
    assert t.cwd == "/home/dev/projects/calendar-app"
    assert t.model == "claude-sonnet-4-5-20250929"


def test_claude_code_entries_of_the_wrong_types_are_skipped(tmp_path: Path) -> None:
    """Non-dict messages, content and blocks are counted as skipped, the rest is kept."""
    path = _jsonl(
        tmp_path / "s.jsonl",
        [
            {"type": "user", "sessionId": "s", "message": 5},
            {"type": "assistant", "message": {"id": "m1", "content": 7}},
            {
                "type": "user",
                "message": {"role": "user", "content": [5, None, {"type": "text", "text": "ok"}]},
            },
            {"type": "user", "message": {"role": "user", "content": "still here"}},
        ],
    )
    t = read_transcript(path)
    assert [e.text for e in t.events] == ["ok", "still here"]
    assert t.skipped == 4


# --- Codex CLI ----------------------------------------------------------------------


def test_codex_rollout_reads_messages_calls_and_outputs() -> None:
    """Function and custom tool calls pair with their outputs; reasoning is dropped."""
    t = read_transcript(CODEX)
    assert t.format == "codex"
    assert _shape(t) == [
        ("system", "text", None, False),
        ("user", "text", None, False),
        ("assistant", "tool_call", "shell", False),
        ("tool", "tool_result", "shell", True),
        ("assistant", "tool_call", "apply_patch", False),
        ("tool", "tool_result", "apply_patch", False),
        ("assistant", "tool_call", "exec_command", False),
        ("tool", "tool_result", "exec_command", False),
        ("assistant", "text", None, False),
    ]
    assert t.events[2].text == "pytest tests/test_invoice.py -q"
    assert "PRIVATE-REASONING" not in _all_text(t)


def test_codex_rollout_metadata_and_bad_records() -> None:
    """session_meta and turn_context give id, cwd and model; junk records are skipped."""
    t = read_transcript(CODEX)
    assert t.session_id == "019a2b3c-4d5e-7f60-8a9b-0c1d2e3f4a5b"
    assert t.cwd == "/home/dev/projects/invoice-service"
    assert t.model == "gpt-5-codex"
    assert t.skipped == 2


def test_codex_rollouts_without_the_envelope_are_read(tmp_path: Path) -> None:
    """Older rollouts wrote bare response items after a metadata line."""
    path = _jsonl(
        tmp_path / "rollout-old.jsonl",
        [
            {"id": "old-session", "timestamp": "2025-05-01T00:00:00Z", "instructions": None},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
            {
                "type": "function_call",
                "name": "shell",
                "arguments": '{"command": ["ls"]}',
                "call_id": "c",
            },
            {"type": "function_call_output", "call_id": "c", "output": "a.txt"},
        ],
    )
    assert detect_format(path) == "codex"
    t = read_transcript(path)
    assert _shape(t) == [
        ("user", "text", None, False),
        ("assistant", "tool_call", "shell", False),
        ("tool", "tool_result", "shell", False),
    ]


# --- trajectories -------------------------------------------------------------------


def test_mini_swe_agent_trajectory_splits_thoughts_from_commands() -> None:
    """Bash blocks become tool calls, <returncode> observations become results."""
    t = read_transcript(MINI)
    assert t.format == "trajectory"
    assert t.model == "anthropic/claude-sonnet-4-5"
    calls = [e.text for e in t.events if e.kind == "tool_call"]
    assert calls[-1] == "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
    assert len(calls) == 4
    assert [e.is_error for e in t.events if e.kind == "tool_result"] == [False, True, False]
    assert t.events[0].text.startswith("Please solve this issue")
    assert "SYSTEM-PROMPT-SHOULD-NOT-APPEAR" not in _all_text(t)


def test_openhands_trajectory_reads_actions_and_observations() -> None:
    """Runs, edits and finish become steps; recall and state changes are ignored."""
    t = read_transcript(OPENHANDS)
    assert _shape(t) == [
        ("user", "text", None, False),
        ("assistant", "text", None, False),
        ("assistant", "tool_call", "execute_bash", False),
        ("tool", "tool_result", "execute_bash", True),
        ("assistant", "tool_call", "str_replace_editor", False),
        ("tool", "tool_result", "str_replace_editor", False),
        ("assistant", "tool_call", "execute_bash", False),
        ("tool", "tool_result", "execute_bash", False),
        ("assistant", "text", None, False),
    ]
    assert t.events[-1].text.startswith("slugify() now strips")
    assert "SYSTEM-PROMPT-SHOULD-NOT-APPEAR" not in _all_text(t)


def test_openhands_history_under_a_key_and_swe_agent_steps_are_read(tmp_path: Path) -> None:
    """{"history": [...]} and SWE-agent's {"trajectory": [{action, observation}]} work."""
    history = tmp_path / "oh.json"
    history.write_text(
        json.dumps(
            {"history": [{"source": "user", "action": "message", "args": {"content": "go"}}]}
        )
    )
    steps = tmp_path / "swe.traj"
    steps.write_text(
        json.dumps({"trajectory": [{"thought": "look", "action": "ls", "observation": "a.py"}]})
    )
    assert [e.text for e in read_transcript(history).events] == ["go"]
    assert _shape(read_transcript(steps)) == [
        ("assistant", "text", None, False),
        ("assistant", "tool_call", "bash", False),
        ("tool", "tool_result", "bash", False),
    ]


def test_trajectories_of_the_wrong_shape_are_skipped(tmp_path: Path) -> None:
    """Non-object entries and documents without a list of steps are counted, not raised."""
    array = tmp_path / "array.json"
    array.write_text('[1, "two", null, {"unknown": true}]')
    scalar = tmp_path / "scalar.json"
    scalar.write_text('{"foo": 1}')
    assert read_transcript(array, "trajectory").skipped == 4
    t = read_transcript(scalar, "trajectory")
    assert (t.events, t.skipped) == ([], 1)
    assert t.notes


def test_a_trajectory_over_the_size_limit_is_skipped_without_loading(tmp_path: Path) -> None:
    """A JSON document over 50 MB is noted and skipped, never json.load-ed."""
    path = tmp_path / "huge.json"
    with path.open("wb") as f:
        f.write(b"[")
        f.truncate(51 * 1024 * 1024)  # sparse: no time or disk spent on the content
    t = read_transcript(path, "trajectory")
    assert (t.events, t.skipped) == ([], 1)
    assert "50 MB" in t.notes[0]


# --- text -------------------------------------------------------------------------------


def test_markdown_notes_become_role_labelled_paragraphs_and_shell_steps() -> None:
    """Speaker labels set roles; `$ cmd` is a tool call and the lines under it its output."""
    t = read_transcript(NOTES)
    assert t.format == "text"
    assert _shape(t) == [
        ("user", "text", None, False),
        ("user", "text", None, False),
        ("assistant", "text", None, False),
        ("assistant", "tool_call", "shell", False),
        ("tool", "tool_result", "shell", True),
        ("assistant", "text", None, False),
        ("user", "text", None, False),
        ("assistant", "text", None, False),
    ]
    assert t.events[1].text.startswith("The upload test times out")


# --- detection and errors -------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (CLAUDE, "claude-code"),
        (CODEX, "codex"),
        (MINI, "trajectory"),
        (OPENHANDS, "trajectory"),
        (NOTES, "text"),
    ],
    ids=lambda v: v.name if isinstance(v, Path) else v,
)
def test_auto_detection_recognizes_each_format(path: Path, expected: Format) -> None:
    """The first few KB are enough to tell the formats apart."""
    assert detect_format(path) == expected
    assert read_transcript(path, "auto").format == expected


def test_detection_handles_single_line_and_long_first_line_files(tmp_path: Path) -> None:
    """A one-entry Claude log and a first line longer than the sniffed bytes still match."""
    single = _jsonl(
        tmp_path / "one.jsonl",
        [{"type": "user", "sessionId": "s", "message": {"role": "user", "content": "hi"}}],
    )
    long_first = _jsonl(
        tmp_path / "long.jsonl",
        [
            {
                "parentUuid": None,
                "sessionId": "s",
                "type": "user",
                "message": {"content": "x" * 100_000},
            }
        ],
    )
    compact_doc = tmp_path / "doc.json"
    compact_doc.write_text(json.dumps({"messages": [{"role": "user", "content": "y" * 100_000}]}))
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    assert detect_format(single) == "claude-code"
    assert detect_format(long_first) == "claude-code"
    assert detect_format(compact_doc) == "trajectory"
    assert detect_format(empty) == "text"
    assert read_transcript(empty).events == []


def test_an_explicit_format_overrides_detection() -> None:
    """Reading a JSONL session as text treats each paragraph as prose."""
    t = read_transcript(CLAUDE, "text")
    assert t.format == "text"
    assert t.events


def test_a_missing_file_raises_a_transcript_error_saying_what_to_pass(tmp_path: Path) -> None:
    """Only a file that cannot be read at all is an error; the message says what to pass."""
    with pytest.raises(TranscriptError, match="does not exist: pass one transcript file"):
        read_transcript(tmp_path / "nope.jsonl")
    broken = tmp_path / "link.jsonl"
    broken.symlink_to(tmp_path / "gone.jsonl")
    with pytest.raises(TranscriptError, match="does not exist"):
        detect_format(broken)


def test_a_directory_raises_a_transcript_error(tmp_path: Path) -> None:
    """Passing the project folder instead of a session file is explained."""
    with pytest.raises(TranscriptError, match="is a directory"):
        read_transcript(tmp_path, "claude-code")


# --- is there a conversation at all? (the session-end hook's cheap check) ------------

SNAPSHOT = {"type": "file-history-snapshot", "messageId": "m", "snapshot": {}}
META_USER = {"type": "user", "sessionId": "s", "isMeta": True, "message": {"role": "user",
             "content": "<command-name>/exit</command-name>"}}  # fmt: skip


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (None, "does not exist"),
        ([], "is empty"),
        (["", "  "], "is empty"),
        ([SNAPSHOT], "holds no conversation"),
        ([SNAPSHOT, META_USER], "holds no conversation"),  # a /exit, nobody answered
        ([{"type": "session_meta", "payload": {}, "timestamp": "t"}], "holds no conversation"),
        (["not json", SNAPSHOT], None),  # another format: the worker decides
        ([{"unknown": "shape"}], None),
        ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}], None),
    ],
)
def test_missing_conversation_names_what_is_missing(
    tmp_path: Path, lines: list[object] | None, expected: str | None
) -> None:
    """Missing, empty and message-less JSON-lines files are no session; others may be."""
    path = tmp_path / "session.jsonl"
    if lines is not None:
        path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    assert missing_conversation(path) == expected


@pytest.mark.parametrize("fixture", [CLAUDE, CODEX, MINI, OPENHANDS, NOTES])
def test_every_real_transcript_format_holds_a_conversation(fixture: Path) -> None:
    """Sessions of every format the worker reads pass the check."""
    assert missing_conversation(fixture) is None


def test_the_conversation_check_reads_no_more_than_its_budget(tmp_path: Path) -> None:
    """Past the budget without a verdict, the file is left to the worker, unread."""
    path = _jsonl(tmp_path / "big.jsonl", [SNAPSHOT] * 50 + [META_USER])
    assert missing_conversation(path) == "holds no conversation"
    assert missing_conversation(path, budget=len(json.dumps(SNAPSHOT)) * 10) is None
    assert missing_conversation(tmp_path) == "is a directory"


def test_unknown_formats_and_event_limits_are_input_errors(tmp_path: Path) -> None:
    """A misspelt format or a non-positive max_events is the caller's mistake."""
    with pytest.raises(InputError, match="unknown transcript format"):
        read_transcript(CLAUDE, "cursor")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="max_events"):
        read_transcript(CLAUDE, max_events=0)


# --- corrupt input ------------------------------------------------------------------------

GARBAGE = bytes(range(256)) * 64 + b"\n\x00\xff\xfe{not json\n" + bytes(range(255, -1, -1)) * 64


@pytest.mark.parametrize("fmt", ["auto", "claude-code", "codex", "trajectory", "text"])
def test_binary_garbage_is_skipped_in_every_format(tmp_path: Path, fmt: Format) -> None:
    """Random bytes never raise; they show up as skipped lines or records."""
    path = tmp_path / "garbage.bin"
    path.write_bytes(GARBAGE)
    t = read_transcript(path, fmt)
    assert t.skipped >= 1
    assert all(e.kind != "tool_call" for e in t.events)


def test_invalid_utf8_inside_a_line_is_replaced_and_garbage_lines_skipped(tmp_path: Path) -> None:
    """A stray bad byte in a string keeps its line; a line of bad bytes is skipped."""
    good = json.dumps({"type": "user", "message": {"role": "user", "content": "caf_"}}).encode()
    path = tmp_path / "s.jsonl"
    path.write_bytes(good.replace(b"caf_", b"caf\xe9") + b"\n\xff\xfe\xfd\xfc\n" + good + b"\n")
    t = read_transcript(path, "claude-code")
    assert [e.text for e in t.events] == ["caf\ufffd", "caf_"]
    assert t.skipped == 1


_KEYS = st.sampled_from(
    ["type", "message", "content", "role", "id", "name", "input", "text", "tool_use_id",
     "is_error", "payload", "arguments", "output", "call_id", "action", "observation",
     "source", "args", "extras", "messages", "history", "isCompactSummary", "tool_calls"]
)  # fmt: skip
_VALUES = st.sampled_from(
    ["user", "assistant", "tool_use", "tool_result", "text", "message", "function_call",
     "function_call_output", "response_item", "session_meta", "run", "edit", "finish", "tool"]
)  # fmt: skip
_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8), _VALUES),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_KEYS, inner, max_size=6)),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(
    records=st.lists(_JSON, max_size=6),
    fmt=st.sampled_from(["auto", "claude-code", "codex", "trajectory", "text"]),
    as_document=st.booleans(),
)
def test_readers_never_raise_on_json_of_arbitrary_shape(
    tmp_path_factory: pytest.TempPathFactory, records: list[object], fmt: Format, as_document: bool
) -> None:
    """Near-miss records (right keys, wrong types) are skipped or read, never fatal."""
    path = tmp_path_factory.mktemp("fuzz") / "t.jsonl"
    if as_document:
        path.write_text(json.dumps(records))
    else:
        path.write_text("\n".join(json.dumps(r) for r in records))
    t = read_transcript(path, fmt)
    assert build_digest(t, token_budget=100).estimated_tokens <= 100


# --- size bounds ----------------------------------------------------------------------------


def test_a_large_session_keeps_its_start_and_latest_events_within_max_events(
    tmp_path: Path,
) -> None:
    """200k lines stream through; the first quarter and the latest events are kept."""
    path = tmp_path / "big.jsonl"
    with path.open("w") as f:
        for i in range(200_000):
            f.write(
                json.dumps({"type": "user", "message": {"role": "user", "content": f"step {i}"}})
            )
            f.write("\n")
    t = read_transcript(path, max_events=1000)
    assert len(t.events) == 1000
    assert t.omitted == 199_000
    assert t.total_lines == 200_000
    assert [e.text for e in t.events[249:251]] == ["step 249", "step 199250"]
    assert t.events[-1].text == "step 199999"


def test_a_100_mb_line_is_skipped_in_bounded_memory_without_stopping_the_read(
    tmp_path: Path,
) -> None:
    """One enormous line costs one skip and a few MB at most; the lines around it are read."""
    path = tmp_path / "wide.jsonl"
    with path.open("w") as f:
        f.write(json.dumps({"type": "user", "message": {"content": "before"}}) + "\n")
        f.write('{"type": "user", "message": {"content": "')
        for _ in range(100):
            f.write("x" * 1_000_000)
        f.write('"}}\n')
        f.write(json.dumps({"type": "user", "message": {"content": "after"}}) + "\n")
    tracemalloc.start()
    try:
        t = read_transcript(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [e.text for e in t.events] == ["before", "after"]
    assert t.skipped == 1
    assert any("MB were skipped" in note for note in t.notes)
    assert peak < 16_000_000, f"peak {peak / 1e6:.0f} MB"


@pytest.mark.parametrize("depth", [50, 990, 100_000])
@pytest.mark.parametrize("fmt", ["auto", "claude-code", "codex", "trajectory"])
def test_deeply_nested_json_is_skipped_not_a_recursion_crash(
    tmp_path: Path, fmt: Format, depth: int
) -> None:
    """Nesting past the parser's stack, or just under it, is a skipped line at worst."""
    nested = "[" * depth + '{"type": "text", "text": "deep"}' + "]" * depth
    path = tmp_path / "deep.jsonl"
    path.write_text(
        '{"type": "user", "message": {"content": ' + nested + "}}\n"
        '{"type": "user", "message": {"content": "after"}}\n'
        '{"messages": ' + nested + "}\n"
    )
    t = read_transcript(path, fmt)
    assert build_digest(t, token_budget=200).estimated_tokens <= 200
    document = tmp_path / "deep.json"
    document.write_text('{"messages": ' + nested + "}")
    build_digest(read_transcript(document, fmt), token_budget=200)


_HOSTILE_LINES = st.one_of(
    st.binary(max_size=300),
    st.text(max_size=300).map(lambda t: t.encode("utf-8", errors="surrogatepass")),
    st.integers(1, 3000).map(lambda n: ("[" * n + "]" * n).encode()),
    st.builds(
        lambda text, kind: json.dumps(
            {"type": kind, "message": {"id": "m", "role": kind, "content": text}}
        ).encode(),
        st.text(alphabet=st.characters(codec=None), max_size=2000),
        st.sampled_from(["user", "assistant"]),
    ),
    st.just(b'{"type": "user", "message": {"content": "nul \\u0000 and \\ud800 lone"}}'),
    st.just(b'{"type": "user", "message": {"content": "raw \x00 nul \xff\xfe bytes"}}'),
)


@settings(max_examples=100, deadline=None)
@given(
    lines=st.lists(_HOSTILE_LINES, max_size=8),
    fmt=st.sampled_from(["auto", "claude-code", "codex", "trajectory", "text"]),
)
def test_readers_survive_binary_nul_bytes_invalid_utf8_and_lone_surrogates(
    tmp_path_factory: pytest.TempPathFactory, lines: list[bytes], fmt: Format
) -> None:
    """Any bytes: counted skips at worst, and a digest that encodes as UTF-8 for the API."""
    path = tmp_path_factory.mktemp("bytes") / "t.jsonl"
    path.write_bytes(b"\n".join(lines))
    digest = build_digest(read_transcript(path, fmt), token_budget=300)
    digest.text.encode("utf-8")


def test_long_tool_output_is_clipped_around_its_error(tmp_path: Path) -> None:
    """A 100k-char result keeps its head, its first error line and its tail."""
    output = (
        "\n".join(
            [
                *(f"collecting {i}" for i in range(3000)),
                "E   KeyError: 'tz'",
                *("." * 60 for _ in range(600)),
            ]
        )
        + "\n1 failed in 9.9s"
    )
    path = _jsonl(
        tmp_path / "s.jsonl",
        [{"type": "user", "message": {"content": [{"type": "tool_result", "content": output}]}}],
    )
    text = read_transcript(path).events[0].text
    assert len(text) <= EVENT_TEXT_MAX + 100
    assert text.startswith("collecting 0")
    assert "KeyError: 'tz'" in text
    assert text.endswith("1 failed in 9.9s")
    assert "chars omitted" in text


# --- digest -------------------------------------------------------------------------------


def test_digest_lists_request_actions_results_and_ending_without_paths() -> None:
    """The digest names commands and kinds of files touched, never full paths or contents."""
    d = build_digest(read_transcript(CLAUDE))
    assert "## Request\nWhy does test_midnight fail on CI" in d.text
    assert "1. ran `pytest tests/test_dates.py -q`" in d.text
    assert "read a .py file" in d.text
    assert "edited a .py file" in d.text
    assert "FAILED tests/test_dates.py::test_midnight" in d.text
    assert "5 passed in 0.10s" in d.text
    assert "## How it ended\nYes, rotate it." in d.text
    assert "/home/dev/projects" not in d.text
    assert "tz=UTC" not in d.text  # edit contents stay out
    assert (d.user_turns, d.tool_calls, d.errors, d.trivial) == (2, 4, 1, False)


def test_digest_redacts_secrets_from_the_transcript() -> None:
    """A pasted API key and a password never leave the machine."""
    d = build_digest(read_transcript(CLAUDE))
    assert "sk-ant-api03" not in d.text
    assert "hunter2-ci" not in d.text
    assert "[REDACTED:anthropic-key]" in d.text
    assert "DB_PASSWORD=[REDACTED:env-assignment]" in d.text


@pytest.mark.parametrize("path", [CODEX, MINI, OPENHANDS, NOTES], ids=lambda p: p.name)
def test_every_fixture_digests_to_a_non_trivial_summary(path: Path) -> None:
    """Each format yields a request, actions and an ending."""
    d = build_digest(read_transcript(path))
    assert not d.trivial
    assert "## Request" in d.text
    assert "## Actions" in d.text
    assert d.estimated_tokens == estimate_tokens(d.text)


def test_patches_are_described_by_the_kind_of_file_they_touch() -> None:
    """Codex apply_patch and OpenHands str_replace_editor read as edits of a .py file."""
    for path in (CODEX, OPENHANDS):
        assert "2. edited a .py file" in build_digest(read_transcript(path)).text


def _long_session(n_calls: int) -> Transcript:
    events = [Event(role="user", kind="text", text="Please make the importer idempotent.")]
    for i in range(n_calls):
        events.append(
            Event(role="assistant", kind="tool_call", text=f"pytest -k case_{i} -q", tool="Bash")
        )
        events.append(
            Event(role="tool", kind="tool_result", text=f"case_{i}: 1 failed", is_error=True)
        )
    events.append(
        Event(role="assistant", kind="text", text="Done: the importer skips rows it has seen.")
    )
    return Transcript(format="claude-code", events=events)


def test_digest_respects_the_token_budget_by_dropping_the_middle_of_the_actions() -> None:
    """Over budget, the first and last actions stay and the middle is summarized."""
    d = build_digest(_long_session(2000), token_budget=600)
    assert d.estimated_tokens <= 600
    assert "Please make the importer idempotent." in d.text
    assert "Done: the importer skips rows it has seen." in d.text
    assert "ran `pytest -k case_0 -q`" in d.text
    assert "ran `pytest -k case_1999 -q`" in d.text
    assert "more actions ...]" in d.text
    assert d.tool_calls == 2000


@settings(max_examples=40, deadline=None)
@given(
    budget=st.integers(min_value=50, max_value=3000),
    texts=st.lists(st.text(max_size=300), max_size=40),
)
def test_digest_never_exceeds_any_budget(budget: int, texts: list[str]) -> None:
    """Whatever the events, the digest fits the budget."""
    roles = ["user", "assistant", "tool"]
    events = [
        Event(
            role=roles[i % 3],  # type: ignore[arg-type]
            kind=["text", "tool_call", "tool_result"][i % 3],  # type: ignore[arg-type]
            text=text,
            tool="Bash" if i % 3 else None,
        )
        for i, text in enumerate(texts)
    ]
    d = build_digest(Transcript(format="text", events=events), token_budget=budget)
    assert d.estimated_tokens <= budget


def test_a_short_chat_without_tools_is_trivial() -> None:
    """Two text turns and no tool use are not worth distilling."""
    chat = Transcript(
        format="text",
        events=[
            Event(role="user", kind="text", text="What does HTTP 418 mean?"),
            Event(role="assistant", kind="text", text="I'm a teapot."),
        ],
    )
    with_tool = Transcript(
        format="text",
        events=[
            *chat.events[:1],
            Event(role="assistant", kind="tool_call", text="ls", tool="Bash"),
        ],
    )
    assert build_digest(chat).trivial
    assert not build_digest(with_tool).trivial
    assert build_digest(Transcript(format="text", events=[])).trivial


def test_a_tiny_budget_is_an_input_error() -> None:
    """A budget too small for any digest is refused."""
    with pytest.raises(InputError, match="token_budget"):
        build_digest(_long_session(1), token_budget=10)


def test_reading_and_digesting_all_fixtures_is_quick() -> None:
    """The readers add no noticeable latency to a session-end hook."""
    started = time.perf_counter()
    for path in (CLAUDE, CODEX, MINI, OPENHANDS, NOTES):
        build_digest(read_transcript(path))
    assert time.perf_counter() - started < 2
