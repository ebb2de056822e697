"""Running the dashboard: inside the warm service (the usual way), or in this process; and
opening it in the browser without its secret on any command line.

`mtl-mcp ui` asks the service for these settings (starting it if none runs) for a "ui"
connection. The service then listens on 127.0.0.1 over the memory it already holds: one
model, one snapshot, one writer, no second copy. It answers with one-time links and serves
the dashboard while that connection stays open; the command holds it until Ctrl-C (or the
service stops), so the dashboard lives exactly as long as `mtl-mcp ui` and keeps the service
from idling out meanwhile. A second `mtl-mcp ui` while one is open gets new links to the
open one (for another tab or browser) and ends at once. Where no service can run
(`MTL_MCP_SERVICE=off`, a read-only data directory), the command serves the dashboard
itself, over its own memory.

The hello is `{"kind": "ui", "port": N, "browser": bool}`; its answer is two lines:
`{"ok": true, ...}` (the service took the request), then `{"url": ..., "browser_file": ...,
"shared": bool}` or `{"error": ...}` (the port was taken, say). `browser_file` is the launch
file the browser is to be opened on (None without "browser"): the dashboard writes it, and
removes it once its code is dead (used, expired, or the dashboard closed).
"""

from __future__ import annotations

import contextlib
import html
import json
import logging
import os
import secrets
import socket
import tempfile
import time
from collections.abc import Callable, Generator, Iterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import anyio.abc

from mtl_mcp.config import Settings, map_big_blocks_alone
from mtl_mcp.dashboard.api import Changes, MemorySource, build_app
from mtl_mcp.dashboard.guard import CODE_SECONDS, Launch, Spent
from mtl_mcp.errors import ConfigError, MtlError

if TYPE_CHECKING:
    import uvicorn


logger = logging.getLogger(__name__)
HOST = "127.0.0.1"
KIND = "ui"
SHUTDOWN_SECONDS = 1.0
LAUNCH_FILES = "dashboard-*.html"


