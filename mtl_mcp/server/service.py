"""`mtl-mcp service`: one warm process per user, data directory and settings, serving every
window configured like it.

It owns the `Memory` (the model, the snapshot, the keyword index; the only writer, so
deduplication is exact across windows) and speaks MCP to many connections at once over a
Unix socket (`mtl_mcp.operations.service` has the rendezvous, the settings fingerprint and
the hello protocol). Each connection is one MCP session with the window's own context; one
server instance serves them all.

- One service per fingerprint: it holds an exclusive lock on `<run>/<key>/service.lock`
  for its whole life; a second one exits at once, before importing anything heavy.
- Only its own settings: a hello whose fingerprint is not its own is refused.
- Only its owner: the run directory is 0700, the socket 0600, and each peer's uid is
  checked (SO_PEERCRED on Linux, LOCAL_PEERCRED on macOS).
- No orphans: it exits after `service_idle_seconds` with no connection, and when its socket
  is taken over by a newer service.
- A newer client retires it: the socket and the lock go to a new service at once, and this
  one exits when its last window closes (`operations.retiring` keeps a record meanwhile).
  A new service retires the older releases' services of its settings the same way.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import socket
import struct
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mtl_mcp.config import Settings, private_umask
from mtl_mcp.files import open_private, private_dir, write_private
from mtl_mcp.operations.retiring import note_retiring, rss_mb
from mtl_mcp.operations.service import Rendezvous, retire, uses_unix_sockets
from mtl_mcp.text.redact import uri_without_secrets
from mtl_mcp.version import __version__

logger = logging.getLogger(__name__)

MESSAGE_MAX = 64 << 20  # one JSON-RPC line; a plan is capped far below this
CHECK_SECONDS = 1.0


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end of a Unix socket, where the OS says."""
    if hasattr(socket, "SO_PEERCRED"):  # Linux: struct ucred {pid, uid, gid}
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        return int(struct.unpack("3i", creds)[1])
    if sys.platform == "darwin":  # struct xucred {version, uid, ngroups, groups[16]}
        local_peercred, sol_local = 0x001, 0
        creds = sock.getsockopt(sol_local, local_peercred, struct.calcsize("2I1h16I"))
        return int(struct.unpack_from("2I", creds)[1])
    return None


@dataclass
class Claim:
    """The service's hold on its rendezvous: the lock, and the socket it bound."""

    rendezvous: Rendezvous
    lock_fd: int
    listener: socket.socket
    identity: tuple[int, int] | None  # the socket file's (device, inode)
    token: str | None = None  # loopback TCP only

    released: bool = False

    def still_ours(self) -> bool:
        """False once released, or once another service has replaced our socket file."""
        if self.released:
            return False
        if self.identity is None:  # loopback TCP: the port is ours while we listen
            return True
        try:
            info = self.rendezvous.socket_path.stat()
        except OSError:
            return False
        return (info.st_dev, info.st_ino) == self.identity

    def release(self) -> None:
        """Step aside: free the socket path and the lock for a new service (once)."""
        if self.released:
            return
        if self.still_ours():
            with contextlib.suppress(OSError):
                self.rendezvous.socket_path.unlink()
            with contextlib.suppress(OSError):
                self.rendezvous.tcp_file.unlink()
        self.released = True
        with contextlib.suppress(OSError):
            os.close(self.lock_fd)


def claim(settings: Settings) -> Claim | None:
    """Take the service lock of these settings' rendezvous and bind its socket; None if
    another service holds it. Cheap: it runs before anything heavy is imported. A data
    directory that cannot hold its socket (read-only, a file) raises our error."""
    private_umask()
    rendezvous = Rendezvous.of(settings)
    for folder in (rendezvous.run_dir.parent, rendezvous.run_dir):
        private_dir(folder)
        os.chmod(folder, 0o700)
    fd = open_private(rendezvous.service_lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    if uses_unix_sockets():
        path = rendezvous.socket_path
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # a stale socket of a service that died: we hold the lock now
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(path))
        os.chmod(path, 0o600)
        info = path.stat()
        listener.listen(64)
        return Claim(rendezvous, fd, listener, (info.st_dev, info.st_ino))
    import secrets

    listener = socket.create_server(("127.0.0.1", 0))
    token = secrets.token_urlsafe(32)
    port = listener.getsockname()[1]
    write_private(rendezvous.tcp_file, json.dumps([port, token]))
    return Claim(rendezvous, fd, listener, None, token)


# Another front door the service runs for a connection of its own kind (the dashboard's
# "ui"): handed the keeper, the connection and the hello; the connection is open while it runs.
Door = Callable[[Any, Any, dict[str, Any]], Awaitable[None]]


@dataclass
class Service:
    """The running service: connections, and when to stop."""

    settings: Settings
    claim: Claim
    idle_seconds: float
    doors: Mapping[str, Door] = field(default_factory=dict)
    connections: int = 0
    windows: int = 0  # MCP sessions among the connections
    started: float = field(default_factory=time.monotonic)
    last_active: float = field(default_factory=time.monotonic)
    retiring: bool = False
    stopping: bool = False

    def status(self) -> dict[str, Any]:
        return {
            "ok": True,
            "version": __version__,
            "pid": os.getpid(),
            "windows": self.windows,
            "connections": self.connections,
            "uptime_s": round(time.monotonic() - self.started, 1),
            "rss_mb": rss_mb(os.getpid()),
            "home": str(self.settings.home),
            "key": self.claim.rendezvous.key,
            "serves": serves(self.settings),
        }

    def retire(self) -> None:
        """Step aside for a newer service; serve the windows already connected, then exit."""
        if not self.retiring:
            logger.info("a newer client asked: retiring, the socket and lock are released")
            self.retiring = True
            self.claim.release()
            rendezvous = self.claim.rendezvous
            note_retiring(rendezvous.home, os.getpid(), __version__, rendezvous.key)

    def should_exit(self) -> bool:
        if self.stopping:
            return True
        if self.connections:
            return False
        if self.retiring or not self.claim.still_ours():
            return True
        return time.monotonic() - self.last_active >= self.idle_seconds


def serves(settings: Settings) -> dict[str, Any]:
    """What a service serves, to tell its status apart from another's: never a secret."""
    return {
        "store_uri": uri_without_secrets(settings.store_uri),
        "team_uri": uri_without_secrets(settings.team_uri) or None,
        "embed_model": settings.embed_model,
        "dedup_threshold": settings.dedup_threshold,
        "distill_backend": settings.distill_backend,
    }


def retire_predecessors(settings: Settings) -> list[dict[str, Any]]:
    """Have the services of older releases that serve `settings` step aside for this one
    (`Rendezvous.predecessors`: they listen where no client of this release looks); the
    status each gave before. Cheap: a hello to each place, nothing heavy imported."""
    retired = []
    for rendezvous in Rendezvous.predecessors(settings):
        if (before := retire(rendezvous)) is not None:
            logger.info(
                "took over from the mtl-mcp %s service (pid %s); it exits once its windows close",
                before.get("version"),
                before.get("pid"),
            )
            retired.append(before)
    return retired
