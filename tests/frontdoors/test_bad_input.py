"""Bad input at every front door, one row per case: the command (or tool call), the input,
what it must say (in the project's own words) and how it must end.

CLI rows run `python -m mtl_mcp` as a real subprocess, hooks through their CLI entry with
JSON on stdin, MCP rows through the real client SDK in-process (and, once each, over stdio
and through the shared service). No door may answer with a traceback or pydantic's text.

Read-only stores are read-only at the OS level: a read-only bind mount when the tests run
as root (whose writes permissions do not stop), else directories 0555 and files 0444.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from mtl_mcp import Memory
from mtl_mcp.config import load_settings
from mtl_mcp.operations.context import write_general_context
from mtl_mcp.server.app import build_server
from tests.conftest import claude_code_transcript, lesson

REPRO = lesson(
    "Reproduce a failure before fixing it",
    "Run the failing test on its own before editing code, so the fix can be shown to work.",
    category="test-verification",
)
BACKOFF = lesson(
    "Retry network calls with exponential backoff",
    "Transient network errors clear up on their own; retry with growing, jittered delays.",
    category="environment-adaptation",
)
PLAN = (
    "First I will run the failing test alone to see the error. Then I will read the code it "
    "exercises, make the smallest fix, and rerun the test and the whole suite to verify."
)
NEW = [
    "add",
    "--title",
    "Pin the versions of build tools",
    "--description",
    "When a fresh install builds differently from the last one.",
    "--content",
    "Pin the versions of compilers and build tools so a fresh install reproduces the build.",
]
HOOK_INPUT = json.dumps({"session_id": "s1", "cwd": "/tmp", "hook_event_name": "SessionStart"})
IS_A_FILE = "is a file, but mtl-mcp keeps its data in a directory there"
READ_ONLY = "the data directory is read-only for mtl-mcp"
LEDGER_DAMAGED = "is damaged (file is not a database): delete it"
NO_TERMINAL = "stdin is not a terminal to confirm it: nothing was changed; pass --yes"
FOREIGN = ("Traceback", "pydantic", "errors.pydantic.dev")


def _pretty(items: object) -> bytes:
    return json.dumps(items, indent=2).encode()


def input_files(folder: Path) -> None:
    """Every file a row may name as {folder}/NAME."""
    folder.mkdir(parents=True, exist_ok=True)
    drafts = [
        lesson("Read the error message first", "Read the whole error message before acting."),
        lesson("Keep commits small", "Make one logical change per commit so reverts stay easy."),
    ]
    (folder / "pretty.json").write_bytes(_pretty(drafts))
    (folder / "one.json").write_bytes(_pretty(drafts[0]))
    (folder / "broken.json").write_bytes(_pretty(drafts)[:-40])
    (folder / "empty.jsonl").write_bytes(b"")
    (folder / "bad.jsonl").write_bytes(b'{"title": "no description"}\n[1, 2]\nnot json\n')
    (folder / "one.jsonl").write_bytes(json.dumps(drafts[0]).encode() + b"\n")
    session = claude_code_transcript(folder / "session.jsonl")
    (folder / "utf16.jsonl").write_bytes(session.read_text().encode("utf-16"))
    (folder / "binary.bin").write_bytes(bytes(range(256)) * 400)
    os.mkfifo(folder / "fifo.jsonl")  # no writer ever: opening it to read would block


# -- data directories ------------------------------------------------------------------------


def make_store(home: Path) -> dict[str, str]:
    """A store holding REPRO and BACKOFF, a backup and the session-start context."""
    memory = Memory(load_settings(home, starter=False))
    try:
        first, _ = memory.record([REPRO, BACKOFF])
        made = memory.backup()
        write_general_context(memory)
    finally:
        memory.close()
    assert first.id and made is not None
    return {"home": str(home), "id": first.id, "backup": made.name}


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """`path` and everything under it read-only for this process and its children."""
    if os.geteuid() == 0:
        if shutil.which("mount") is None:
            pytest.skip("read-only tests as root need mount(8)")
        bind = subprocess.run(["mount", "--bind", path, path], capture_output=True)
        if bind.returncode != 0:
            pytest.skip(f"cannot bind-mount here: {bind.stderr.decode().strip()}")
        try:
            subprocess.run(["mount", "-o", "remount,ro,bind", path], check=True)
            yield
        finally:
            subprocess.run(["umount", "-l", path], check=True)
        return
    modes = {p: p.stat().st_mode for p in [path, *path.rglob("*")]}
    for p in sorted(modes, reverse=True):  # children first: a 0555 parent still lists them
        p.chmod(0o555 if p.is_dir() else 0o444)
    try:
        yield
    finally:
        for p, mode in sorted(modes.items()):
            p.chmod(mode)


@pytest.fixture(scope="module")
def read_only_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A store with two lessons, then made read-only (a locked-down machine, a team
    directory mounted read-only)."""
    home = tmp_path_factory.mktemp("ro") / "home"
    made = make_store(home)
    with read_only(home):
        with pytest.raises(OSError):  # really read-only for this process
            (home / "probe").write_text("x")
        yield made


