"""A wall-clock deadline and a byte cap for every answer a backend reads over HTTP.

httpx's timeouts bound each read, not a request: a server that sends a byte every few
seconds never trips them, and nothing bounds the size of what it sends. So every socket an
`httpx2.Client` of ours opens goes through `_LimitedStream`, which gives each connect, read
and write only the time left before the deadline of the call in progress (`limited`), and
stops reading once the call has received its cap. The same client serves the `openai`
backend's endpoint and the Anthropic SDK (`http_client=`), whose retries then share the
call's deadline too.

The streams come from httpcore's public NetworkBackend interface; httpx2 builds its
connection pools without a way to pass one, so `limit_client` sets it on each pool the
client holds (its transport and any proxy mounts). A test holds that to account.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import ssl

    import httpcore2
    import httpx2

logger = logging.getLogger(__name__)

ANSWER_MAX_BYTES = 8 * 1024 * 1024  # far beyond any answer or model list; a 400 MB one is not
_local = threading.local()


@dataclass
class Allowance:
    """What one call may still take: until `deadline` (time.monotonic()), `max_bytes` in all.
    `tripped` says which limit stopped it, if one did."""

    deadline: float
    max_bytes: int
    received: int = 0
    tripped: Literal["deadline", "size"] | None = field(default=None)

    def left(self, timeout: float | None) -> float:
        """The time an operation may take: `timeout`, within what is left of the call."""
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            self.tripped = "deadline"
            import httpcore2

            raise httpcore2.ReadTimeout("the call's deadline passed")
        return remaining if timeout is None else min(timeout, remaining)

    def count(self, size: int) -> None:
        self.received += size
        if self.received > self.max_bytes:
            self.tripped = "size"
            import httpcore2

            raise httpcore2.ReadError(f"the answer is larger than {self.max_bytes:,} bytes")


@contextlib.contextmanager
def limited(seconds: float, max_bytes: int = ANSWER_MAX_BYTES) -> Iterator[Allowance]:
    """Within the block, this thread's requests through a limited client must end within
    `seconds` in all and read at most `max_bytes`."""
    allowance = Allowance(time.monotonic() + seconds, max_bytes)
    outer = getattr(_local, "allowance", None)
    _local.allowance = allowance
    try:
        yield allowance
    finally:
        _local.allowance = outer


def _current() -> Allowance | None:
    return getattr(_local, "allowance", None)


def _network_classes() -> tuple[type, type]:
    """The stream and backend classes, made once httpcore2 is imported (it is heavy)."""
    import httpcore2

    class LimitedStream(httpcore2.NetworkStream):
        def __init__(self, inner: httpcore2.NetworkStream) -> None:
            self._inner = inner

        def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            allowance = _current()
            if allowance is None:
                return self._inner.read(max_bytes, timeout)
            left = allowance.left(timeout)
            try:
                data = self._inner.read(max_bytes, left)
            except httpcore2.ReadTimeout:
                if timeout is None or left < timeout:
                    allowance.tripped = "deadline"
                raise
            allowance.count(len(data))
            return data

        def write(self, buffer: bytes, timeout: float | None = None) -> None:
            allowance = _current()
            self._inner.write(buffer, allowance.left(timeout) if allowance else timeout)

        def close(self) -> None:
            self._inner.close()

        def start_tls(
            self,
            ssl_context: ssl.SSLContext,
            server_hostname: str | None = None,
            timeout: float | None = None,
        ) -> httpcore2.NetworkStream:
            allowance = _current()
            left = allowance.left(timeout) if allowance else timeout
            return LimitedStream(self._inner.start_tls(ssl_context, server_hostname, left))

        def get_extra_info(self, info: str) -> Any:
            return self._inner.get_extra_info(info)

    class LimitedBackend(httpcore2.NetworkBackend):
        def __init__(self, inner: httpcore2.NetworkBackend) -> None:
            self._inner = inner

        def connect_tcp(
            self,
            host: str,
            port: int,
            timeout: float | None = None,
            local_address: str | None = None,
            socket_options: Iterable[Any] | None = None,
        ) -> httpcore2.NetworkStream:
            allowance = _current()
            left = allowance.left(timeout) if allowance else timeout
            inner = self._inner.connect_tcp(host, port, left, local_address, socket_options)
            return LimitedStream(inner)

        def connect_unix_socket(
            self,
            path: str,
            timeout: float | None = None,
            socket_options: Iterable[Any] | None = None,
        ) -> httpcore2.NetworkStream:
            allowance = _current()
            left = allowance.left(timeout) if allowance else timeout
            return LimitedStream(self._inner.connect_unix_socket(path, left, socket_options))

        def sleep(self, seconds: float) -> None:
            self._inner.sleep(seconds)

    return LimitedStream, LimitedBackend


_classes: tuple[type, type] | None = None


def limit_client(client: httpx2.Client) -> httpx2.Client:
    """`client`, with every connection it opens held to the allowance of the call in
    progress (`limited`); outside such a call, connections behave as before."""
    global _classes
    if _classes is None:
        _classes = _network_classes()
    backend_class = _classes[1]
    transports = [client._transport, *client._mounts.values()]
    pools = [getattr(t, "_pool", None) for t in transports if t is not None]
    for pool in filter(None, pools):
        inner = getattr(pool, "_network_backend", None)
        if inner is None:
            logger.warning("httpx2 changed: answers are read without a deadline or cap")
            continue
        if not isinstance(inner, backend_class):
            pool._network_backend = backend_class(inner)
    return client
