"""Every test gets its own data directory, no API key and no assistant login; the real model
and LanceDB are used."""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mtl_mcp import Memory
from mtl_mcp.config import Settings, load_settings


@pytest.fixture(autouse=True)
def env_setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("MTL_MCP_HOME", str(tmp_path / "home"))
    # A test's windows share one service, which must not outlive the test by much.
    monkeypatch.setenv("MTL_MCP_SERVICE_IDLE_SECONDS", "30")
    monkeypatch.setenv("MTL_MCP_STARTER", "0")  # tests that want the starter pack turn it on
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    monkeypatch.delenv("CLAUDE_PROJECT_DIR", raising=False)
    monkeypatch.delenv("MTL_MCP_EMBED_MODEL", raising=False)
    monkeypatch.delenv("MTL_MCP_SERVICE", raising=False)
    # Nor an assistant login: a `claude` or `codex` on this machine's PATH is never used
    # unless a test points these at one.
    monkeypatch.setenv("MTL_MCP_CLAUDE_COMMAND", "claude-not-installed-for-tests")
    monkeypatch.setenv("MTL_MCP_CODEX_COMMAND", "codex-not-installed-for-tests")
    monkeypatch.delenv("MTL_MCP_DISTILL_BACKEND", raising=False)
    # Nor an OpenAI-compatible endpoint or key of the developer's.
    for name in ("MTL_MCP_OPENAI_BASE_URL", "MTL_MCP_OPENAI_MODEL", "MTL_MCP_OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    yield
    stop_services_under(tmp_path)


def services_under(root: Path) -> list[int]:
    """Pids of `mtl-mcp service` processes whose data directory is under `root`."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"service" in argv and b"--home" in argv:
            home = argv[argv.index(b"--home") + 1].decode(errors="replace")
            if Path(home).is_relative_to(root):
                found.append(int(proc.name))
    return found


def stop_services_under(root: Path) -> None:
    """No service a test started outlives it."""
    for pid in services_under(root):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    """Entry points configure the root logger; undo that after each test."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(tmp_path / "home")


@pytest.fixture
def store(settings: Settings) -> Iterator[Memory]:
    memory = Memory(settings)
    yield memory
    memory.close()


def add_args(draft: dict[str, object]) -> list[str]:
    """`mtl-mcp add` arguments for a draft."""
    fields = ("title", "description", "content")
    return ["add", *(arg for name in fields for arg in (f"--{name}", str(draft[name])))]


def lesson(title: str, content: str, **extra: object) -> dict[str, object]:
    """A valid draft with a generic description."""
    return {
        "title": title,
        "description": "When working on any non-trivial coding task.",
        "content": content,
        **extra,
    }


_SUBJECTS = [
    "database migrations",
    "flaky tests",
    "shell scripts",
    "API responses",
    "config files",
    "dependency upgrades",
    "log output",
    "error handling",
    "cache layers",
    "date parsing",
    "file uploads",
    "user input",
    "network retries",
    "build caches",
    "feature flags",
    "access tokens",
    "CSV imports",
    "thread pools",
    "memory leaks",
    "container images",
]
_ACTIONS = [
    "inspect before editing",
    "verify after changing",
    "isolate in a minimal reproduction",
    "read the documentation for",
    "write a failing test for",
    "measure before optimizing",
    "log the inputs of",
    "validate the schema of",
    "roll back quickly on problems with",
    "review the diff of",
]


def distinct_lessons(count: int, offset: int = 0) -> list[dict[str, object]]:
    """`count` lessons no two of which are near-duplicates (max cosine ~0.89 with MiniLM)."""
    pairs = list(itertools.product(_SUBJECTS, _ACTIONS))[offset : offset + count]
    assert len(pairs) == count, "at most 200 distinct lessons"
    return [
        lesson(
            f"{action.capitalize()} {subject}",
            f"When dealing with {subject}, {action} {subject} to avoid surprises later.",
        )
        for subject, action in pairs
    ]


def serve_warm(settings: Settings) -> None:
    """A shared service for `settings`' data directory, started as a window starts it and
    warm (a first recall answered), as after a first session."""
    from mtl_mcp.operations.service import request

    mtl_mcp = str(Path(sys.executable).with_name("mtl-mcp"))
    env = {**os.environ, "MTL_MCP_HOME": str(settings.home)}
    subprocess.run([mtl_mcp, "serve"], stdin=subprocess.DEVNULL, env=env, check=True, timeout=60)
    reply = request(settings, "call", method="recall", params={"plan": "warm up"}, timeout=60)
    assert reply and reply["ok"], reply


# A plan one starter-pack lesson fits plainly ("Make flaky tests deterministic before
# trusting them", p ~0.99) and the others do not: the relevance gate passes that one only.
FLAKY_PLAN = (
    "The suite fails now and then on CI with a timing error. First I will run the flaky test "
    "in a loop to reproduce it, then find the source of nondeterminism, such as the clock or "
    "test ordering, and make it deterministic before trusting a green run."
)
FLAKY_LESSON = "Make flaky tests deterministic before trusting them"

# A live-looking secret built at run time: it must never reach the API or the store.
LEAKED = "AKIA" + "QX7ZK2M9R4T6W8Y3"


def claude_code_transcript(path: Path, session: str = "sess-1") -> Path:
    """A small but real-shaped Claude Code session with tool use, an error and a fix."""
    common = {"sessionId": session, "cwd": str(path.parent), "isSidechain": False}
    lines: list[dict[str, Any]] = [
        {
            "type": "user",
            "uuid": "u1",
            "message": {
                "role": "user",
                "content": "The nightly report crashes on the first day of each month. "
                f"(the job uses AWS_ACCESS_KEY_ID={LEAKED})",
            },
        },
        {
            "type": "assistant",
            "uuid": "a1",
            "message": {
                "id": "m1",
                "role": "assistant",
                "content": [{"type": "text", "text": "Let me reproduce it with a test."}],
            },
        },
        {
            "type": "assistant",
            "uuid": "a2",
            "message": {
                "id": "m1",
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "t1",
                        "name": "Bash",
                        "input": {"command": "pytest tests/test_report.py -q"},
                    }
                ],
            },
        },
        {
            "type": "user",
            "uuid": "u2",
            "message": {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "is_error": True,
                        "content": "FAILED test_report.py::test_month_start - "
                        "IndexError: day out of range",
                    }
                ],
            },
        },
        {
            "type": "assistant",
            "uuid": "a3",
            "message": {
                "id": "m2",
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "t2",
                        "name": "Edit",
                        "input": {
                            "file_path": "report/dates.py",
                            "old_string": "d - 1",
                            "new_string": "d",
                        },
                    }
                ],
            },
        },
        {
            "type": "assistant",
            "uuid": "a4",
            "message": {
                "id": "m3",
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "t3",
                        "name": "Bash",
                        "input": {"command": "pytest -q"},
                    }
                ],
            },
        },
        {
            "type": "user",
            "uuid": "u3",
            "message": {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t3", "content": "42 passed in 1.2s"}
                ],
            },
        },
        {
            "type": "assistant",
            "uuid": "a5",
            "message": {
                "id": "m4",
                "role": "assistant",
                "content": [{"type": "text", "text": "Fixed the off-by-one; all tests pass."}],
            },
        },
    ]
    path.write_text(
        "\n".join(json.dumps({**common, **line}) for line in lines) + "\n", encoding="utf-8"
    )
    return path


def distil_file(transcript: Path) -> dict[str, Any]:
    """`mtl-mcp distill FILE --json` in process: the outcome of the file's one job."""
    from click.testing import CliRunner

    from mtl_mcp.cli import cli

    result = CliRunner().invoke(cli, ["distill", str(transcript), "--json"])
    assert result.exit_code == 0, result.output
    [outcome] = json.loads(result.stdout)
    return dict(outcome)


def queued_jobs(settings: Settings) -> list[Any]:
    """The jobs waiting in the spool."""
    from mtl_mcp.learning.spool import Spool

    return [job for _, job in Spool(settings).jobs()]


def distillation_children(settings: Settings) -> list[int]:
    """Pids of processes still running as a distillation child of this test's data dir
    (their environment carries the child marker and this MTL_MCP_HOME)."""
    home = f"MTL_MCP_HOME={settings.home}".encode()
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            variables = environ.read_bytes().split(b"\0")
        except OSError:  # gone, or not ours
            continue
        if b"MTL_MCP_DISTILL_CHILD=1" in variables and home in variables:
            found.append(int(environ.parent.name))
    return found