def prepare_home(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, str]:
    """The data directory a row runs against, and the placeholders it fills in."""
    home = tmp_path / "home"
    if kind == "file":
        home.write_text("not a directory\n")
        return {"home": str(home), "id": "ins_0123456789abcdef", "backup": "none"}
    if kind == "store":
        return make_store(home)
    if kind in BAD_CONFIGS:  # a config.toml a user got wrong
        home.mkdir(parents=True)
        (home / "config.toml").write_text(BAD_CONFIGS[kind] + "\n", encoding="utf-8")
        return {"home": str(home), "id": "ins_0123456789abcdef", "backup": "none"}
    if kind == "damaged ledger":  # the recall ledger's file is not SQLite any more
        made = make_store(home)
        (home / "ledger.sqlite").write_bytes(b"not a database at all" * 200)
        return made
    if kind == "read-only":
        made: dict[str, str] = request.getfixturevalue("read_only_store")
        return made
    if kind == "spooled binary":  # a hook queued a session whose transcript is binary
        from mtl_mcp.learning.spool import Job, Spool

        binary = tmp_path / "files" / "binary.bin"
        job = Job(session_id="s-binary", transcript_path=str(binary), client="claude-code")
        Spool(load_settings(home, starter=False)).enqueue(job)
    return {"home": str(home), "id": "ins_0123456789abcdef", "backup": "none"}


# -- the CLI and the hooks ---------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One bad input to one door: `expect` must appear in stdout or stderr."""

    name: str
    args: list[str]
    expect: str
    code: int
    home: str = "store"  # store | file | read-only | damaged ledger | spooled binary | BAD_CONFIGS
    stdin: str | None = None  # None: </dev/null, as in a script
    unchanged: bool = False  # the store must keep every insight
    silent: bool = False  # a hook given bad input: nothing on stdout or stderr at all


BAD_CONFIGS = {  # home kind -> config.toml
    "config: a list for a number": "digest_tokens = [6000]",
    "config: nan seconds": "service_idle_seconds = nan",
    "config: text for a flag": 'plan_recall = "sometimes"',
}
NESTED = "[" * 100_000 + "]" * 100_000
NESTED_OBJECT = '{"session_id": ' * 50_000 + '"s"' + "}" * 50_000


def tool_call(**fields: Any) -> str:
    """A Claude Code PostToolUse payload (the transcript and the tool's fields as given)."""
    payload = {
        "session_id": "s-hostile",
        "prompt_id": "p1",
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "ls"},
        "tool_use_id": "toolu_1",
        "cwd": "/tmp",
    }
    return json.dumps(payload | fields)


