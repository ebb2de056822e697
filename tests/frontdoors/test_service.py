"""The shared service, with real processes and sockets: windows are `mtl-mcp serve` relays
driven by the real MCP client over stdio, or by hand over raw JSON-RPC."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import StdioServerParameters
from mcp.client import Client

from mtl_mcp import Memory, Provenance
from mtl_mcp.config import Settings, load_settings
from mtl_mcp.operations.service import (
    Rendezvous,
    ensure_service,
    hello,
    is_running,
    request,
    stop_services,
)
from mtl_mcp.server.calls import ServiceMemory
from tests.conftest import lesson, services_under
from tests.raw_window import RawWindow

pytestmark = [pytest.mark.slow, pytest.mark.anyio]


def test_a_cli_recall_starts_the_service_the_next_ones_use(settings: Settings) -> None:
    """With no service running, `mtl-mcp recall` starts one for its settings (detached: it
    outlives the command), and the next recall gets the same answer from it, which is the
    in-process one; with MTL_MCP_SERVICE=off none starts."""
    memory = Memory(settings)
    [stored] = memory.record([LESSON])
    expected = [h.id for h in memory.recall(PLAN)]
    memory.close()
    mtl_mcp = str(Path(sys.executable).with_name("mtl-mcp"))

    def recall(**extra: str) -> list[str]:
        done = subprocess.run(
            [mtl_mcp, "recall", PLAN, "--json"], env=window_env(settings.home, **extra),
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return [hit["id"] for hit in json.loads(done.stdout)["results"]]

    assert recall(MTL_MCP_SERVICE="off") == expected == [stored.id]
    assert request(settings, "status") is None
    assert recall() == expected
    first = service_pid(settings)  # the recall's service, still there after it ended
    assert recall() == expected
    assert service_pid(settings) == first


PLAN = "Reproduce the failing test first. Then fix the cause. Then rerun the whole suite."
LESSON = lesson(
    "Pin the clock in date-dependent tests",
    "Tests that read the current time fail at midnight; inject a fixed clock instead.",
)
NEAR_COPY = lesson(
    "Pin the clock in tests that depend on dates",
    "Tests that read the current time fail at midnight; inject a fixed clock instead.",
)


def window_env(home: Path, **extra: str) -> dict[str, str]:
    """A window configured like this test (the service serves only windows whose settings
    match its own), in data directory `home`, with `extra` on top."""
    return {
        **os.environ,
        "MTL_MCP_HOME": str(home),
        "MTL_MCP_SERVICE_IDLE_SECONDS": "30",
        **extra,
    }


def window(home: Path, **extra: str) -> StdioServerParameters:
    """A client window's server: `mtl-mcp serve`, as an installer registers it."""
    command = str(Path(sys.executable).with_name("mtl-mcp"))
    return StdioServerParameters(command=command, args=["serve"], env=window_env(home, **extra))


