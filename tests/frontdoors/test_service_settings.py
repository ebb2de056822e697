"""The shared service serves only callers configured like itself: real processes, real
sockets, the real CLI and the real MCP client over stdio."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import StdioServerParameters
from mcp.client import Client

from mtl_mcp import Memory
from mtl_mcp.config import Settings, load_settings
from mtl_mcp.operations.service import Rendezvous, ensure_service, hello, read_hello
from tests.conftest import add_args, lesson, services_under
from tests.frontdoors.test_service import (
    LESSON,
    NEAR_COPY,
    PLAN,
    raw_recall,
    service_pid,
    wait_for,
    window,
    window_env,
)
from tests.raw_window import RawWindow

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

MTL = str(Path(sys.executable).with_name("mtl-mcp"))
OTHER = lesson(
    "Quote every variable in shell scripts",
    "Unquoted variables split on spaces and glob; quote them to keep one argument.",
)
# A live-looking key built at run time: it may enter the fingerprint, never a file.
PLANTED_KEY = "sk-ant-api03-" + "Zq8Xw2Lp5Rt7Vn1Mb4Kc6Hd9Fg3Js0Ae" + "-planted"


def mtl(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The real CLI in a subprocess, configured like this test plus `env`."""
    return subprocess.run(
        [MTL, *args], env=window_env(home, **env), capture_output=True, text=True, timeout=120
    )


def start_service(settings: Settings) -> int:
    """A service for `settings` (as a window starts it), and its pid."""
    sock, answer = ensure_service(settings, "status")
    sock.close()
    return int(answer["pid"])


