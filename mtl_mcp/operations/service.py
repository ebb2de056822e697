"""Finding and talking to the warm memory service: where it listens, and its small protocol.

One service per user and data directory owns the `Memory` (model, snapshot, keyword index,
the only writer); stdio windows, the CLI and the hooks reach it over a Unix socket in a
`0700` run directory (`<home>/run/service.sock`, `0600`). Where Unix sockets do not exist it
listens on loopback TCP, with the port and a random token in a `0600` file.

A connection starts with one JSON line from the client and one from the service:

    client:  {"mtl-mcp": "0.2.0", "kind": "mcp", "window": {"project_dir": ..., "client": ...}}
    service: {"ok": true, "version": "0.2.0", "pid": 1234}

`kind` is "mcp" (the connection then carries MCP's newline-delimited JSON-RPC), "call" (one
library call: `"method"` and `"params"`, answered by one JSON line), "status" or "stop".
A service older than its client answers `{"ok": false, "retiring": true}` and steps aside.

This module imports only the standard library and the config: the stdio relay and the hooks
use it and must start in milliseconds.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtl_mcp.config import Settings
from mtl_mcp.version import __version__

HELLO_MAX = 1 << 20
START_TIMEOUT = 20.0  # seconds a client waits for a service it started to listen


class ServiceUnavailable(Exception):
    """No service answers, and none could be started (the caller falls back in-process)."""


@dataclass(frozen=True)
class Rendezvous:
    """Where one data directory's service listens and keeps its state."""

    run_dir: Path

    @classmethod
    def of(cls, settings: Settings) -> Rendezvous:
        return cls(settings.home / "run")

    @property
    def socket_path(self) -> Path:
        return self.run_dir / "service.sock"

    @property
    def tcp_file(self) -> Path:
        """Port and token of a loopback-TCP service (where Unix sockets do not exist)."""
        return self.run_dir / "service.tcp"

    @property
    def service_lock(self) -> Path:
        """Held by the running service for its whole life: at most one per data directory."""
        return self.run_dir / "service.lock"

    @property
    def spawn_lock(self) -> Path:
        """Held by a client while it starts a service, so ten windows start one."""
        return self.run_dir / "spawn.lock"

    @property
    def log_file(self) -> Path:
        return self.run_dir.parent / "logs" / "service.log"


def uses_unix_sockets() -> bool:
    return hasattr(socket, "AF_UNIX")


def hello(kind: str, **fields: Any) -> bytes:
    """The first line a client sends."""
    return (json.dumps({"mtl-mcp": __version__, "kind": kind, **fields}) + "\n").encode()


def read_hello(sock: socket.socket) -> bytes:
    """The service's answer line, read a byte at a time: what follows it on an MCP
    connection belongs to the relay's pipe, so nothing past the newline may be consumed."""
    line = bytearray()
    while not line.endswith(b"\n"):
        chunk = sock.recv(1)
        if not chunk:
            raise ConnectionError("the service closed the connection")
        line += chunk
        if len(line) > HELLO_MAX:
            raise ConnectionError("the service sent an over-long line")
    return bytes(line)


def connect(rendezvous: Rendezvous, timeout: float = 5.0) -> socket.socket:
    """A connected socket to the running service; OSError if none listens."""
    if uses_unix_sockets():
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(str(rendezvous.socket_path))
        except OSError:
            sock.close()
            raise
        return sock
    port, token = json.loads(rendezvous.tcp_file.read_text(encoding="utf-8"))
    sock = socket.create_connection(("127.0.0.1", int(port)), timeout=timeout)
    sock.sendall((json.dumps({"token": token}) + "\n").encode())
    return sock


def open_session(
    rendezvous: Rendezvous, kind: str, timeout: float = 5.0, **fields: Any
) -> tuple[socket.socket, dict[str, Any]]:
    """Connect, say hello, and read the service's answer. OSError if nothing listens;
    ConnectionError if the service refused or is retiring."""
    sock = connect(rendezvous, timeout)
    try:
        sock.sendall(hello(kind, **fields))
        answer = json.loads(read_hello(sock))
    except (OSError, ValueError) as exc:
        sock.close()
        raise ConnectionError(f"the service did not answer the hello: {exc}") from exc
    if not answer.get("ok"):
        sock.close()
        raise ConnectionError(answer.get("error") or "the service is retiring")
    return sock, answer