HOOKS = [["hook", "tool-use"], ["hook", "session-start"], ["hook", "session-end"]]
HOSTILE_HOOK_ROWS = [
    Row(f"{' '.join(args)}, {name}", args, "", 0, stdin=stdin, silent=True)
    for args in HOOKS
    for name, stdin in [
        ("nested JSON arrays", NESTED),
        ("nested JSON objects", NESTED_OBJECT),
        ("a JSON string, not an object", '"hello"'),
        ("invalid UTF-8 and NUL", '{"session_id": "\x00\udcff\udcfe"'),
    ]
] + [
    # 9. a FIFO where a file belongs: opening it to read would wait for a writer for ever
    Row(
        "hook tool-use, a FIFO transcript",
        ["hook", "tool-use"],
        "",
        0,
        stdin=tool_call(transcript_path="{files}/fifo.jsonl"),
        silent=True,
    ),
    Row(
        "hook tool-use, a FIFO plan file",
        ["hook", "tool-use"],
        "",
        0,
        stdin=tool_call(tool_name="ExitPlanMode", tool_response={"filePath": "{files}/fifo.jsonl"}),
        silent=True,
    ),
    Row(
        "hook session-end, a FIFO transcript",
        ["hook", "session-end"],
        "",
        0,
        stdin=json.dumps({"session_id": "s1", "transcript_path": "{files}/fifo.jsonl"}),
        silent=True,
    ),
]
# 10. a config.toml of the wrong type: the setting, the file and the fix, never a traceback
CONFIG_ROWS = [
    Row(
        f"{' '.join(args[:2]) if args[0] == 'hook' else args[0]}, {kind}",
        args,
        expect,
        code,
        kind,
        stdin=HOOK_INPUT if args[0] == "hook" else None,
    )
    for kind, expect in [
        (
            "config: a list for a number",
            "config.toml: digest_tokens is a list ([6000]), but it takes a whole number: write "
            "e.g. digest_tokens = 6000, or remove the line for the default",
        ),
        ("config: nan seconds", "config.toml: service_idle_seconds is not finite (nan)"),
        ("config: text for a flag", "config.toml: plan_recall is text ('sometimes'), but it takes"),
    ]
    for args, code in [
        (["stats"], 1),
        (["recall", PLAN], 1),
        (["hook", "session-start"], 0),
        (["hook", "tool-use"], 0),
    ]
]

