"""Every test gets its own data directory and no API key; the real model and LanceDB are used."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from mtl_mcp.config import Settings, load_settings
from mtl_mcp.store import InsightStore


@pytest.fixture(autouse=True)
def env_setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MTL_MCP_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MTL_MCP_STARTER", "0")  # tests that want the starter pack turn it on
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    monkeypatch.delenv("CLAUDE_PROJECT_DIR", raising=False)
    monkeypatch.delenv("MTL_MCP_EMBED_MODEL", raising=False)


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
def store(settings: Settings) -> Iterator[InsightStore]:
    memory = InsightStore(settings)
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