def listen(port: int) -> socket.socket:
    """A listening socket on loopback: `port`, or a free one for 0. Made with IPPROTO_TCP
    named: asyncio turns Nagle off only on connections of such a socket, and with Nagle on,
    every answer (headers, then body) waited ~40 ms for the client's delayed ACK."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, port))
        sock.listen(64)
    except OSError as exc:
        sock.close()
        raise ConfigError(
            f"cannot listen on {HOST}:{port} ({exc.strerror or exc}): pick another --port, "
            "or leave it out for a free one"
        ) from exc
    sock.setblocking(False)
    return sock


def link(launch: Launch, spent: Spent | None = None) -> str:
    """A new one-time link to the dashboard of `launch`."""
    return f"http://{HOST}:{launch.port}/?code={launch.new_code(spent)}"


@dataclass
class Links:
    """What `mtl-mcp ui` got: the link it prints, the launch file to open the browser on
    (None with --no-browser, or where none could be written), and the connection that
    keeps the dashboard open (None when another `mtl-mcp ui` keeps it)."""

    url: str
    browser_file: str | None = None
    held: socket.socket | None = None


def links(launch: Launch, browser: bool, settings: Settings) -> dict[str, Any]:
    """A link to print and, for the browser, a launch file holding another: the file goes
    when its code dies."""
    found: dict[str, Any] = {"url": link(launch), "browser_file": None}
    if browser:
        with contextlib.suppress(OSError):  # no file: the printed link is there
            path = launch_file(settings)
            path.write(link(launch, path.remove))
            found["browser_file"] = str(path.path)
    return found


def _server(app: Any) -> uvicorn.Server:
    import uvicorn

    class Quiet(uvicorn.Server):
        """uvicorn without its signal handlers: the service (or this command) owns them."""

        @contextlib.contextmanager
        def capture_signals(self) -> Generator[None, None, None]:
            yield

    from mtl_mcp.dashboard import limits

    config = uvicorn.Config(
        app,
        log_config=None,  # its lines go to the service's log, rate-limited (limits)
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=int(SHUTDOWN_SECONDS),
        timeout_keep_alive=limits.KEEP_ALIVE_SECONDS,
        h11_max_incomplete_event_size=limits.HEAD_BYTES_MAX,
        server_header=False,
    )
    return Quiet(config)


async def serve_until(
    source: MemorySource, sock: socket.socket, launch: Launch, done: Callable[[], Any]
) -> None:
    """Serve the dashboard on `sock` until the coroutine `done()` returns; then close it
    (open live feeds are cut after SHUTDOWN_SECONDS)."""
    from mtl_mcp.dashboard import limits

    map_big_blocks_alone()
    limits.quiet_parser_log()
    changes = Changes()
    server = _server(build_app(source, launch, changes))

    def connection() -> limits.TimedH11:
        state = server.server_state
        return limits.TimedH11(server.config, state, app_state=server.lifespan.state)

    source.listeners.add(changes.bump)
    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(server.serve, [])  # no socket: `limits.accept` hands it each one
            try:
                while not server.started:
                    await anyio.sleep(0.005)
                async with anyio.create_task_group() as accepting:
                    accepting.start_soon(
                        limits.accept, sock, connection, server.server_state.connections
                    )
                    try:
                        await done()
                    finally:
                        accepting.cancel_scope.cancel()
            finally:
                server.should_exit = True
    finally:
        source.listeners.remove(changes.bump)  # the service outlives this dashboard


# -- the browser ----------------------------------------------------------------------------


@dataclass
class LaunchFile:
    """A page only the owner can read that sends the browser on to a link: opened on it,
    the browser's command line, which every user of the machine can read, names only this
    file. It is made empty (0600, O_EXCL) before the link is minted, so that the link's
    code can take the file with it when it dies."""

    path: Path
    temporary: bool  # in a folder of its own, removed with it

    def write(self, url: str) -> None:
        target = html.escape(url, quote=True)
        self.path.write_text(
            '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">\n'
            '<meta name="referrer" content="no-referrer">\n'
            f'<meta http-equiv="refresh" content="0;url={target}">\n'
            "<title>mtl-mcp dashboard</title></head>\n"
            f'<body><p><a href="{target}">Open the mtl-mcp dashboard</a></p></body></html>\n',
            encoding="utf-8",
        )

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)
        if self.temporary:
            self.path.parent.rmdir()


def launch_file(settings: Settings) -> LaunchFile:
    """A new launch file, in the data directory's 0700 run folder, or in a private
    temporary folder where that cannot be written (a read-only data directory)."""
    try:
        return LaunchFile(_private_file(settings.home / "run"), temporary=False)
    except OSError:
        folder = Path(tempfile.mkdtemp(prefix="mtl-mcp-ui-"))
        return LaunchFile(_private_file(folder), temporary=True)


def _private_file(folder: Path) -> Path:
    """A new empty 0600 file in `folder` (made 0700); launch files left there by a
    dashboard that did not close (a crash), whose links are dead by now, are removed."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(folder, 0o700)
    for old in folder.glob(LAUNCH_FILES):
        with contextlib.suppress(OSError):
            if time.time() - old.stat().st_mtime > CODE_SECONDS:
                old.unlink()
    path = folder / LAUNCH_FILES.replace("*", secrets.token_hex(8))
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    return path


def open_browser(launch_file: str) -> None:
    """Open the default browser ($BROWSER, else the system's) on a launch file."""
    import webbrowser

    webbrowser.open(Path(launch_file).as_uri())


# -- inside the service ---------------------------------------------------------------------


