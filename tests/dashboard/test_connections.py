"""The dashboard never costs the service its life: a flood of idle connections to its port
leaves windows and hooks served, `service status` right and the log small; slow and idle
connections are closed; and the service outlasts running out of file descriptors."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import resource
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from mtl_mcp import Memory
from mtl_mcp.config import load_settings
from mtl_mcp.server.calls import ServiceMemory
from tests.dashboard.conftest import PLAN, Dashboard, redeem, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.alone]
FLOOD = 1500  # idle connections: more than a service with 1,024 open files can hold
SERVICE_FILES = 1024  # a common default limit, as hard limit: the service cannot raise it
LOG_MAX = 32 * 1024


def limit_open_files(count: int) -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (count, count))


@pytest.fixture
def own_dashboard(tmp_path: Path) -> Iterator[Dashboard]:
    """`mtl-mcp ui` over the starter pack, in a service of its own limited to
    SERVICE_FILES open files (it inherits the limit of the command that starts it)."""
    home = tmp_path / "home"
    memory = Memory(load_settings(home))
    memory.seed()
    memory.close()
    env = {**os.environ, "MTL_MCP_HOME": str(home), "MTL_MCP_HOOK_BUDGET_SECONDS": "30"}
    process = subprocess.Popen(
        [sys.executable, "-m", "mtl_mcp", "ui", "--no-browser", "--home", str(home)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        text=True,
        preexec_fn=lambda: limit_open_files(SERVICE_FILES),
    )
    assert process.stdout is not None
    link = process.stdout.readline().split(": ", 1)[1].strip()
    board = Dashboard(link, home, env, process)
    try:
        yield board
    finally:
        process.terminate()
        process.wait(10)
        process.stdout.close()
        board.cli("service", "stop", check=False)


class Flood:
    """FLOOD idle TCP connections to a port, kept up: one the server closes is opened
    again, about once a second."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.socks = [self.connect() for _ in range(FLOOD)]
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.keep_up, daemon=True)
        self.thread.start()

    def connect(self) -> socket.socket:
        sock = socket.socket()
        sock.setblocking(False)
        sock.connect_ex(("127.0.0.1", self.port))  # no waiting: the backlog may be full
        return sock

    def keep_up(self) -> None:
        while not self.stopping.wait(1.0):
            for n, sock in enumerate(self.socks):
                try:
                    if sock.recv(1024) == b"":
                        raise ConnectionResetError
                except (BlockingIOError, InterruptedError):
                    continue  # still open, and idle
                except OSError as exc:
                    if exc.errno == errno.ENOTCONN:
                        continue  # still connecting
                sock.close()
                self.socks[n] = self.connect()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join()
        for sock in self.socks:
            sock.close()


def tool_use_hook(home: Path, folder: Path, env: dict[str, str], session: str) -> str:
    """The tool-use hook after the first tool call of a session that stated PLAN (a
    session gets its notes once): its stdout."""
    transcript = folder / f"{session}.jsonl"
    lines = [
        {"type": "user", "uuid": "p0", "message": {"content": "Speed up the slow query."}},
        {"type": "assistant", "message": {"content": [{"type": "text", "text": PLAN}]}},
        {"type": "assistant", "message": {"content": [
            {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "db.py"}}
        ]}},
    ]  # fmt: skip
    transcript.write_text("".join(json.dumps(line) + "\n" for line in lines))
    payload = {
        "session_id": session,
        "transcript_path": str(transcript),
        "cwd": str(folder),
        "prompt_id": "p0",
        "hook_event_name": "PostToolUse",
        "tool_name": "Read",
        "tool_input": {"file_path": "db.py"},
        "tool_use_id": "t1",
    }
    done = subprocess.run(
        [sys.executable, "-m", "mtl_mcp", "hook", "tool-use", "--home", str(home)],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_flood_of_idle_connections_leaves_windows_hooks_and_the_service_served(
    own_dashboard: Dashboard, tmp_path: Path
) -> None:
    """FLOOD idle connections to the dashboard's port, held open throughout: recall through
    the service's call door (what a window's relay and the CLI use) and a hook still
    answer, `service status` says it runs, and the service's log stays small. Once the
    flood ends, the dashboard serves again."""
    board = own_dashboard
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = FLOOD + 500
    if soft < wanted:
        if hard != resource.RLIM_INFINITY and hard < wanted:
            pytest.fail(f"this test opens {FLOOD} connections: raise the hard limit of open files")
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    settings = load_settings(board.home)
    service = ServiceMemory(settings)
    assert [hit.id for hit in service.recall(PLAN, k=3)]  # warm, before the flood
    log = board.home / "logs" / "service.log"
    flood = Flood(board.port)
    try:
        time.sleep(2)  # the dashboard has seen them all
        for n in range(3):
            status = board.cli_json("service", "status")
            assert status["running"] and status["services"][0]["ok"], status
            assert [hit.id for hit in service.recall(PLAN, k=3)]
            assert board.cli("recall", PLAN, "-k", "1").stdout.strip()
            notes = tool_use_hook(board.home, tmp_path, board.env, f"s-flood-{n}")
            assert "additionalContext" in notes, notes
        assert log.stat().st_size < LOG_MAX, log.read_text()[-2000:]
    finally:
        flood.stop()
        _, hard_now = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, hard_now), hard_now))
    session = wait_until(lambda: _redeemed(board), seconds=60)
    with httpx.Client(base_url=board.base, headers={"x-mtl-session": session}) as http:
        assert http.get("/api/insights").status_code == 200
    text = log.read_text()
    assert "the dashboard refused connections beyond 64" in text
    assert text.count("refused connections") <= 2  # once a minute at most
    assert "Traceback" not in text