CLI_ROWS = [
    # 9. MTL_MCP_HOME points at a file
    Row("recall, home is a file", ["recall", PLAN], IS_A_FILE, 1, "file"),
    Row("list, home is a file", ["list"], IS_A_FILE, 1, "file"),
    Row("stats, home is a file", ["stats"], IS_A_FILE, 1, "file"),
    Row("add, home is a file", NEW, IS_A_FILE, 1, "file"),
    Row("import, home is a file", ["import", "{files}/one.jsonl"], IS_A_FILE, 1, "file"),
    Row("export, home is a file", ["export"], IS_A_FILE, 1, "file"),
    Row("map, home is a file", ["map", "--out", "{files}/map.html"], IS_A_FILE, 1, "file"),
    Row("forget, home is a file", ["forget", "{id}", "--yes"], IS_A_FILE, 1, "file"),
    Row("distill, home is a file", ["distill", "{files}/session.jsonl"], IS_A_FILE, 1, "file"),
    Row("service, home is a file", ["service"], IS_A_FILE, 1, "file"),
    Row(
        "hook session-start, home is a file",
        ["hook", "session-start"],
        "mtl-mcp memory is attached",  # the context still comes, the problem on stderr
        0,
        "file",
        stdin=HOOK_INPUT,
    ),
    Row(
        "hook session-end, home is a file",
        ["hook", "session-end"],
        IS_A_FILE,
        0,
        "file",
        stdin=json.dumps({"session_id": "s1", "transcript_path": "{files}/session.jsonl"}),
    ),
    # 10. a read-only data directory: reads work, writes say why they cannot
    Row("recall, read-only", ["recall", PLAN], REPRO["title"], 0, "read-only"),
    Row("list, read-only", ["list"], BACKOFF["title"], 0, "read-only"),
    Row("stats, read-only", ["stats"], "2 active insights", 0, "read-only"),
    Row("show, read-only", ["show", "{id}"], REPRO["title"], 0, "read-only"),
    Row("export, read-only", ["export"], REPRO["title"], 0, "read-only"),
    Row("add, read-only", NEW, READ_ONLY, 1, "read-only"),
    Row("rate, read-only", ["rate", "{id}", "--helpful"], READ_ONLY, 1, "read-only"),
    Row("forget, read-only", ["forget", "{id}", "--yes"], READ_ONLY, 1, "read-only"),
    Row("import, read-only", ["import", "{files}/one.jsonl"], READ_ONLY, 1, "read-only"),
    Row("distill, read-only", ["distill", "{files}/session.jsonl"], READ_ONLY, 1, "read-only"),
    Row("backup, read-only", ["backup"], READ_ONLY, 1, "read-only"),
    Row("service, read-only", ["service"], READ_ONLY, 1, "read-only"),
    Row(
        "hook session-start, read-only",
        ["hook", "session-start"],
        REPRO["title"],  # the lessons of the read-only store's context
        0,
        "read-only",
        stdin=HOOK_INPUT,
    ),
    # a damaged recall ledger: it holds only history, so recall goes on; its reports say
    Row("recall, damaged ledger", ["recall", PLAN], REPRO["title"], 0, "damaged ledger"),
    Row(
        "hook session-start, damaged ledger",
        ["hook", "session-start"],
        REPRO["title"],
        0,
        "damaged ledger",
        stdin=HOOK_INPUT,
    ),
    Row("sessions, damaged ledger", ["sessions"], LEDGER_DAMAGED, 1, "damaged ledger"),
    Row(
        "serve http on a port that cannot exist",
        ["serve", "--transport", "http", "--port", "99999"],
        "99999 is not in the range 1<=x<=65535",
        2,
    ),
    # 8. destructive commands off a terminal refuse without --yes
    Row("forget off a terminal", ["forget", "{id}"], NO_TERMINAL, 2, unchanged=True),
    Row(
        "forget --purge off a terminal",
        ["forget", "{id}", "--purge"],
        NO_TERMINAL,
        2,
        unchanged=True,
    ),
    Row("restore off a terminal", ["restore", "{backup}"], NO_TERMINAL, 2, unchanged=True),
    Row("purge off a terminal", ["purge", "--pattern", "jittered"], NO_TERMINAL, 2, unchanged=True),
    # 11. import of JSON rather than JSONL
    Row("import a JSON array", ["import", "{files}/pretty.json"], "2 stored", 0),
    Row("import one JSON object", ["import", "{files}/one.json"], "1 stored", 0),
    Row(
        "import broken JSON",
        ["import", "{files}/broken.json"],
        "this looks like a JSON document, but it is not valid JSON",
        1,
    ),
    Row("import an empty file", ["import", "{files}/empty.jsonl"], "nothing was imported", 1),
    Row("import only bad lines", ["import", "{files}/bad.jsonl"], "nothing was imported", 1),
    # 12. transcripts that are not UTF-8
    Row(
        "distill UTF-16 with a BOM",
        ["distill", "{files}/utf16.jsonl", "--dry-run"],
        "claude-code transcript, 0 unreadable lines skipped",
        0,
    ),
    Row(
        "distill a binary file",
        ["distill", "{files}/binary.bin"],
        "is not a readable transcript",
        1,
    ),
    Row(
        "distill --dry-run a binary file",
        ["distill", "{files}/binary.bin", "--dry-run"],
        "is not a readable transcript",
        1,
    ),
    Row(
        "distill --pending, a hook queued a binary file",
        ["distill", "--pending"],
        "skipped - {files}/binary.bin is not a readable transcript",  # not "trivial session"
        0,
        "spooled binary",
    ),
    # 13. one limit and one message for every door
    Row(
        "recall a 100 KB plan",
        ["recall", "p" * 100_000],
        "plan is 100000 characters: shorten it to at most 4000",
        1,
    ),
    Row(
        "list a 5 KB query",
        ["list", "--query", "q" * 5000],
        "query is 5000 characters: shorten it to at most 4000",
        1,
    ),
    Row(
        "rate with a 600-character note",
        ["rate", "{id}", "--helpful", "--note", "n" * 600],
        "note is 600 characters: shorten it to at most 500",
        1,
    ),
    *HOSTILE_HOOK_ROWS,
    *CONFIG_ROWS,
]


def fill(text: str, values: dict[str, str]) -> str:
    """`text` with each {name} replaced by its value (JSON braces stay as they are)."""
    for name, value in values.items():
        text = text.replace(f"{{{name}}}", value)
    return text


def run_cli(row: Row, values: dict[str, str]) -> subprocess.CompletedProcess[str]:
    args = [fill(arg, values) for arg in row.args]
    env = {**os.environ, "MTL_MCP_HOME": values["home"], "MTL_MCP_SERVICE": "0"}
    if row.home in BAD_CONFIGS:  # the file alone sets it
        env.pop("MTL_MCP_SERVICE_IDLE_SECONDS", None)
    return subprocess.run(
        [sys.executable, "-m", "mtl_mcp", *args],
        input=None if row.stdin is None else fill(row.stdin, values),
        stdin=subprocess.DEVNULL if row.stdin is None else None,
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="surrogateescape",  # "\udcff" in a row's stdin is the invalid byte 0xff
        env=env,
        timeout=180,
    )