def wait_for(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def raw_window(home: Path) -> RawWindow:
    window = RawWindow(window_env(home))
    window.handshake()
    return window


def raw_recall(window: RawWindow) -> dict[str, Any]:
    window.send("tools/call", {"name": "recall_insights", "arguments": {"plan": PLAN}})
    result: dict[str, Any] = window.receive()["result"]
    return result


async def recall_ids(client: Client) -> list[str]:
    result = await client.call_tool("recall_insights", {"plan": PLAN})
    assert not result.is_error, result.content
    return [hit["id"] for hit in result.structured_content["results"]]


def service_pid(settings: Settings) -> int:
    status = request(settings, "status")
    assert status is not None, "no service answers"
    return int(status["pid"])


async def test_ten_windows_started_at_once_make_one_service(
    settings: Settings, tmp_path: Path
) -> None:
    """Ten relays started at the same moment all work, through exactly one service."""
    [stored] = Memory(settings).record([LESSON])
    found: list[list[str]] = []

    async def one_window() -> None:
        async with Client(window(settings.home), read_timeout_seconds=120) as client:
            found.append(await recall_ids(client))

    async with anyio.create_task_group() as windows:
        for _ in range(10):
            windows.start_soon(one_window)
    assert found == [[stored.id]] * 10
    assert len(services_under(tmp_path)) == 1
    assert stop_services(settings.home)
    assert services_under(tmp_path) == []


async def test_a_window_survives_a_killed_service(settings: Settings, tmp_path: Path) -> None:
    """kill -9 of the service between calls: each open window's next call succeeds, through
    a new service, on the same MCP session (the relay replays the handshake)."""
    [stored] = Memory(settings).record([LESSON])
    async with (
        Client(window(settings.home), read_timeout_seconds=120) as first,
        Client(window(settings.home), read_timeout_seconds=120) as second,
    ):
        assert await recall_ids(first) == [stored.id]
        killed = service_pid(settings)
        os.kill(killed, signal.SIGKILL)
        wait_for(lambda: not is_running(settings))
        assert await recall_ids(first) == [stored.id]
        assert await recall_ids(second) == [stored.id]
        assert service_pid(settings) != killed
    assert len(services_under(tmp_path)) == 1


def test_a_call_in_flight_when_the_service_dies_gets_a_tool_error(settings: Settings) -> None:
    """A call the service never answers (it is stopped, then killed) is answered by the relay
    with a clear tool error at once; the next call works."""
    [stored] = Memory(settings).record([LESSON])
    raw = raw_window(settings.home)
    try:
        assert not raw_recall(raw).get("isError")
        pid = service_pid(settings)
        os.kill(pid, signal.SIGSTOP)  # it accepts nothing more: the next call stays in flight
        raw.send("tools/call", {"name": "recall_insights", "arguments": {"plan": PLAN}})
        time.sleep(0.5)
        os.kill(pid, signal.SIGKILL)
        answer = raw.receive()["result"]
        assert answer["isError"] and "service stopped" in answer["content"][0]["text"]
        again = raw_recall(raw)
        assert not again.get("isError")
        assert again["structuredContent"]["results"][0]["id"] == stored.id
    finally:
        raw.close()


def test_an_idle_service_exits_and_leaves_no_process(tmp_path: Path) -> None:
    """Windows come and go; once none is left, the service exits after its idle time and
    no process of ours remains."""
    home = tmp_path / "home"
    env = window_env(home, MTL_MCP_SERVICE_IDLE_SECONDS="2")
    for _ in range(3):
        relay = subprocess.run(
            [str(Path(sys.executable).with_name("mtl-mcp")), "serve"],
            input=b"",
            env=env,
            capture_output=True,
            timeout=60,
        )
        assert relay.returncode == 0 and relay.stdout == b""
    assert len(services_under(tmp_path)) == 1
    wait_for(lambda: services_under(tmp_path) == [], timeout=30)
    assert not [r for r in Rendezvous.every(home) if r.socket_path.exists()]


async def test_a_stale_socket_is_replaced(settings: Settings, tmp_path: Path) -> None:
    """A socket file left by a crashed service (nothing listening) does not stop a window."""
    run = Rendezvous.of(settings)
    run.run_dir.mkdir(parents=True, mode=0o700)
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(run.socket_path))
    stale.close()  # bound, never listening: connecting is refused
    async with Client(window(settings.home), read_timeout_seconds=120) as client:
        assert (await client.list_tools()).tools
    assert len(services_under(tmp_path)) == 1


SYSTEM_PYTHON = Path("/usr/bin/python3")


@pytest.mark.skipif(
    os.geteuid() != 0 or not SYSTEM_PYTHON.exists(),
    reason="needs root and a system python to run a client as another user",
)
def test_another_user_is_refused() -> None:
    """Even with the folder and socket opened up, a peer with another uid gets no answer."""
    # Outside pytest's own 0700 folder, so that another user can reach the socket at all.
    home = Path(tempfile.mkdtemp(prefix="mtl-uid-", dir="/tmp")) / "home"
    settings = load_settings(home)
    try:
        sock, _ = ensure_service(settings, "status")
        sock.close()
        run = Rendezvous.of(settings)
        for opened in (home.parent, home, run.run_dir.parent, run.run_dir):
            os.chmod(opened, 0o755)
        os.chmod(run.socket_path, 0o777)
        nobody = pwd.getpwnam("nobody")
        probe = (
            "import socket, sys\n"
            "s = socket.socket(socket.AF_UNIX)\n"
            f"s.connect({str(run.socket_path)!r})\n"
            "s.settimeout(10)\n"
            "try:\n"
            f"    s.sendall({hello('status')!r})\n"
            "    sys.stdout.write(repr(s.recv(1000)))\n"
            "except (BrokenPipeError, ConnectionResetError):\n"
            "    sys.stdout.write('refused')\n"
        )
        seen = subprocess.run(
            [str(SYSTEM_PYTHON), "-c", probe],
            user=nobody.pw_uid,
            group=nobody.pw_gid,
            capture_output=True,
            text=True,
            timeout=30,
            cwd="/",
        )
        assert seen.returncode == 0, seen.stderr
        assert seen.stdout in ("b''", "refused")  # closed without a word
        assert request(settings, "status") is not None  # its owner is still served
    finally:
        stop_services(settings.home)
        shutil.rmtree(home.parent, ignore_errors=True)


