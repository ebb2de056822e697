"""Running the dashboard: inside the warm service (the usual way), or in this process.

`mtl-mcp ui` asks the service for these settings (starting it if none runs) for a "ui"
connection. The service then listens on 127.0.0.1 with a fresh token, over the memory it
already holds: one model, one snapshot, one writer, no second copy. It answers with the URL
and serves the dashboard while that connection stays open; the command holds it until
Ctrl-C (or the service stops), so the dashboard lives exactly as long as `mtl-mcp ui` and
keeps the service from idling out meanwhile. Where no service can run (`MTL_MCP_SERVICE=off`,
a read-only data directory), the command serves the dashboard itself, over its own memory.

The hello's answer is two lines: `{"ok": true, ...}` (the service took the request), then
`{"url": ...}` or `{"error": ...}` (the port was taken, say).
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import socket
from collections.abc import Callable, Generator, Iterator
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import anyio.abc

from mtl_mcp.config import Settings, map_big_blocks_alone
from mtl_mcp.dashboard.api import Changes, MemorySource, build_app
from mtl_mcp.dashboard.guard import Secrets
from mtl_mcp.errors import ConfigError, MtlError

if TYPE_CHECKING:
    import uvicorn


logger = logging.getLogger(__name__)
HOST = "127.0.0.1"
KIND = "ui"
SHUTDOWN_SECONDS = 1.0


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


def launch_secrets(port: int) -> Secrets:
    return Secrets(token=secrets.token_urlsafe(32), csrf=secrets.token_urlsafe(32), port=port)


def url_of(launch: Secrets) -> str:
    return f"http://{HOST}:{launch.port}/?token={launch.token}"


def _server(app: Any) -> uvicorn.Server:
    import uvicorn

    class Quiet(uvicorn.Server):
        """uvicorn without its signal handlers: the service (or this command) owns them."""

        @contextlib.contextmanager
        def capture_signals(self) -> Generator[None, None, None]:
            yield

    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=int(SHUTDOWN_SECONDS),
        server_header=False,
    )
    return Quiet(config)


async def serve_until(
    source: MemorySource, sock: socket.socket, launch: Secrets, done: Callable[[], Any]
) -> None:
    """Serve the dashboard on `sock` until the coroutine `done()` returns; then close it
    (open live feeds are cut after SHUTDOWN_SECONDS)."""
    map_big_blocks_alone()
    changes = Changes()
    server = _server(build_app(source, launch, changes))
    source.listeners.add(changes.bump)
    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(server.serve, [sock])
            try:
                await done()
            finally:
                server.should_exit = True
    finally:
        source.listeners.remove(changes.bump)  # the service outlives this dashboard


# -- inside the service ---------------------------------------------------------------------


async def ui_door(
    keeper: MemorySource, stream: anyio.abc.SocketStream, hello: dict[str, Any]
) -> None:
    """The service's side of a "ui" connection: listen, say where, serve until it closes."""
    import os

    await _send(stream, {"ok": True, "pid": os.getpid()})
    port = hello.get("port")
    try:
        sock = listen(port if isinstance(port, int) and 0 <= port <= 65535 else 0)
    except MtlError as exc:
        await _send(stream, {"error": str(exc)})
        return
    launch = launch_secrets(sock.getsockname()[1])
    logger.info("dashboard listening on %s:%d", HOST, launch.port)  # never the token

    async def until_closed() -> None:
        await _send(stream, {"url": url_of(launch)})
        with contextlib.suppress(Exception):
            while await stream.receive():
                pass  # the command sends nothing; its closing ends the dashboard

    try:
        await serve_until(keeper, sock, launch, until_closed)
    finally:
        sock.close()
        logger.info("dashboard on port %d closed", launch.port)


async def _send(stream: anyio.abc.SocketStream, message: dict[str, Any]) -> None:
    await stream.send(json.dumps(message).encode() + b"\n")


def from_service(settings: Settings, port: int) -> tuple[socket.socket, str] | None:
    """Ask the service for these settings to serve a dashboard: the held connection and the
    URL; None when no service can run here. Raises our error when the service could not
    listen."""
    from mtl_mcp.operations.service import ServiceUnavailable, ensure_service, read_hello

    try:
        sock, _ = ensure_service(settings, KIND, port=port)
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
    sock.settimeout(None)
    return sock, str(answer["url"])


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
def in_process(source: OwnSource, port: int) -> Iterator[tuple[str, Callable[[], None]]]:
    """A dashboard served by this process over `source`: its URL, and a call that serves
    until Ctrl-C."""
    sock = listen(port)
    launch = launch_secrets(sock.getsockname()[1])

    async def forever() -> None:
        await anyio.sleep_forever()

    async def serve_owned() -> None:
        async with source.running():
            await serve_until(source, sock, launch, forever)

    def serve() -> None:
        with contextlib.suppress(KeyboardInterrupt):
            anyio.run(serve_owned)

    try:
        yield url_of(launch), serve
    finally:
        sock.close()
