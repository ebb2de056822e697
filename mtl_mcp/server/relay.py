"""The stdio relay: a client window's `mtl-mcp serve`, piping MCP to the shared service.

It imports only the standard library (a window costs ~10 MB and starts in milliseconds),
connects to the service (starting it if none runs), tells it the window's context, then
copies newline-delimited JSON-RPC both ways. It reads every line it forwards, for one
reason: if the service dies mid-session (kill -9, OOM, an upgrade), the relay answers the
requests in flight with a clear error, starts or finds a service again and replays the
session's `initialize` handshake there, so the window's next call just works.
"""

from __future__ import annotations

import json
import logging
import os
import selectors
import socket
from typing import Any

from mtl_mcp.config import Settings
from mtl_mcp.operations.service import ServiceUnavailable, ensure_service, window_of
from mtl_mcp.untrusted import json_loads

logger = logging.getLogger(__name__)

CHUNK = 1 << 16
REPLAY_PREFIX = "mtl-mcp-relay-replay-"
STOPPED = (
    "the mtl-mcp memory service stopped while answering this request, so it was not "
    "completed; the service restarts by itself: retry the call"
)
UNAVAILABLE = "the mtl-mcp memory service cannot be reached ({why}); retry in a moment"


class Relay:
    """One window's session: stdin/stdout on one side, the service's socket on the other."""

    def __init__(self, settings: Settings, sock: socket.socket) -> None:
        self.settings = settings
        self.sock: socket.socket | None = sock
        self.window = window_of(os.environ, "stdio")
        self.in_flight: dict[Any, str] = {}  # request id -> method, client to service
        self.handshake: list[bytes] = []  # `initialize` and `notifications/initialized`
        self.replays = 0
        self._why = "no service"  # why the last attempt to reach one failed
        self._from_client = b""
        self._from_service = b""

    # -- the two directions ------------------------------------------------------------------

    def client_lines(self, data: bytes) -> None:
        """Forward complete lines from the client to the service, noting what needs an answer."""
        self._from_client += data
        *lines, self._from_client = self._from_client.split(b"\n")
        for line in lines:
            if line.strip():
                self._client_line(line)

    def _client_line(self, line: bytes) -> None:
        messages = _messages(line)
        for message in messages:
            if "method" in message and "id" in message:  # answered, or failed, before it ends
                self.in_flight[_key(message["id"])] = message["method"]
        if self.sock is None and not self._reconnect():
            self._refuse(messages)
            return
        assert self.sock is not None
        try:
            self.sock.sendall(line + b"\n")
        except OSError:
            self.service_lost()
            return
        if any(m.get("method") in ("initialize", "notifications/initialized") for m in messages):
            self.handshake.append(line)  # replayed to a new service, after this one is done

    def service_lines(self, data: bytes) -> None:
        """Forward complete lines from the service to the client, settling answered requests."""
        self._from_service += data
        *lines, self._from_service = self._from_service.split(b"\n")
        for line in lines:
            if not line.strip():
                continue
            replayed = False
            for message in _messages(line):
                if "method" not in message and "id" in message:
                    key = _key(message["id"])
                    replayed = isinstance(key, str) and key.startswith(REPLAY_PREFIX)
                    self.in_flight.pop(key, None)
            if not replayed:  # the answer to a replayed handshake: the client has its own
                write_out(line + b"\n")

    # -- losing and finding the service ------------------------------------------------------

    def service_lost(self) -> None:
        """The service went away: answer what was in flight, so the window never hangs."""
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        self._from_service = b""
        for key, method in list(self.in_flight.items()):
            write_out(_failure(key, method, STOPPED))
        self.in_flight.clear()
        logger.warning("the service went away; the next request starts or finds another")

    def _reconnect(self) -> bool:
        try:
            self.sock, _ = ensure_service(self.settings, "mcp", window=self.window)
        except ServiceUnavailable as exc:
            self._why = str(exc)
            return False
        try:
            for line in self.handshake:
                message = json.loads(line)
                if message.get("method") == "initialize":
                    self.replays += 1
                    message["id"] = f"{REPLAY_PREFIX}{self.replays}"
                    line = json.dumps(message).encode()
                self.sock.sendall(line + b"\n")
        except OSError as exc:  # the new service went away at once
            self.sock.close()
            self.sock = None
            self._why = str(exc)
            return False
        logger.info("reconnected to the service and replayed the handshake")
        return True

    def _refuse(self, messages: list[dict[str, Any]]) -> None:
        """No service: answer the requests among `messages` with why, at once."""
        for message in messages:
            if "method" in message and "id" in message:
                key = _key(message["id"])
                self.in_flight.pop(key, None)
                write_out(_failure(key, message["method"], UNAVAILABLE.format(why=self._why)))

    # -- the loop ----------------------------------------------------------------------------

    def run(self) -> None:
        """Pipe until the client closes stdin."""
        selector: selectors.BaseSelector = selectors.DefaultSelector()
        try:
            selector.register(0, selectors.EVENT_READ, "client")
        except PermissionError:  # a regular file or /dev/null: epoll refuses it, select not
            selector = selectors.SelectSelector()
            selector.register(0, selectors.EVENT_READ, "client")
        watched: socket.socket | None = None
        while True:
            if self.sock is not watched:  # a new connection after a restart, or none
                if watched is not None:
                    selector.unregister(watched)
                if self.sock is not None:
                    selector.register(self.sock, selectors.EVENT_READ, "service")
                watched = self.sock
            for key, _ in selector.select():
                if key.data == "client":
                    data = os.read(0, CHUNK)
                    if not data:
                        return  # the window closed: the session is over
                    self.client_lines(data)
                else:
                    try:
                        data = self.sock.recv(CHUNK) if self.sock is not None else b""
                    except OSError:
                        data = b""
                    if data:
                        self.service_lines(data)
                    else:
                        self.service_lost()


def _key(request_id: Any) -> Any:
    """A request id as a dict key (JSON-RPC ids are strings or numbers)."""
    return request_id if isinstance(request_id, str | int | float) else json.dumps(request_id)


def _messages(line: bytes) -> list[dict[str, Any]]:
    """The JSON-RPC messages on one line (a batch is a list); nothing for garbage."""
    try:
        parsed = json_loads(line)  # a model's tool arguments may nest without end
    except ValueError:
        return []
    items = parsed if isinstance(parsed, list) else [parsed]
    return [item for item in items if isinstance(item, dict)]


def _failure(request_id: Any, method: str, why: str) -> bytes:
    """An answer the client can act on: a tool error for a tool call, else a JSON-RPC error."""
    if method == "tools/call":
        answer: dict[str, Any] = {
            "result": {"content": [{"type": "text", "text": why}], "isError": True}
        }
    else:
        answer = {"error": {"code": -32603, "message": why}}
    return (json.dumps({"jsonrpc": "2.0", "id": request_id, **answer}) + "\n").encode()


def write_out(data: bytes) -> None:
    """All of `data` to stdout, the MCP wire."""
    view = memoryview(data)
    while view:
        written = os.write(1, view)
        view = view[written:]


def relay(settings: Settings) -> bool:
    """Serve this window through the shared service; False if it cannot be used (the
    caller then serves in-process)."""
    window = window_of(os.environ, "stdio")
    try:
        sock, _ = ensure_service(settings, "mcp", window=window)
    except ServiceUnavailable as exc:
        logger.warning("%s", exc)
        return False
    Relay(settings, sock).run()
    return True