def settings_with(home: Path, monkeypatch: pytest.MonkeyPatch, **env: str) -> Settings:
    """Settings as a caller with `env` on top of this test's environment has them; the
    environment stays set, so a service it spawns is configured the same way."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return load_settings(home)


def stored_titles(settings: Settings) -> list[str]:
    memory = Memory(settings)
    try:
        return sorted(i.title for i in memory.export())
    finally:
        memory.close()


def test_a_store_uri_of_its_own_is_never_answered_by_the_default_service(
    settings: Settings, tmp_path: Path
) -> None:
    """With the default store's service running, `add` and `recall` with another
    MTL_MCP_STORE_URI write to and read from that other store."""
    Memory(settings).record([LESSON])
    start_service(settings)
    other = tmp_path / "other-store"
    added = mtl(settings.home, *add_args(OTHER), "--json", MTL_MCP_STORE_URI=str(other))
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout)["status"] == "stored"
    assert stored_titles(load_settings(settings.home, store_uri=str(other))) == [OTHER["title"]]
    assert stored_titles(settings) == [LESSON["title"]]
    recalled = mtl(settings.home, "recall", OTHER["content"], "--json",
                   MTL_MCP_STORE_URI=str(other))  # fmt: skip
    assert [h["title"] for h in json.loads(recalled.stdout)["results"]] == [OTHER["title"]]
    same = mtl(settings.home, "recall", OTHER["content"], "--json")  # the service's own store
    assert [h["title"] for h in json.loads(same.stdout)["results"]] == [LESSON["title"]]
    # `add` started a service of its own settings for the other store, as a window would.
    assert len(services_under(tmp_path)) == 2


def test_another_dedup_threshold_is_applied_not_the_services(settings: Settings) -> None:
    """A near copy merges at the default threshold; with MTL_MCP_DEDUP_THRESHOLD=0.99 it is
    stored on its own, even while a default service runs."""
    Memory(settings).record([LESSON])
    start_service(settings)
    strict = mtl(settings.home, *add_args(NEAR_COPY), "--json", MTL_MCP_DEDUP_THRESHOLD="0.99")
    assert json.loads(strict.stdout)["status"] == "stored", strict.stderr
    default = mtl(settings.home, *add_args(NEAR_COPY), "--json")
    assert json.loads(default.stdout)["status"] == "merged"


async def test_windows_configured_alike_share_a_service_and_others_get_their_own(
    settings: Settings, tmp_path: Path
) -> None:
    """Six windows opened at once, three of them with MTL_MCP_DISTILL_BACKEND=off: exactly
    two services, one per configuration (the spawn lock holds per configuration)."""
    [stored] = Memory(settings).record([LESSON])
    found: list[list[str]] = []

    async def one_window(**extra: str) -> None:
        async with Client(window(settings.home, **extra), read_timeout_seconds=120) as client:
            result = await client.call_tool("recall_insights", {"plan": PLAN})
            found.append([hit["id"] for hit in result.structured_content["results"]])

    async with anyio.create_task_group() as windows:
        for backend in ("auto", "off") * 3:
            windows.start_soon(lambda b=backend: one_window(MTL_MCP_DISTILL_BACKEND=b))
    assert found == [[stored.id]] * 6
    assert len(services_under(tmp_path)) == 2


async def test_two_windows_with_their_own_stores_get_their_own_answers_at_once(
    settings: Settings, tmp_path: Path
) -> None:
    """Two relays open at the same time, one on the default store and one on another:
    each recalls, and records, in its own store only."""
    other = load_settings(settings.home, store_uri=str(tmp_path / "other-store"))
    [mine] = Memory(settings).record([LESSON])
    [theirs] = Memory(other).record([OTHER])
    answers: dict[str, list[str]] = {}

    async def one_window(name: str, **extra: str) -> None:
        async with Client(window(settings.home, **extra), read_timeout_seconds=120) as client:
            for _ in range(3):
                result = await client.call_tool("recall_insights", {"plan": PLAN, "k": 5})
                assert not result.is_error, result.content
                answers[name] = [h["id"] for h in result.structured_content["results"]]
                await anyio.sleep(0)

    async with anyio.create_task_group() as windows:
        windows.start_soon(one_window, "default")
        windows.start_soon(lambda: one_window("other", MTL_MCP_STORE_URI=other.store_uri))
    assert answers == {"default": [mine.id], "other": [theirs.id]}
    assert len(services_under(tmp_path)) == 2


async def test_a_relative_store_path_is_the_one_in_the_windows_directory(
    settings: Settings, tmp_path: Path
) -> None:
    """A window in a project directory with MTL_MCP_STORE_URI=rel-store records into the
    project's rel-store: never the running service's store, nor a rel-store beside it (a
    service it starts works in the data directory: it leaves, and the window serves itself)."""
    start_service(settings)
    project = tmp_path / "project"
    project.mkdir()
    relative = StdioServerParameters(
        command=MTL,
        args=["serve"],
        env=window_env(settings.home, MTL_MCP_STORE_URI="rel-store"),
        cwd=str(project),
    )
    async with Client(relative, read_timeout_seconds=120) as client:
        answer = await client.call_tool("record_session", {"summary": "s", "insights": [OTHER]})
        assert answer.structured_content["results"][0]["status"] == "stored"
    mine = load_settings(settings.home, store_uri=str(project / "rel-store"))
    assert stored_titles(mine) == [OTHER["title"]]
    assert stored_titles(settings) == [] and not (settings.home / "rel-store").exists()
    log = (settings.home / "logs" / "service.log").read_text()
    assert "these settings are not the starting window's" in log


def test_a_hello_from_other_settings_is_refused(settings: Settings) -> None:
    """The service answers a hello whose fingerprint is not its own with ok:false and why,
    and serves nothing on that connection."""
    start_service(settings)
    path = Rendezvous.of(settings).socket_path
    for kind in ("mcp", "call"):
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(10)
            sock.connect(str(path))
            sock.sendall(hello(kind, fingerprint="0" * 64, method="stats", params={}))
            answer = json.loads(read_hello(sock))
        assert answer["ok"] is False and "settings" in answer["error"], answer


def test_service_status_lists_every_service_and_stop_and_purge_stop_them_all(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two services of one data directory: `service status --json` lists both and marks the
    one these settings use; `service stop` stops both; `purge` does too."""
    for stopper in (["service", "stop"], ["purge", "--pattern", "matches-nothing", "--yes"]):
        default = start_service(settings)
        off = start_service(settings_with(settings.home, monkeypatch,
                                          MTL_MCP_DISTILL_BACKEND="off"))  # fmt: skip
        monkeypatch.delenv("MTL_MCP_DISTILL_BACKEND")
        assert default != off and sorted(services_under(tmp_path)) == sorted([default, off])
        status = mtl(settings.home, "service", "status", "--json")
        assert status.returncode == 0, status.stderr
        listed = json.loads(status.stdout)["services"]
        assert sorted(s["pid"] for s in listed) == sorted([default, off])
        assert [s["pid"] for s in listed if s["current"]] == [default]
        text = mtl(settings.home, "service", "status").stdout
        assert str(default) in text and str(off) in text
        stopped = mtl(settings.home, *stopper)
        assert stopped.returncode == 0, stopped.stderr
        assert services_under(tmp_path) == []


