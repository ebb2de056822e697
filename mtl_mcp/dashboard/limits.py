"""How many connections the dashboard keeps, and for how long: it lives inside the shared
service, and must never cost the service the file descriptors its windows and hooks need.

uvicorn alone accepts without limit and waits for a first request forever, and asyncio's
accept loop, once out of descriptors, logs a traceback per waiting connection: about 1,200
idle connections (no token needed) took a service with 1,024 open files down, its log 16 MB
the richer. So the dashboard accepts its own connections, one at a time:

- at most CONNECTIONS_MAX open at once (a browser opens 6 per host); one more is answered
  503 and closed at once, so it holds a descriptor for an instant;
- a connection must send a whole request, head and body, within HEAD_SECONDS of opening,
  or of the last answer, or it is closed (a slow-loris gets nowhere, nor does a body sent
  a byte at a time to the code's exchange, which is open before any session); an idle one
  between requests goes after KEEP_ALIVE_SECONDS; a head still incomplete past
  HEAD_BYTES_MAX is refused (the cookies other apps leave for 127.0.0.1 fit);
- what is refused, and what the HTTP parser rejects, is logged at most once per
  FLOOD_LOG_SECONDS, with a count: a flood is one line a minute, not a log that fills the
  disk.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import time
from collections.abc import Callable, Collection
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from mtl_mcp.config import OUT_OF_FILES, RareWarning

logger = logging.getLogger(__name__)

CONNECTIONS_MAX = 64
HEAD_SECONDS = 10.0
KEEP_ALIVE_SECONDS = 5
HEAD_BYTES_MAX = 64 * 1024
FLOOD_LOG_SECONDS = 60.0
_BUSY = json.dumps({"error": "the dashboard has too many connections open: try again"})
BUSY = (
    "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
    f"content-length: {len(_BUSY)}\r\nconnection: close\r\n\r\n{_BUSY}"
).encode()


class OncePerMinute(logging.Filter):
    """Lets each message of a logger through at most once per FLOOD_LOG_SECONDS (uvicorn's
    "Invalid HTTP request received.", one per bad request)."""

    def __init__(self) -> None:
        super().__init__()
        self.said: dict[str, float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        now = time.monotonic()
        if now - self.said.get(str(record.msg), -FLOOD_LOG_SECONDS) < FLOOD_LOG_SECONDS:
            return False
        self.said[str(record.msg)] = now
        return True


def quiet_parser_log() -> None:
    """Rate-limit uvicorn's per-request warnings (once per process)."""
    parser_log = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, OncePerMinute) for f in parser_log.filters):
        parser_log.addFilter(OncePerMinute())


class TimedH11(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with a deadline for receiving each request."""

    head_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if not self._receiving():
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _receiving(self) -> bool:
        """Whether a request is still to come in whole: its head, or the rest of its body
        (an answer already given does not end the wait for a body it left unread)."""
        cycle = self.cycle
        return cycle is None or cycle.response_complete or cycle.more_body

    def _arm(self) -> None:
        self._disarm()
        self.head_deadline = self.loop.call_later(HEAD_SECONDS, self._too_slow)

    def _disarm(self) -> None:
        if self.head_deadline is not None:
            self.head_deadline.cancel()
            self.head_deadline = None

    def _too_slow(self) -> None:
        self.head_deadline = None
        if self._receiving() and not self.transport.is_closing():
            self.transport.close()


async def accept(
    sock: socket.socket, protocol: Callable[[], asyncio.Protocol], open_now: Collection[Any]
) -> None:
    """Accept connections on `sock` for `protocol` until cancelled, at most CONNECTIONS_MAX
    of them open at once (`open_now`: the server's live connections)."""
    loop = asyncio.get_running_loop()
    refused = RareWarning(
        logger, f"the dashboard refused connections beyond {CONNECTIONS_MAX}", FLOOD_LOG_SECONDS
    )
    starved = RareWarning(logger, "the dashboard could not accept a connection", FLOOD_LOG_SECONDS)
    while True:
        try:
            conn, _ = await loop.sock_accept(sock)
        except ConnectionError:
            continue  # the client left before it was accepted
        except OSError as exc:
            if exc.errno not in OUT_OF_FILES:
                raise
            starved.note(f" ({exc.strerror})")
            await asyncio.sleep(0.1)  # until other connections free some
            continue
        if len(open_now) >= CONNECTIONS_MAX:
            refused.note()
            _refuse(conn)
            continue
        try:
            await loop.connect_accepted_socket(protocol, conn)
        except OSError:
            conn.close()


def _refuse(conn: socket.socket) -> None:
    try:
        conn.send(BUSY)
    except OSError:
        pass
    finally:
        conn.close()