def test_without_the_service_a_window_serves_in_process(settings: Settings) -> None:
    """MTL_MCP_SERVICE=off, or a data dir where the service cannot start: the window serves
    in-process and says so once on stderr."""
    for extra, home in (
        ({"MTL_MCP_SERVICE": "off"}, settings.home),
        ({}, _home_without_a_run_dir(settings.home.parent / "no-run")),
    ):
        relay = subprocess.run(
            [str(Path(sys.executable).with_name("mtl-mcp")), "serve"],
            input=b"",
            env=window_env(home, **extra),
            capture_output=True,
            timeout=120,
        )
        assert relay.returncode == 0, relay.stderr
        assert relay.stderr.decode().count("serving this window in-process") == 1
        assert not is_running(load_settings(home))


def _home_without_a_run_dir(home: Path) -> Path:
    """A data dir where the service cannot make its run directory (a file is in the way:
    what a read-only data dir does for a non-root user; tests may run as root)."""
    home.mkdir(mode=0o700)
    (home / "run").write_text("not a directory")
    return home


async def test_near_duplicates_from_two_windows_at_once_make_one_insight(
    settings: Settings,
) -> None:
    """Two windows record near-identical lessons at the same instant: one is stored, the
    other merges into it (the service is the only writer)."""
    results: list[str] = []

    async def record(item: dict[str, object]) -> None:
        async with Client(window(settings.home), read_timeout_seconds=120) as client:
            answer = await client.call_tool("record_session", {"summary": "s", "insights": [item]})
            results.append(answer.structured_content["results"][0]["status"])

    async with anyio.create_task_group() as windows:
        windows.start_soon(record, LESSON)
        windows.start_soon(record, NEAR_COPY)
    assert sorted(results) == ["merged", "stored"]
    stop_services(settings.home)
    assert len(list(Memory(settings).export())) == 1


def test_a_newer_window_retires_an_older_service(settings: Settings, tmp_path: Path) -> None:
    """A service older than a window steps aside: the window gets a new service, while the
    old one keeps serving its own window until that window closes, then exits."""
    Memory(settings).record([LESSON])
    old = _older_service(settings)
    old_window = _old_window(settings)  # an MCP session the old service keeps serving
    raw = raw_window(settings.home)
    try:
        assert not raw_recall(raw).get("isError")
        assert request(settings, "status")["version"] != "0.1.9"  # type: ignore[index]
        assert old.poll() is None, "the old service left its window behind"
    finally:
        raw.close()
    old_window.close()
    old.wait(30)
    assert len(services_under(tmp_path)) == 1


def test_a_retiring_service_is_listed_and_stopped_until_its_windows_close(
    settings: Settings, tmp_path: Path
) -> None:
    """An older service that stepped aside no longer answers hellos, yet still runs for
    the window it had: `service status` lists it as retiring, and `service stop` ends it
    (with the new one) instead of leaving it running unseen."""
    Memory(settings).record([LESSON])
    old = _older_service(settings)
    old_window = _old_window(settings)
    raw = raw_window(settings.home)  # a window of this release: the old one steps aside
    try:
        assert not raw_recall(raw).get("isError")
        status = json.loads(mtl_json(settings.home, "service", "status"))["services"]
        [retiring] = [s for s in status if s.get("retiring")]
        assert (retiring["pid"], retiring["version"]) == (old.pid, "0.1.9")
        assert retiring["current"]  # it served these settings
        assert [s["version"] for s in status if not s.get("retiring")] != ["0.1.9"]
        stopped = subprocess.run(
            [str(Path(sys.executable).with_name("mtl-mcp")), "service", "stop"],
            env=window_env(settings.home), capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert stopped.returncode == 0 and "stopped 2 services" in stopped.stdout
        assert old.wait(30) is not None and services_under(tmp_path) == []
    finally:
        raw.close()
        old_window.close()


def mtl_json(home: Path, *args: str) -> str:
    done = subprocess.run(
        [str(Path(sys.executable).with_name("mtl-mcp")), *args, "--json"],
        env=window_env(home), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def _older_service(settings: Settings) -> subprocess.Popen[bytes]:
    """This release's service, calling itself 0.1.9: an older release of these settings."""
    old = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import mtl_mcp.version; mtl_mcp.version.__version__ = '0.1.9'\n"
            "from mtl_mcp.__main__ import main; main()",
            "service",
            "--home",
            str(settings.home),
        ],
        env=window_env(settings.home),
        stderr=subprocess.DEVNULL,
    )
    wait_for(lambda: request(settings, "status") is not None)
    assert request(settings, "status")["version"] == "0.1.9"  # type: ignore[index]
    return old