def _redeemed(board: Dashboard) -> str | None:
    with contextlib.suppress(httpx.HTTPError, AssertionError):
        return redeem(board, board.new_link())
    return None


def closed_within(sock: socket.socket, seconds: float, trickle: bytes = b"") -> bool:
    """Whether the server closes `sock` within `seconds`, sent `trickle` a byte every half
    second meanwhile (a slow-loris)."""
    sock.settimeout(0.5)
    deadline = time.monotonic() + seconds
    sent = 0
    while time.monotonic() < deadline:
        try:
            if sent < len(trickle):
                sock.send(trickle[sent : sent + 1])
                sent += 1
            if sock.recv(4096) == b"":
                return True
        except TimeoutError:
            continue
        except OSError:
            return True
    return False


def test_idle_and_slow_connections_are_closed(dashboard: Dashboard) -> None:
    """A connection that sends nothing, one that trickles its request head a byte at a
    time, one that trickles the body of a code's exchange (open before any session), and
    one left idle after an answer are all closed by the dashboard (well before the minute
    allowed here); a request head of a megabyte is refused unread."""
    head = f"GET /api/insights HTTP/1.1\r\nHost: 127.0.0.1:{dashboard.port}\r\n".encode()
    exchange = (
        f"POST /api/session HTTP/1.1\r\nHost: 127.0.0.1:{dashboard.port}\r\n"
        f"Origin: {dashboard.base}\r\nContent-Type: application/json\r\n"
        "Content-Length: 1000\r\n\r\n"
    ).encode()
    for first, trickle in ((b"", b""), (b"", head + b"x-slow: " + b"z" * 200),
                           (exchange, b'{"code": "' + b"c" * 990)):  # fmt: skip
        with socket.create_connection(("127.0.0.1", dashboard.port)) as sock:
            sock.sendall(first)
            assert closed_within(sock, 60.0, trickle), (first + trickle)[:20]
    with socket.create_connection(("127.0.0.1", dashboard.port)) as sock:
        sock.sendall(head + b"\r\n")
        answer = sock.recv(65536)
        assert answer.startswith(b"HTTP/1.1 401 ")
        assert closed_within(sock, 60.0)  # kept alive only a few seconds
    huge = head + b"cookie: " + b"c" * (1 << 20) + b"\r\n\r\n"  # it is read in parts
    with socket.create_connection(("127.0.0.1", dashboard.port)) as sock:
        try:
            sock.sendall(huge)
            answer = sock.recv(65536)
        except ConnectionResetError:  # refused while it was still sending
            answer = b""
        assert answer == b"" or answer.startswith(b"HTTP/1.1 400 "), answer[:80]
    with httpx.Client(base_url=dashboard.base, headers=dashboard.headers) as http:
        assert http.get("/api/insights").status_code == 200


def test_the_service_outlasts_running_out_of_file_descriptors(tmp_path: Path) -> None:
    """A service limited to 128 open files, sent 300 connections that say nothing: it
    cannot accept them all, waits, and serves again once they are gone."""
    home = tmp_path / "home"
    env = {**os.environ, "MTL_MCP_HOME": str(home)}
    service = subprocess.Popen(
        [sys.executable, "-m", "mtl_mcp", "service", "--home", str(home)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: limit_open_files(128),
    )
    settings = load_settings(home)
    try:
        wait_until(lambda: ServiceMemory.running(settings) is not None, seconds=60)
        assert ServiceMemory(settings).recall(PLAN, k=3) == []  # warm: its files are open
        rendezvous = str(home / "run")
        path = next(Path(rendezvous).glob("*/service.sock"))
        held: list[socket.socket] = []
        deadline = time.monotonic() + 20
        while len(held) < 300 and time.monotonic() < deadline:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.setblocking(False)
            try:
                sock.connect(str(path))
            except BlockingIOError:  # its backlog is full: it is busy accepting, or cannot
                sock.close()
                time.sleep(0.01)
                continue
            except OSError:  # the socket is gone: the service with it
                sock.close()
                break
            held.append(sock)
        time.sleep(3)  # it has met its limit
        assert service.poll() is None
        assert path.exists()
        for sock in held:
            sock.close()
        assert wait_until(lambda: ServiceMemory.running(settings) is not None, seconds=60)
        assert ServiceMemory(settings).stats()["total"] == 0
    finally:
        service.terminate()
        _, err = service.communicate(timeout=30)
    assert "the service could not accept a connection" in err
    assert "Traceback" not in err