def insight_count(home: str) -> int:
    memory = Memory(load_settings(Path(home), starter=False))
    try:
        return len(list(memory.export()))
    finally:
        memory.close()


@pytest.mark.slow
@pytest.mark.parametrize("row", CLI_ROWS, ids=[row.name for row in CLI_ROWS])
def test_the_cli_and_hooks_answer_bad_input_in_our_words(
    row: Row, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The row's message, the row's exit code, and no traceback or pydantic text."""
    input_files(tmp_path / "files")
    values = {**prepare_home(row.home, tmp_path, request), "files": str(tmp_path / "files")}
    before = insight_count(values["home"]) if row.unchanged else 0
    done = run_cli(row, values)
    said = done.stdout + done.stderr
    assert fill(row.expect, values) in said, said[-3000:]
    assert done.returncode == row.code, said[-3000:]
    for foreign in FOREIGN:
        assert foreign not in said, said[-3000:]
    if row.silent:
        assert said == "", said[-3000:]
    if row.unchanged:
        assert insight_count(values["home"]) == before


# -- MCP ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One tool call: `expect` must appear in the result's text; `error`: is_error."""

    name: str
    tool: str
    arguments: dict[str, Any]
    expect: str
    error: bool = True
    home: str = "none"  # none: a data directory not created yet


MCP_CALLS = [
    # 13. argument validation in our words, one limit for the plan
    Call(
        "a 60 KB plan",
        "recall_insights",
        {"plan": "p" * 60_000},
        "plan is 60000 characters: shorten it to at most 4000",
    ),
    Call(
        "k out of range",
        "recall_insights",
        {"plan": PLAN, "k": 100},
        "k is out of range: use at most 20",
    ),
    Call(
        "a plan of the wrong type",
        "recall_insights",
        {"plan": ["a", "list"]},
        "plan must be a string",
    ),
    Call(
        "an unknown scope",
        "recall_insights",
        {"plan": PLAN, "scope": "mine"},
        "scope must be one of 'all', 'other-projects' or 'this-project'",
    ),
    Call(
        "a 5 KB query",
        "list_memories",
        {"query": "q" * 5000},
        "query is 5000 characters: shorten it to at most 4000",
    ),
    Call("a limit of 0", "list_memories", {"limit": 0}, "limit is out of range: use at least 1"),
    Call(
        "an unknown category", "list_memories", {"category": "feelings"}, "category must be one of"
    ),
    Call(
        "helpful is not a boolean",
        "rate_insight",
        {"id": "ins_0", "helpful": "maybe"},
        "helpful must be true or false",
    ),
    Call(
        "a 600-character note",
        "rate_insight",
        {"id": "ins_0", "helpful": True, "note": "n" * 600},
        "note is 600 characters: shorten it to at most 500",
    ),
    Call("no summary", "record_session", {}, "summary is missing: pass it"),
    Call(
        "insights that are not a list",
        "record_session",
        {"summary": "s", "insights": "x"},
        "insights must be a list",
    ),
    Call("no id", "forget_insight", {}, "id is missing: pass it"),
    # 9. MTL_MCP_HOME points at a file
    Call("recall, home is a file", "recall_insights", {"plan": PLAN}, IS_A_FILE, home="file"),
    Call("list, home is a file", "list_memories", {}, IS_A_FILE, home="file"),
    Call(
        "recall, damaged ledger",
        "recall_insights",
        {"plan": PLAN},
        REPRO["title"],
        False,
        "damaged ledger",
    ),
    # 10. a read-only store
    Call(
        "recall, read-only", "recall_insights", {"plan": PLAN}, REPRO["title"], False, "read-only"
    ),
    Call(
        "record, read-only",
        "record_session",
        {
            "summary": "s",
            "insights": [
                lesson(
                    "Check the exit code of every step",
                    "Check each step's exit code so failures stop.",
                )
            ],
        },
        READ_ONLY,
        home="read-only",
    ),
]


def tool_text(result: Any) -> str:
    return " ".join(getattr(content, "text", "") for content in result.content)


@pytest.mark.anyio
@pytest.mark.parametrize("call", MCP_CALLS, ids=[call.name for call in MCP_CALLS])
async def test_mcp_tools_answer_bad_input_in_our_words(
    call: Call, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Over MCP too: the row's message, is_error as the row says, no pydantic text."""
    values = prepare_home(call.home, tmp_path, request)
    settings = load_settings(Path(values["home"]), starter=False)
    async with Client(build_server(settings)) as client:
        result = await client.call_tool(call.tool, call.arguments)
    text = tool_text(result)
    assert call.expect in text, text
    assert result.is_error is call.error, text
    for foreign in FOREIGN:
        assert foreign not in text, text


LIMITS = [  # (tool, argument, limit, other arguments)
    ("recall_insights", "plan", 4000, {}),
    ("list_memories", "query", 4000, {}),
    ("rate_insight", "note", 500, {"id": "ins_0", "helpful": True}),
]


@pytest.mark.anyio
async def test_each_text_limit_is_shown_in_the_schema_and_enforced_in_our_words(
    settings: Any,
) -> None:
    """The schema the model reads shows each limit; a longer text gets `Memory`'s message,
    the one the CLI prints, one character over the limit as a megabyte over."""
    async with Client(build_server(settings)) as client:
        schemas = {tool.name: tool.input_schema for tool in (await client.list_tools()).tools}
        for tool, argument, limit, others in LIMITS:
            assert schemas[tool]["properties"][argument]["maxLength"] == limit
            for length in (limit + 1, 1_000_000):
                result = await client.call_tool(tool, {**others, argument: "x" * length})
                expected = f"{argument} is {length} characters: shorten it to at most {limit}"
                assert result.is_error and expected in tool_text(result), tool_text(result)


def window(home: Path, **extra: str) -> StdioServerParameters:
    """A client window's server: `mtl-mcp serve`, as an installer registers it."""
    env = {**os.environ, "MTL_MCP_HOME": str(home), "MTL_MCP_SERVICE_IDLE_SECONDS": "30"}
    command = str(Path(sys.executable).with_name("mtl-mcp"))
    return StdioServerParameters(command=command, args=["serve"], env={**env, **extra})


@pytest.mark.slow
@pytest.mark.anyio
async def test_serve_over_stdio_says_why_a_file_home_cannot_work(tmp_path: Path) -> None:
    """`mtl-mcp serve` with MTL_MCP_HOME at a file: the service cannot start, the window
    serves in-process, and a tool call names the problem instead of a generic error."""
    home = tmp_path / "home"
    home.write_text("not a directory\n")
    async with Client(window(home), read_timeout_seconds=120) as client:
        result = await client.call_tool("recall_insights", {"plan": PLAN})
    assert result.is_error and IS_A_FILE in tool_text(result), tool_text(result)


@pytest.mark.slow
@pytest.mark.anyio
async def test_the_service_relay_says_the_same_about_a_long_plan(tmp_path: Path) -> None:
    """Through the shared service the limit and its message are the CLI's and the
    in-process server's."""
    from mtl_mcp.operations.service import stop_services

    values = make_store(tmp_path / "home")
    try:
        async with Client(window(Path(values["home"])), read_timeout_seconds=120) as client:
            result = await client.call_tool("recall_insights", {"plan": "p" * 60_000})
    finally:
        stop_services(Path(values["home"]))
    text = tool_text(result)
    assert result.is_error and "plan is 60000 characters: shorten it to at most 4000" in text
    assert "pydantic" not in text


# -- the library under a read-only store -------------------------------------------------------


def test_recall_counts_a_read_only_store_cannot_take_are_logged_once(
    read_only_store: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    """Reads of a read-only store go on; the counters it refuses are dropped and said once."""
    memory = Memory(load_settings(Path(read_only_store["home"]), starter=False))
    with caplog.at_level(logging.INFO):
        for _ in range(3):
            assert memory.recall(PLAN)[0].title == REPRO["title"]
            memory.flush()
        memory.close()
    refused = [r for r in caplog.records if "recall counts are not saved" in r.getMessage()]
    assert len(refused) == 1 and READ_ONLY in refused[0].getMessage()