def _old_window(settings: Settings) -> socket.socket:
    """A window of the old version, connected to the old service."""
    rendezvous = Rendezvous.of(settings)
    sock = socket.socket(socket.AF_UNIX)
    sock.connect(str(rendezvous.socket_path))
    told = {"mtl-mcp": "0.1.9", "kind": "mcp", "fingerprint": rendezvous.fingerprint}
    sock.sendall(json.dumps({**told, "window": {}}).encode() + b"\n")
    assert json.loads(sock.makefile().readline())["ok"]
    return sock


def test_the_cli_and_the_hooks_use_the_running_service(settings: Settings, tmp_path: Path) -> None:
    """With a service running, the CLI's quick commands and the session-start hook are
    answered by it: the same insights, this project's context fresh in its first session."""
    project = tmp_path / "project"
    project.mkdir()
    [stored] = Memory(settings).record([LESSON], Provenance(project=str(project)))
    sock, _ = ensure_service(settings, "status")
    sock.close()
    quick = ServiceMemory.running(settings)
    assert quick is not None
    assert [h.id for h in quick.recall(PLAN, project=str(project))] == [stored.id]
    [again] = quick.record([NEAR_COPY], Provenance(project=str(project)))
    assert (again.status, again.id) == ("merged", stored.id)  # deduplicated by the service
    assert quick.get(stored.id).support == 2
    env = window_env(settings.home)
    recall = subprocess.run(
        [str(Path(sys.executable).with_name("mtl-mcp")), "recall", PLAN, "--json"],
        env=env, cwd=project, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert json.loads(recall.stdout)["results"][0]["id"] == stored.id
    hook = subprocess.run(
        [str(Path(sys.executable).with_name("mtl-mcp")), "hook", "session-start"],
        input=json.dumps({"session_id": "s", "cwd": str(project), "source": "startup"}),
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert LESSON["title"] in hook.stdout  # the project's own insight, in its first session


def test_a_cli_purge_leaves_no_trace_of_a_recall_the_service_still_holds(
    settings: Settings,
) -> None:
    """The service notes a recall and writes it to the ledger a couple of seconds later; a
    purge from the CLI meanwhile stops it (which writes what it held) before it scrubs, so
    the plan's secret is neither in the ledger nor anywhere under the data directory after,
    and no service writes it back later."""
    Memory(settings).record([LESSON])
    sock, _ = ensure_service(settings, "status")
    sock.close()
    secret = "7d2e9a14c3b8f056"
    origin = {"session_id": "s-secret", "client": "claude-code", "trigger": "hook"}
    plan = f"Rotate the key sk-live-{secret}, then {PLAN}"
    reply = request(
        settings, "call", method="session_recall", params={"plan": plan, "origin": origin}
    )
    assert reply is not None and reply["ok"], reply
    env = window_env(settings.home)
    purge = subprocess.run(
        [str(Path(sys.executable).with_name("mtl-mcp")), "purge", "--pattern", secret, "--yes"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert purge.returncode == 0, purge.stdout + purge.stderr  # 1 if a trace is left
    time.sleep(3)  # a service's flush interval: nothing may come back
    found = [
        p for p in settings.home.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()
    ]
    assert found == []


def test_a_window_given_json_nested_past_any_limit_keeps_serving(settings: Settings) -> None:
    """A model's tool arguments can nest without end: the relay (which reads each message
    to track what needs an answer) and the service read it as bad JSON, and the window
    answers the next call as if nothing happened."""
    Memory(settings).record([LESSON])
    window = raw_window(settings.home)
    try:
        nested = "[" * 200_000 + "]" * 200_000
        stdin = window.process.stdin
        assert stdin is not None
        stdin.write(
            b'{"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": {"name": '
            b'"record_session", "arguments": {"summary": "s", "insights": '
            + nested.encode()
            + b"}}}\n"
        )
        stdin.flush()
        assert raw_recall(window)["structuredContent"]["results"]
        assert window.process.poll() is None
    finally:
        window.close()