def test_a_service_of_the_old_layout_is_never_used_but_is_stopped(
    settings: Settings, tmp_path: Path
) -> None:
    """A 0.2 service (at `<home>/run/service.sock`) serving another store: a new CLI does
    not ask it (it starts its own), `service status` shows it, `service stop` stops it."""
    other = tmp_path / "other-store"
    Memory(load_settings(settings.home, store_uri=str(other))).record([OTHER])
    Memory(settings).record([LESSON])
    old = subprocess.Popen(
        [sys.executable, "-c", _AT_THE_OLD_PLACE, "service", "--home", str(settings.home)],
        env=window_env(settings.home, MTL_MCP_STORE_URI=str(other)),
        stderr=subprocess.DEVNULL,
    )
    old_socket = settings.home / "run" / "service.sock"
    wait_for(lambda: old_socket.exists())
    recalled = mtl(settings.home, "recall", PLAN, "--json")
    assert [h["title"] for h in json.loads(recalled.stdout)["results"]] == [LESSON["title"]]
    listed = json.loads(mtl(settings.home, "service", "status", "--json").stdout)["services"]
    assert [(s["pid"], s["current"]) for s in listed if s["key"] is None] == [(old.pid, False)]
    assert [s["current"] for s in listed if s["key"] is not None] == [True]  # the CLI's own
    assert mtl(settings.home, "service", "stop").returncode == 0
    assert old.wait(30) == 0


# The service of this version, listening where 0.2 did (`<home>/run/service.sock`).
_AT_THE_OLD_PLACE = (
    "from mtl_mcp.operations import service\n"
    "service.Rendezvous.of = classmethod(lambda cls, settings, environ=None: cls(settings.home))\n"
    "from mtl_mcp.__main__ import main; main()"
)


def test_a_planted_api_key_splits_the_service_but_is_written_nowhere(
    settings: Settings, tmp_path: Path
) -> None:
    """A window with an API key gets a service of its own; the key is in no file of the data
    directory (run dir and service log included) and in no status output."""
    Memory(settings).record([LESSON])
    start_service(settings)
    keyed = RawWindow(window_env(settings.home, ANTHROPIC_API_KEY=PLANTED_KEY))
    try:
        keyed.handshake()
        assert not raw_recall(keyed).get("isError")
        assert len(services_under(tmp_path)) == 2
        added = mtl(settings.home, *add_args(OTHER), ANTHROPIC_API_KEY=PLANTED_KEY)
        assert added.returncode == 0, added.stderr
        outputs: list[str] = []
        for args in (("service", "status"), ("service", "status", "--json"), ("doctor",)):
            done = mtl(settings.home, *args, ANTHROPIC_API_KEY=PLANTED_KEY)
            outputs += [done.stdout, done.stderr]
    finally:
        keyed.close()
    assert not [o for o in outputs if PLANTED_KEY in o]
    leaks = _files_holding(settings.home, PLANTED_KEY.encode())
    assert leaks == [], leaks
    assert (settings.home / "logs" / "service.log").is_file()
    assert service_pid(settings) != 0  # the keyless service still answers its own settings


def _files_holding(root: Path, needle: bytes) -> list[Path]:
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_socket():
            try:
                if needle in path.read_bytes():
                    found.append(path)
            except OSError:
                continue
    names = [p for p in root.rglob("*") if needle.decode() in p.name]
    return found + names
