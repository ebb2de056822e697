"""Fixtures of the trial tests: the user's memory (the starter pack, plus lessons planted for
a suite's tasks), the user's own client config to keep untouched, and a private TMPDIR."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from mtl_mcp.config import Settings, load_settings
from mtl_mcp.memory import Memory
from mtl_mcp.schemas import Insight
from tests.conftest import stop_services_under
from tests.npm_clients import cache_dir

SECRET = "sk-ant-oat01-trial-test-secret-0123456789abcdefghijklmnop"


def tree_hashes(root: Path) -> dict[str, str]:
    """Every file under `root` (symlinks as their target's name) and a hash of its bytes;
    caches left out (onnxruntime keeps one in ~/.cache for the embedding model)."""
    found = {}
    for path in sorted(root.rglob("*")):
        if path.relative_to(root).parts[0] == ".cache":
            continue
        if path.is_symlink():
            found[str(path.relative_to(root))] = "-> " + os.readlink(path)
        elif path.is_file():
            found[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def leftovers(tmp: Path) -> list[Path]:
    """What is left in a TMPDIR: folders (a session's is one), and any file but the
    one-line session stamp (`.ses`) a library of the trial's own process writes."""
    return [p for p in tmp.iterdir() if p.is_dir() or p.name != ".ses"]


def files_containing(root: Path, needle: str) -> list[Path]:
    """Regular files under `root` whose bytes contain `needle` (symlinks not followed)."""
    return [
        path
        for path in root.rglob("*")
        if path.is_file() and not path.is_symlink() and needle.encode() in path.read_bytes()
    ]


@pytest.fixture
def data_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The user's data directory, on a short path: the arms' service sockets live under
    their trial's folder, and pytest's own temporary paths are too deep for a socket."""
    root = Path(tempfile.mkdtemp(prefix="mtlt-", dir="/tmp"))
    monkeypatch.setenv("MTL_MCP_HOME", str(root / "home"))
    yield root / "home"
    stop_services_under(root)
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def user_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's HOME, with their own Claude Code and Gemini CLI config and logins."""
    # The pinned npm clients stay where they are cached, whatever HOME says.
    monkeypatch.setenv("MTL_MCP_TEST_CACHE", str(cache_dir()))
    home = tmp_path / "user"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "settings.json").write_text(json.dumps({"theme": "dark"}) + "\n")
    login = {"claudeAiOauth": {"accessToken": SECRET, "refreshToken": SECRET + "-refresh"}}
    (home / ".claude" / ".credentials.json").write_text(json.dumps(login))
    (home / ".gemini").mkdir()
    gemini = {"security": {"auth": {"selectedType": "gemini-api-key"}}, "ui": {"theme": "x"}}
    (home / ".gemini" / "settings.json").write_text(json.dumps(gemini) + "\n")
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A TMPDIR of the test's own, to show the trial leaves nothing in it."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", None)  # tempfile caches the folder it found
    yield folder
    tempfile.tempdir = None


TEMPLATE_TASKS = 12  # the generated suite the shared memory has lessons planted for


@pytest.fixture(scope="session")
def memory_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A user's memory, built once per test session (loading the embedding model and
    embedding the starter pack takes a while on a busy machine): the starter pack, a
    lesson planted for each task of the built-in suite and of `make_suite(...,
    TEMPLATE_TASKS)`, and the bad lesson the misled agent falls for."""
    from mtl_mcp.trials.suite import load_suite
    from tests.trials.agents import BAD_LESSON, planted_lessons
    from tests.trials.suites import make_suite

    root = tmp_path_factory.mktemp("memory-template")
    made = load_suite(make_suite(root / "suite", TEMPLATE_TASKS))
    planted = [*planted_lessons(made), *planted_lessons(load_suite("builtin"))]
    make_memory(load_settings(root / "home"), [*planted, BAD_LESSON])
    return root / "home"


@pytest.fixture
def user_memory(data_home: Path, memory_template: Path) -> Settings:
    """The user's memory (the shared template, copied) in their data directory."""
    shutil.copytree(memory_template, data_home)
    return load_settings(data_home)


def make_memory(settings: Settings, extra: Sequence[Insight] = ()) -> Settings:
    """The user's memory: the starter pack and `extra` lessons, in `settings.home`."""
    seeded = load_settings(settings.home, starter=True)
    memory = Memory(seeded)
    try:
        assert memory.stats()["total"] > 0  # opening the store seeds the starter pack
        if extra:
            results = memory.import_insights(list(extra))
            assert all(r.status == "stored" for r in results), results
    finally:
        memory.close()
    return seeded


def mtl(*args: str, env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """`mtl-mcp ARGS` as the user runs it."""
    exe = Path(sys.executable).parent / "mtl-mcp"
    return subprocess.run(
        [str(exe), *args], capture_output=True, text=True, env=env, timeout=timeout,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
