"""The service's connections: each one an MCP session, a library call, a status or a stop.

One MCP server instance, one `MemoryKeeper`, many connections. An MCP connection carries
newline-delimited JSON-RPC, as stdio does, and runs the SDK's serving loop with the window's
context set for everything that connection's requests do.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp.server.runner import serve_dual_era_loop
from mcp.shared.message import SessionMessage

from mtl_mcp.config import OUT_OF_FILES, RareWarning, Settings, raise_open_files_limit
from mtl_mcp.operations.retiring import forget_retiring
from mtl_mcp.operations.service import HELLO_MAX, version_tuple
from mtl_mcp.server.app import build_server
from mtl_mcp.server.calls import answer_call
from mtl_mcp.server.keeper import WINDOW, MemoryKeeper, Window
from mtl_mcp.server.service import (
    CHECK_SECONDS,
    MESSAGE_MAX,
    Claim,
    Door,
    Service,
    peer_uid,
)
from mtl_mcp.version import __version__

logger = logging.getLogger(__name__)
_GONE = (
    anyio.EndOfStream,
    anyio.IncompleteRead,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
)


def run_service(
    settings: Settings,
    held: Claim,
    idle_seconds: float,
    doors: Mapping[str, Door] | None = None,
    keeper: MemoryKeeper | None = None,
) -> None:
    """Serve every window from this process until idle, stopped or replaced; `held` is the
    data directory's claim, taken (cheaply) before this module's imports, and older releases'
    services retired (`retire_predecessors`). `doors` are other front doors the service
    runs, by the hello kind that asks for one (the CLI passes the dashboard's: the server
    layer does not import its siblings); `keeper`, the memory, if the caller made it (and
    started warming it) already."""
    logger.info(
        "serving %s (pid %d, version %s)", held.rendezvous.run_dir, os.getpid(), __version__
    )
    raise_open_files_limit()
    try:
        anyio.run(serve, Service(settings, held, idle_seconds, doors or {}), keeper)
    finally:
        held.release()
        held.listener.close()
        forget_retiring(held.rendezvous.home, os.getpid())  # if it was retiring


async def serve(service: Service, keeper: MemoryKeeper | None = None) -> None:
    """Accept connections until the service should exit; the memory is warmed at once."""
    keeper = keeper or MemoryKeeper(service.settings)
    server = build_server(service.settings, keeper=keeper)
    # The SDK's own in-process client reaches the low-level server the same way (an upstream
    # TODO makes it public); the serving loop is the public `serve_dual_era_loop`.
    lowlevel = server._lowlevel_server
    options = lowlevel.create_initialization_options()
    listener = await anyio.abc.SocketListener.from_socket(service.claim.listener)

    async def mcp_session(
        stream: anyio.abc.SocketStream, reader: BufferedByteReceiveStream
    ) -> None:
        inbound_send, inbound = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        outbound, outbound_receive = anyio.create_memory_object_stream[SessionMessage](0)

        async def pump_in() -> None:
            async with inbound_send:
                while True:
                    try:
                        line = await reader.receive_until(b"\n", MESSAGE_MAX)
                    except (*_GONE, anyio.DelimiterNotFound):
                        return
                    try:
                        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                    except ValueError as exc:  # the serving loop answers a parse error
                        await inbound_send.send(exc)
                        continue
                    await inbound_send.send(SessionMessage(message))

        async def pump_out() -> None:
            async with outbound_receive:
                async for item in outbound_receive:
                    text = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                    try:
                        await stream.send(text.encode() + b"\n")
                    except _GONE:
                        return

        async with anyio.create_task_group() as pumps:
            pumps.start_soon(pump_in)
            pumps.start_soon(pump_out)
            await serve_dual_era_loop(
                lowlevel, inbound, outbound, lifespan_state=state, init_options=options
            )
            pumps.cancel_scope.cancel()

    async def handle(stream: anyio.abc.SocketStream) -> None:
        service.connections += 1
        try:
            async with stream:
                await _converse(service, keeper, stream, mcp_session)
        except _GONE:
            pass  # the client left mid-hello: nothing to clean up
        except Exception:  # one broken connection must never take the service down
            logger.exception("a connection failed")
        finally:
            service.connections -= 1
            service.last_active = time.monotonic()

    async with (
        keeper.running(),
        lowlevel.lifespan(lowlevel) as state,  # one server state for every connection
        anyio.create_task_group() as tasks,
    ):
        keeper.start_warming()
        tasks.start_soon(_accept, listener, handle, tasks)
        while not service.should_exit():
            await anyio.sleep(CHECK_SECONDS)
        tasks.cancel_scope.cancel()
    logger.info("service exits (%s)", "stopped" if service.stopping else "idle or replaced")


async def _accept(
    listener: anyio.abc.SocketListener, handle: Any, tasks: anyio.abc.TaskGroup
) -> None:
    """`listener.serve`, but out of file descriptors it waits for some to be freed (and says
    so once a minute) rather than taking the service down."""
    starved = RareWarning(logger, "the service could not accept a connection")
    while True:
        try:
            stream = await listener.accept()
        except (OSError, anyio.BrokenResourceError) as exc:
            cause = exc if isinstance(exc, OSError) else exc.__cause__  # anyio wraps it
            if not isinstance(cause, OSError) or cause.errno not in OUT_OF_FILES:
                raise
            starved.note(f" ({cause.strerror})")
            await anyio.sleep(0.1)  # until its connections free some
            continue
        tasks.start_soon(handle, stream)


async def _converse(
    service: Service, keeper: MemoryKeeper, stream: anyio.abc.SocketStream, mcp_session: Any
) -> None:
    """The hello, then what the client asked for."""
    if service.claim.token is None:
        raw = stream.extra(anyio.abc.SocketAttribute.raw_socket)
        uid = peer_uid(raw)
        if uid is not None and uid != os.getuid():
            logger.warning("refused a connection from uid %d", uid)
            return
    reader = BufferedByteReceiveStream(stream)
    if service.claim.token is not None and not await _token_ok(reader, service.claim.token):
        return
    hello = json.loads(await reader.receive_until(b"\n", HELLO_MAX))
    if not isinstance(hello, dict):
        return
    kind = hello.get("kind")
    if refusal := _other_settings(service, kind, hello.get("fingerprint")):
        await _send(stream, refusal)
        return
    newer = version_tuple(str(hello.get("mtl-mcp", "0"))) > version_tuple(__version__)
    if kind == "mcp" and (service.retiring or newer):
        service.retire()  # a newer window: a newer service takes the socket and the lock now
        await _send(stream, {"ok": False, "retiring": True, "version": __version__})
        return
    told = hello.get("window")
    told = told if isinstance(told, dict) else {}
    window = Window(**{f.name: told.get(f.name) for f in fields(Window)})
    if kind == "mcp":
        await _send(stream, {"ok": True, "version": __version__, "pid": os.getpid()})
        WINDOW.set(window)
        service.windows += 1
        try:
            await mcp_session(stream, reader)
        finally:
            service.windows -= 1
    elif kind == "call":
        WINDOW.set(window)
        await _send(stream, await answer_call(keeper, hello.get("method"), hello.get("params")))
    elif isinstance(kind, str) and kind in service.doors:
        WINDOW.set(window)
        await service.doors[kind](keeper, stream, hello)
    elif kind == "status":
        await _send(stream, service.status())
    elif kind == "stop":
        service.stopping = True
        await _send(stream, {"ok": True, "version": __version__, "pid": os.getpid()})
    else:
        await _send(stream, {"ok": False, "error": f"unknown request kind {kind!r}"})


def _other_settings(service: Service, kind: Any, told: Any) -> dict[str, Any] | None:
    """The refusal of a hello from a client configured otherwise: "mcp" and "call" must
    carry the client's fingerprint; status and stop, sent to every service of a data
    directory, may leave it out. None if this service may answer."""
    own = service.claim.rendezvous.fingerprint
    if told == own or (told is None and kind in ("status", "stop")):
        return None
    key = service.claim.rendezvous.key
    logger.info("refused a %s hello from a client with other settings", kind)
    return {
        "ok": False,
        "mismatch": True,
        "version": __version__,
        "pid": os.getpid(),
        "error": f"this mtl-mcp service (pid {os.getpid()}, settings {key}) serves other "
        "settings than the client's (store, team pool, model, thresholds or distillation): "
        "the client needs a service of its own"
        if told is not None
        else "the hello carries no settings fingerprint: the client is of another mtl-mcp "
        "version; restart it",
    }


async def _token_ok(reader: BufferedByteReceiveStream, token: str) -> bool:
    import hmac

    line = json.loads(await reader.receive_until(b"\n", HELLO_MAX))
    supplied = str(line.get("token", "")) if isinstance(line, dict) else ""
    return hmac.compare_digest(supplied.encode(), token.encode())


async def _send(stream: anyio.abc.SocketStream, message: dict[str, Any]) -> None:
    await stream.send(json.dumps(message).encode() + b"\n")
