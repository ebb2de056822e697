"""Finding and talking to the warm memory services: where they listen, and their protocol.

A service owns a `Memory` (model, snapshot, keyword index, the only writer) configured by
the settings it was started with, so it serves only callers configured the same way: one
service per user, data directory and *fingerprint*, a hash of every setting that changes
what is stored, recalled, shared or how sessions are distilled, where it differs from its
default (`fingerprint`). Callers with other settings get a service of their own. Stdio
windows, the CLI and the hooks reach it over a Unix socket in a `0700` run directory,
`<home>/run/<fingerprint[:12]>/service.sock` (`0600`). Where Unix sockets do not exist it
listens on loopback TCP, with the port and a random token in a `0600` file.

A connection starts with one JSON line from the client and one from the service:

    client:  {"mtl-mcp": "0.4.0", "kind": "mcp", "fingerprint": "<64 hex>",
              "window": {"project_dir": ..., "client": ...}}
    service: {"ok": true, "version": "0.4.0", "pid": 1234}

`kind` is "mcp" (the connection then carries MCP's newline-delimited JSON-RPC), "call" (one
library call: `"method"` and `"params"`, answered by one JSON line), "status" or "stop".
"mcp" and "call" must carry the caller's fingerprint; a service whose own differs answers
`{"ok": false, "mismatch": true, "error": ...}` (status and stop, sent to every service
of a data directory, may leave it out). A service older than its client answers
`{"ok": false, "retiring": true}` and steps aside (`retire`); a new service also retires
the older releases' services of its settings, which listen elsewhere: 0.2's at
`<home>/run/service.sock`, 0.3's under the key of a fingerprint of every setting
(`Rendezvous.predecessors`).

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
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from mtl_mcp.config import DEFAULT_EMBED_MODEL, PREVIOUS_EMBED_MODEL, Settings
from mtl_mcp.files import owner_only_dirs
from mtl_mcp.operations.retiring import alive, note_retiring, retiring_services
from mtl_mcp.version import __version__

HELLO_MAX = 1 << 20
START_TIMEOUT = 20.0  # seconds a client waits for a service it started to listen
KEY_CHARS = 12  # hex digits of the fingerprint that name a service's run directory
# The longest Unix socket path the OS accepts (sun_path, less its terminating NUL).
SOCKET_PATH_MAX = 103 if sys.platform == "darwin" else 107

# Settings that tune the service process itself, or a hook's own calls, not what it serves:
# they are not part of its fingerprint (`home` is the data directory, which the rendezvous
# is under anyway; a hook passes its relevance threshold with each call).
PROCESS_SETTINGS = frozenset(
    {
        "home",
        "service",
        "service_idle_seconds",
        "consolidate_idle_seconds",
        "consolidate_every_hours",
        "plan_recall",
        "auto_recall_min_p",
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


# What happens to an older release's service of these settings (status and doctor say it).
TAKEOVER = (
    "the next window, hook or `mtl-mcp recall` of this version takes over from it, and it "
    "exits once the windows opened before close"
)


class ServiceUnavailable(Exception):
    """No service answers, and none could be started (the caller falls back in-process)."""


class SettingsMismatch(ConnectionError):
    """The service listening there serves other settings (it refused the hello)."""


def fingerprint(settings: Settings, environ: Mapping[str, str] | None = None) -> str:
    """The service identity of `settings` and the environment: a SHA-256, in hex.

    The Settings fields whose value is not their default are in it, but the
    PROCESS_SETTINGS; so are the IDENTITY_ENV variables and, for a store or team pool on
    object storage, the AWS_*, GOOGLE_* and AZURE_* ones. PATH and HOME are not. A relative
    local store path counts as the directory it names from here. Defaults are left out so
    that a release adding a setting keeps the fingerprint of the same configuration: its
    service then takes over from the older one instead of running beside it.
    """
    defaults = type(settings)(home=settings.home)
    chosen = [
        f.name
        for f in fields(settings)
        if f.name not in PROCESS_SETTINGS and getattr(settings, f.name) != getattr(defaults, f.name)
    ]
    return _identity(settings, chosen, environ)


# The fields 0.3 hashed, default or not: what its services' fingerprints are made of.
_FIELDS_0_3 = (  # noqa: SIM905 (a list, 26 lines long)
    "store_uri storage team_uri team_member refresh_seconds embed_model dedup_threshold "
    "starter retire_after_harmful distill_model anthropic_api_key digest_tokens "
    "daily_token_budget distill_backend subscription_daily_tokens claude_command "
    "claude_code_model codex_command codex_model cli_timeout openai_base_url openai_model "
    "openai_api_key openai_context_tokens openai_timeout local_daily_tokens"
).split()


def fingerprint_0_3(settings: Settings, environ: Mapping[str, str] | None = None) -> str:
    """The fingerprint 0.3 gave `settings` (every one of its fields, defaults included):
    where a 0.3 service of the same configuration listens, to be taken over. Its default
    model was the previous runtime's name, which the default configuration then hashed."""
    if settings.embed_model == DEFAULT_EMBED_MODEL:
        settings = replace(settings, embed_model=PREVIOUS_EMBED_MODEL)
    return _identity(settings, _FIELDS_0_3, environ)


