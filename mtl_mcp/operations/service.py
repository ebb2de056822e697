"""Finding and talking to the warm memory services: where they listen, and their protocol.

A service owns a `Memory` (model, snapshot, keyword index, the only writer) configured by
the settings it was started with, so it serves only callers configured the same way: one
service per user, data directory and *fingerprint*, a hash of every setting that changes
what is stored, recalled, shared or how sessions are distilled (`fingerprint`). Callers
with other settings get a service of their own. Stdio windows, the CLI and the hooks
reach it over a Unix socket in a `0700` run directory, `<home>/run/<fingerprint[:12]>/
service.sock` (`0600`). Where Unix sockets do not exist it listens on loopback TCP, with
the port and a random token in a `0600` file.

A connection starts with one JSON line from the client and one from the service:

    client:  {"mtl-mcp": "0.2.0", "kind": "mcp", "fingerprint": "<64 hex>",
              "window": {"project_dir": ..., "client": ...}}
    service: {"ok": true, "version": "0.2.0", "pid": 1234}

`kind` is "mcp" (the connection then carries MCP's newline-delimited JSON-RPC), "call" (one
library call: `"method"` and `"params"`, answered by one JSON line), "status" or "stop".
"mcp" and "call" must carry the caller's fingerprint; a service whose own differs answers
`{"ok": false, "mismatch": true, "error": ...}` (status and stop, sent to every service
of a data directory, may leave it out). A service older than its client answers
`{"ok": false, "retiring": true}` and steps aside.

Secrets (an API key, object-store credentials) enter the fingerprint's hash and nothing
else: no file name, file, log line or status answer holds them.

This module imports only the standard library and the config: the stdio relay and the hooks
use it and must start in milliseconds.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from mtl_mcp.config import Settings
from mtl_mcp.version import __version__

HELLO_MAX = 1 << 20
START_TIMEOUT = 20.0  # seconds a client waits for a service it started to listen
KEY_CHARS = 12  # hex digits of the fingerprint that name a service's run directory
# The longest Unix socket path the OS accepts (sun_path, less its terminating NUL).
SOCKET_PATH_MAX = 103 if sys.platform == "darwin" else 107

# Settings that tune the service process itself, or a hook's own calls, not what it serves:
# they are not part of its fingerprint (`home` is the data directory, which the rendezvous
# is under anyway; a hook passes its floor with each call).
PROCESS_SETTINGS = frozenset(
    {
        "home",
        "service",
        "service_idle_seconds",
        "consolidate_idle_seconds",
        "consolidate_every_hours",
        "plan_recall",
        "plan_recall_floor",
        "hook_budget_seconds",
    }
)
# Variables the service's libraries read that change where distillation calls go or who
# pays for them (the Anthropic SDK; the Claude Code and Codex logins).
IDENTITY_ENV = (
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "CLAUDE_CONFIG_DIR",
    "CODEX_HOME",
    "OPENAI_API_KEY",
)
# Object-store credentials, endpoints and regions LanceDB reads: part of the fingerprint
# only when the store or the team pool is on object storage (they change nothing else).
OBJECT_STORE_ENV_PREFIXES = ("AWS_", "GOOGLE_", "AZURE_")


class ServiceUnavailable(Exception):
    """No service answers, and none could be started (the caller falls back in-process)."""


class SettingsMismatch(ConnectionError):
    """The service listening there serves other settings (it refused the hello)."""


def fingerprint(settings: Settings, environ: Mapping[str, str] | None = None) -> str:
    """The service identity of `settings` and the environment: a SHA-256, in hex.

    Every Settings field is in it but the PROCESS_SETTINGS (a field added later is in it
    by default), with the IDENTITY_ENV variables and, for a store or team pool on object
    storage, the AWS_*, GOOGLE_* and AZURE_* ones. PATH and HOME are not. A relative local
    store path counts as the directory it names from here.
    """
    environ = os.environ if environ is None else environ
    values = {
        f.name: getattr(settings, f.name)
        for f in fields(settings)
        if f.name not in PROCESS_SETTINGS
    }
    # A relative store path means another directory in another working directory (the
    # service's is the data directory): a caller elsewhere never matches it.
    for name in ("store_uri", "team_uri"):
        if values[name] and "://" not in values[name]:
            values[name] = os.path.abspath(values[name])
    env = {name: environ[name] for name in IDENTITY_ENV if environ.get(name)}
    if "://" in settings.store_uri or "://" in settings.team_uri:
        env |= {
            name: value
            for name, value in environ.items()
            if name.startswith(OBJECT_STORE_ENV_PREFIXES) and value
        }
    identity = json.dumps({"settings": values, "env": env}, sort_keys=True, default=str)
    return hashlib.sha256(identity.encode()).hexdigest()


@dataclass(frozen=True)
class Rendezvous:
    """Where one service of a data directory listens and keeps its state.

    `key` names its run directory, `<home>/run/<key>`; the empty key is 0.2's layout, one
    service per data directory in `<home>/run` itself. `fingerprint` is what a client sends
    in its hello: the whole hash for its own settings, None for a service found by listing
    the data directory (which only status and stop are sent to).
    """

    home: Path
    key: str = ""
    fingerprint: str | None = None

    @classmethod
    def of(cls, settings: Settings, environ: Mapping[str, str] | None = None) -> Rendezvous:
        """The service that serves `settings`."""
        whole = fingerprint(settings, environ)
        return cls(settings.home, whole[:KEY_CHARS], whole)

    @classmethod
    def every(cls, home: Path) -> list[Rendezvous]:
        """Every place a service of data directory `home` may listen, 0.2's first."""
        run = home / "run"
        try:
            keys = sorted(
                entry.name for entry in run.iterdir() if _is_key(entry.name) and entry.is_dir()
            )
        except OSError:  # no run directory: no service ever ran
            keys = []
        return [cls(home), *(cls(home, key) for key in keys)]

    @property
    def run_dir(self) -> Path:
        return self.home / "run" / self.key if self.key else self.home / "run"

    @property
    def socket_path(self) -> Path:
        return self.run_dir / "service.sock"

    @property
    def tcp_file(self) -> Path:
        """Port and token of a loopback-TCP service (where Unix sockets do not exist)."""
        return self.run_dir / "service.tcp"

    @property
    def service_lock(self) -> Path:
        """Held by the running service for its whole life: at most one per fingerprint."""
        return self.run_dir / "service.lock"

    @property
    def spawn_lock(self) -> Path:
        """Held by a client while it starts a service, so ten windows start one."""
        return self.run_dir / "spawn.lock"

    @property
    def log_file(self) -> Path:
        """One log for every service of the data directory (each line names no secret)."""
        return self.home / "logs" / "service.log"