def spawn_service(settings: Settings) -> None:
    """Start `mtl-mcp service` fully detached (it outlives the window that started it)."""
    rendezvous = Rendezvous.of(settings)
    rendezvous.log_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    log = os.open(rendezvous.log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    # A window's own context must not become the service's: it serves every window.
    env = {k: v for k, v in os.environ.items() if k not in ("CLAUDE_PROJECT_DIR",)}
    env["MTL_MCP_HOME"] = str(settings.home)
    try:
        subprocess.Popen(
            # -v: its log (INFO: starts, exits, compactions; never insight text) is its trail.
            [sys.executable, "-m", "mtl_mcp", "service", "-v", "--home", str(settings.home)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,
            close_fds=True,
            env=env,
            cwd=str(settings.home),
        )
    finally:
        os.close(log)


@contextlib.contextmanager
def exclusive(path: Path) -> Iterator[None]:
    """A blocking exclusive flock on `path` (created 0600 in a 0700 folder)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def ensure_service(
    settings: Settings, kind: str, timeout: float = START_TIMEOUT, **fields: Any
) -> tuple[socket.socket, dict[str, Any]]:
    """A session with the running service, starting one if none listens.

    Exactly one service starts even when many clients arrive at once: a client that finds
    none takes the spawn lock, looks again, and only then starts one and waits for it.
    A retiring (older) service is replaced the same way. Raises ServiceUnavailable.
    """
    rendezvous = Rendezvous.of(settings)
    try:
        return open_session(rendezvous, kind, **fields)
    except OSError:
        pass  # nothing listens (ConnectionError, a retiring service, is an OSError too)
    try:
        with exclusive(rendezvous.spawn_lock):
            with contextlib.suppress(OSError):
                return open_session(rendezvous, kind, **fields)
            spawn_service(settings)
            deadline = time.monotonic() + timeout
            delay = 0.01
            while time.monotonic() < deadline:
                time.sleep(delay)
                delay = min(delay * 1.5, 0.2)
                with contextlib.suppress(OSError):
                    return open_session(rendezvous, kind, **fields)
    except OSError as exc:  # the run directory cannot be made (a read-only data dir)
        raise ServiceUnavailable(
            f"cannot start the service in {rendezvous.run_dir}: {exc}"
        ) from exc
    raise ServiceUnavailable(
        f"the service did not start within {timeout:.0f} s: see {rendezvous.log_file}"
    )


def request(
    settings: Settings, kind: str, *, timeout: float = 30.0, **fields: Any
) -> dict[str, Any] | None:
    """One request-response exchange with the running service ("call", "status", "stop"):
    its answer, or None if no service runs (this never starts one)."""
    try:
        sock = connect(Rendezvous.of(settings), timeout=min(timeout, 5.0))
    except OSError:
        return None
    with sock, sock.makefile("rb") as replies:
        sock.settimeout(timeout)
        try:
            sock.sendall(hello(kind, **fields))
            reply: dict[str, Any] = json.loads(replies.readline())
        except (OSError, ValueError):
            return None
    return reply


def window_of(environ: Mapping[str, str], client: str) -> dict[str, str | None]:
    """What a window tells the service about itself: its project and its client."""
    return {
        "project_dir": environ.get("CLAUDE_PROJECT_DIR") or None,
        "cwd": os.getcwd(),
        "client": client,
    }


def is_running(settings: Settings) -> bool:
    """Whether a service holds this data directory's lock (it may still be starting)."""
    lock = Rendezvous.of(settings).service_lock
    try:
        fd = os.open(lock, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing releases a lock we happened to take
    return False


def stop_service(settings: Settings, timeout: float = 15.0) -> bool:
    """Ask the running service to exit and wait until its process is gone; False if none
    was running."""
    reply = request(settings, "stop")
    if reply is None:
        return False
    pid = int(reply.get("pid") or 0)
    deadline = time.monotonic() + timeout
    while (is_running(settings) or _alive(pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return True


def _alive(pid: int) -> bool:
    """Whether process `pid` still runs (a zombie waiting for its parent does not)."""
    if pid <= 0:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