class UiDoor:
    """The service's side of "ui" connections: a new dashboard for each that asks for one
    (listen, say where, serve until the connection closes), or, while one is open on the
    port asked for (any, for 0), new links to it."""

    def __init__(self) -> None:
        self.open: dict[int, Launch] = {}

    async def __call__(
        self, keeper: MemorySource, stream: anyio.abc.SocketStream, hello: dict[str, Any]
    ) -> None:
        await _send(stream, {"ok": True, "pid": os.getpid()})
        port = hello.get("port")
        port = port if isinstance(port, int) and 0 <= port <= 65535 else 0
        browser = hello.get("browser") is True
        shared = self.open.get(port) if port else next(iter(self.open.values()), None)
        if shared is not None:
            await _send(stream, {**links(shared, browser, keeper.settings), "shared": True})
            return
        try:
            sock = listen(port)
        except MtlError as exc:
            await _send(stream, {"error": str(exc)})
            return
        launch = Launch(sock.getsockname()[1])
        logger.info("dashboard listening on %s:%d", HOST, launch.port)  # never a code

        async def until_closed() -> None:
            await _send(stream, {**links(launch, browser, keeper.settings), "shared": False})
            with contextlib.suppress(Exception):
                while await stream.receive():
                    pass  # the command sends nothing; its closing ends the dashboard

        self.open[launch.port] = launch
        try:
            await serve_until(keeper, sock, launch, until_closed)
        finally:
            del self.open[launch.port]
            launch.close()
            sock.close()
            logger.info("dashboard on port %d closed", launch.port)


async def _send(stream: anyio.abc.SocketStream, message: dict[str, Any]) -> None:
    await stream.send(json.dumps(message).encode() + b"\n")


def from_service(settings: Settings, port: int, browser: bool) -> Links | None:
    """Ask the service for these settings for a dashboard (a new one, or links to the one
    open); None when no service can run here. Raises our error when the service could not
    listen."""
    from mtl_mcp.operations.service import ServiceUnavailable, ensure_service, read_hello

    try:
        sock, _ = ensure_service(settings, KIND, port=port, browser=browser)
    except ServiceUnavailable as exc:
        logger.info("no service for the dashboard: %s", exc)
        return None
    sock.settimeout(60.0)
    try:
        answer = json.loads(read_hello(sock))
    except (OSError, ValueError) as exc:
        sock.close()
        raise MtlError(f"the mtl-mcp service did not start the dashboard: {exc}") from exc
    if "url" not in answer:
        sock.close()
        raise MtlError(str(answer.get("error") or "the service did not start the dashboard"))
    if answer.get("shared"):  # another `mtl-mcp ui` keeps it open
        sock.close()
        return Links(str(answer["url"]), answer.get("browser_file"))
    sock.settimeout(None)
    return Links(str(answer["url"]), answer.get("browser_file"), sock)


def hold(sock: socket.socket) -> None:
    """Keep the service's dashboard open until the service closes it (or Ctrl-C)."""
    with sock:
        while sock.recv(4096):
            pass


# -- in this process ------------------------------------------------------------------------


class OwnSource(MemorySource, Protocol):
    """A memory this process owns (the CLI hands it the MCP server's keeper): counters
    flushed while `running`, closed at its end."""

    def running(self) -> AbstractAsyncContextManager[None]: ...


@contextlib.contextmanager
def in_process(
    source: OwnSource, port: int, browser: bool
) -> Iterator[tuple[Links, Callable[[], None]]]:
    """A dashboard served by this process over `source`: its links, and a call that
    serves until Ctrl-C."""
    sock = listen(port)
    launch = Launch(sock.getsockname()[1])

    async def forever() -> None:
        await anyio.sleep_forever()

    async def serve_owned() -> None:
        async with source.running():
            await serve_until(source, sock, launch, forever)

    def serve() -> None:
        with contextlib.suppress(KeyboardInterrupt):
            anyio.run(serve_owned)

    try:
        yield Links(**links(launch, browser, source.settings)), serve
    finally:
        launch.close()
        sock.close()