def _is_key(name: str) -> bool:
    return len(name) == KEY_CHARS and all(ch in "0123456789abcdef" for ch in name)


def uses_unix_sockets() -> bool:
    return hasattr(socket, "AF_UNIX")


def hello(kind: str, fingerprint: str | None = None, **fields: Any) -> bytes:
    """The first line a client sends; `fingerprint` is its settings' (see `fingerprint`)."""
    line: dict[str, Any] = {"mtl-mcp": __version__, "kind": kind}
    if fingerprint is not None:
        line["fingerprint"] = fingerprint
    return (json.dumps({**line, **fields}) + "\n").encode()


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
    SettingsMismatch if it serves other settings; ConnectionError if it refused otherwise
    or is retiring."""
    sock = connect(rendezvous, timeout)
    try:
        sock.sendall(hello(kind, rendezvous.fingerprint, **fields))
        answer = json.loads(read_hello(sock))
    except (OSError, ValueError) as exc:
        sock.close()
        raise ConnectionError(f"the service did not answer the hello: {exc}") from exc
    if not answer.get("ok"):
        sock.close()
        why = str(answer.get("error") or "the service is retiring")
        raise SettingsMismatch(why) if answer.get("mismatch") else ConnectionError(why)
    return sock, answer


def spawn_service(settings: Settings, rendezvous: Rendezvous) -> subprocess.Popen[bytes]:
    """Start `mtl-mcp service` fully detached (it outlives the window that started it),
    with this process's environment: so it is configured, and fingerprinted, like it."""
    rendezvous.log_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    log = os.open(rendezvous.log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    # A window's own context must not become the service's: it serves every window.
    env = {k: v for k, v in os.environ.items() if k not in ("CLAUDE_PROJECT_DIR",)}
    env["MTL_MCP_HOME"] = str(settings.home)
    # -v: its log (INFO: starts, exits, compactions; never insight text) is its trail.
    # --key: it leaves at once if its settings are not the ones it was started for.
    argv = ["-m", "mtl_mcp", "service", "-v", "--home", str(settings.home)]
    try:
        return subprocess.Popen(
            [sys.executable, *argv, "--key", rendezvous.key],
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
    """A session with the service for `settings`, starting one if none listens.

    Exactly one service per fingerprint starts even when many clients arrive at once: a
    client that finds none takes the spawn lock, looks again, and only then starts one and
    waits for it. A retiring (older) service is replaced the same way. Raises
    ServiceUnavailable, at once if the service there serves other settings.
    """
    rendezvous = Rendezvous.of(settings)
    if uses_unix_sockets() and len(os.fsencode(rendezvous.socket_path)) > SOCKET_PATH_MAX:
        raise ServiceUnavailable(
            f"the socket path {rendezvous.socket_path} is longer than a Unix socket allows: "
            "use a data directory with a shorter path (MTL_MCP_HOME)"
        )
    try:
        return open_session(rendezvous, kind, **fields)
    except SettingsMismatch as exc:
        raise ServiceUnavailable(str(exc)) from exc
    except OSError:
        pass  # nothing listens (ConnectionError, a retiring service, is an OSError too)
    try:
        with exclusive(rendezvous.spawn_lock):
            with contextlib.suppress(OSError):
                return open_session(rendezvous, kind, **fields)
            child = spawn_service(settings, rendezvous)
            deadline = time.monotonic() + timeout
            delay = 0.01
            while time.monotonic() < deadline:
                time.sleep(delay)
                delay = min(delay * 1.5, 0.2)
                gone = child.poll() is not None  # it left at once: look a last time
                with contextlib.suppress(OSError):
                    return open_session(rendezvous, kind, **fields)
                if gone:
                    raise ServiceUnavailable(
                        f"the service exited at once (code {child.returncode}): see "
                        f"{rendezvous.log_file}"
                    )
    except SettingsMismatch as exc:
        raise ServiceUnavailable(str(exc)) from exc
    except OSError as exc:  # the run directory cannot be made (a read-only data dir)
        raise ServiceUnavailable(
            f"cannot start the service in {rendezvous.run_dir}: {exc}"
        ) from exc
    raise ServiceUnavailable(
        f"the service did not start within {timeout:.0f} s: see {rendezvous.log_file}"
    )


def start_in_background(settings: Settings) -> None:
    """Start the service for `settings` if none runs or starts, without waiting for it (a
    hook that must not wait for a cold start). Never raises: it is only a head start."""
    rendezvous = Rendezvous.of(settings)
    if _holds_lock(rendezvous):
        return
    try:
        rendezvous.run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(rendezvous.spawn_lock, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another client is starting it
        if not _holds_lock(rendezvous):
            spawn_service(settings, rendezvous)
    except OSError:
        return
    finally:
        os.close(fd)


def request(
    settings: Settings, kind: str, *, timeout: float = 30.0, **fields: Any
) -> dict[str, Any] | None:
    """One request-response exchange with the service for `settings` ("call", "status",
    "stop"): its answer, or None if none runs (this never starts one). A service that
    serves other settings answers `{"ok": false, "mismatch": true, ...}`."""
    return ask(Rendezvous.of(settings), kind, timeout=timeout, **fields)


def ask(
    rendezvous: Rendezvous, kind: str, *, timeout: float = 30.0, **fields: Any
) -> dict[str, Any] | None:
    """One request-response exchange with the service at `rendezvous`; None if none runs."""
    try:
        sock = connect(rendezvous, timeout=min(timeout, 5.0))
    except (OSError, ValueError):  # ValueError: a torn loopback-TCP file
        return None
    with sock, sock.makefile("rb") as replies:
        sock.settimeout(timeout)
        try:
            sock.sendall(hello(kind, rendezvous.fingerprint, **fields))
            reply: dict[str, Any] = json.loads(replies.readline())
        except (OSError, ValueError):
            return None
    return reply


SESSION_ENV = "CLAUDE_CODE_SESSION_ID"  # Claude Code's session, in its servers' environment


def window_of(environ: Mapping[str, str], client: str) -> dict[str, str | None]:
    """What a window tells the service about itself: its project, its client, and the
    session it serves when the client says (the ledger attributes its recalls to it)."""
    return {
        "project_dir": environ.get("CLAUDE_PROJECT_DIR") or None,
        "cwd": os.getcwd(),
        "client": client,
        "session_id": environ.get(SESSION_ENV) or None,
    }


def is_running(settings: Settings) -> bool:
    """Whether a service for `settings` holds its lock (it may still be starting)."""
    return _holds_lock(Rendezvous.of(settings))


def _holds_lock(rendezvous: Rendezvous) -> bool:
    try:
        fd = os.open(rendezvous.service_lock, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing releases a lock we happened to take
    return False


def statuses(settings: Settings) -> list[dict[str, Any]]:
    """The status of every service of `settings`' data directory, whatever settings each
    serves: `"key"` names it (None for 0.2's layout), `"current"` marks the one `settings`
    use."""
    mine = Rendezvous.of(settings).key
    found = []
    for rendezvous in Rendezvous.every(settings.home):
        reply = ask(rendezvous, "status", timeout=5.0)
        if reply and reply.get("ok"):
            key = rendezvous.key or None
            found.append({**reply, "key": key, "current": key == mine})
    return found


def stop_services(home: Path, timeout: float = 15.0) -> list[int]:
    """Ask every service of data directory `home` to exit (whatever settings it serves, and
    one of 0.2's layout) and wait until each process is gone; their pids."""
    asked = []
    for rendezvous in Rendezvous.every(home):
        reply = ask(rendezvous, "stop")
        if reply is not None and reply.get("ok"):
            asked.append((rendezvous, int(reply.get("pid") or 0)))
    deadline = time.monotonic() + timeout
    for rendezvous, pid in asked:
        while (_holds_lock(rendezvous) or _alive(pid)) and time.monotonic() < deadline:
            time.sleep(0.05)
    return [pid for _, pid in asked]


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