def _identity(settings: Settings, names: Sequence[str], environ: Mapping[str, str] | None) -> str:
    environ = os.environ if environ is None else environ
    values = {name: getattr(settings, name) for name in names}
    # A relative store path means another directory in another working directory (the
    # service's is the data directory): a caller elsewhere never matches it.
    for name in ("store_uri", "team_uri"):
        if values.get(name) and "://" not in values[name]:
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


def version_tuple(text: str) -> tuple[int, ...]:
    """'0.2.0' -> (0, 2, 0), for comparing versions without importing packaging."""
    parts = []
    for part in text.split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def is_older(version: object) -> bool:
    """Whether a service's `version` is older than this mtl-mcp."""
    return version_tuple(str(version or "0")) < version_tuple(__version__)


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

    @classmethod
    def predecessors(cls, settings: Settings) -> list[Rendezvous]:
        """Where an older release's service of these settings may listen: 0.2's one
        service per data directory (whatever settings started it), and 0.3's key of its
        fingerprint of every setting. A new service retires them
        (`server.service.retire_predecessors`); status counts 0.3's as serving these
        settings."""
        legacy = fingerprint_0_3(settings)
        return [cls(settings.home), cls(settings.home, legacy[:KEY_CHARS], legacy)]

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
    owner_only_dirs(rendezvous.log_file.parent)
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
    owner_only_dirs(path.parent)  # the data dir too, when this makes it (`mtl-mcp add`)
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
    waits for it. A retiring (older) service is replaced the same way, and so is an older
    release's answering a "status" hello (the CLI's: it takes over as a window does).
    Raises ServiceUnavailable, at once if the service there serves other settings.
    """
    rendezvous = Rendezvous.of(settings)
    if uses_unix_sockets() and len(os.fsencode(rendezvous.socket_path)) > SOCKET_PATH_MAX:
        raise ServiceUnavailable(
            f"the socket path {rendezvous.socket_path} is longer than a Unix socket allows: "
            "use a data directory with a shorter path (MTL_MCP_HOME)"
        )
    try:
        sock, answer = open_session(rendezvous, kind, **fields)
    except SettingsMismatch as exc:
        raise ServiceUnavailable(str(exc)) from exc
    except OSError:
        pass  # nothing listens (ConnectionError, a retiring service, is an OSError too)
    else:
        if kind != "status" or not is_older(answer.get("version")):
            return sock, answer
        sock.close()  # an older release: this one takes over, as its window would
        retire(rendezvous)
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


def retire(rendezvous: Rendezvous) -> dict[str, Any] | None:
    """Have the service at `rendezvous` step aside if it is of an older release: it frees
    its socket and lock at once (a service of this release can start there) and exits
    once the windows it serves close. Its status before, or None if no older one listens."""
    before = ask(rendezvous, "status", timeout=5.0)
    if not (before and before.get("ok") and is_older(before.get("version"))):
        return None
    # Every release since 0.2 steps aside when a window of a newer one says hello.
    answer = ask(rendezvous, "mcp", timeout=5.0, window={})
    if not (answer and answer.get("retiring")):
        return None
    pid, version = int(before.get("pid") or 0), str(before.get("version"))
    note_retiring(rendezvous.home, pid, version, rendezvous.key)
    return before


def start_in_background(settings: Settings) -> None:
    """Start the service for `settings` if none runs or starts, without waiting for it (a
    hook that must not wait for a cold start). Never raises: it is only a head start."""
    rendezvous = Rendezvous.of(settings)
    if _holds_lock(rendezvous):
        return
    try:
        owner_only_dirs(rendezvous.run_dir)
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
    serves: `"key"` names it (None for 0.2's layout, which served whatever settings started
    it), `"current"` marks those serving `settings` (the one they use, or 0.3's under its
    fingerprint of them), `"older"` those of an older release (this one takes over from
    them), `"retiring"` those that stepped aside for a newer one and still serve the windows
    they had."""
    mine = Rendezvous.of(settings).key
    legacy = Rendezvous.predecessors(settings)[-1].key
    found = []
    for rendezvous in Rendezvous.every(settings.home):
        reply = ask(rendezvous, "status", timeout=5.0)
        if reply and reply.get("ok"):
            key, older = rendezvous.key or None, is_older(reply.get("version"))
            found.append({**reply, "key": key, "current": key in (mine, legacy), "older": older})
    retiring = retiring_services(settings.home)
    return found + [{**r, "current": r["key"] in (mine, legacy), "older": True} for r in retiring]


def stop_services(home: Path, timeout: float = 15.0) -> list[int]:
    """Ask every service of data directory `home` to exit (whatever settings it serves, and
    one of 0.2's layout), end those retiring (SIGTERM: they no longer listen), and wait
    until each process is gone; their pids."""
    asked: list[tuple[Rendezvous | None, int]] = []
    for rendezvous in Rendezvous.every(home):
        reply = ask(rendezvous, "stop")
        if reply is not None and reply.get("ok"):
            asked.append((rendezvous, int(reply.get("pid") or 0)))
    for retiring in retiring_services(home):
        with contextlib.suppress(OSError):
            os.kill(retiring["pid"], signal.SIGTERM)
            asked.append((None, retiring["pid"]))
    deadline = time.monotonic() + timeout
    for place, pid in asked:
        while ((place and _holds_lock(place)) or alive(pid)) and time.monotonic() < deadline:
            time.sleep(0.05)
    return [pid for _, pid in asked]
