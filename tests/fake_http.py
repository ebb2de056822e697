"""What the fake model APIs share: an HTTP server on 127.0.0.1 in a thread, a context manager."""

from __future__ import annotations

import json
import socketserver
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Generic, Self, TypeVar


@dataclass
class RecordedRequest:
    """One request as a fake received it."""

    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    raw: bytes
    body: Any  # the parsed JSON body, or None if it was not JSON

    @property
    def text(self) -> str:
        """The raw body as text: handy for 'this string was never sent' assertions."""
        return self.raw.decode("utf-8", errors="replace")


Recorded = TypeVar("Recorded", bound=RecordedRequest)


class LoopbackServer(Generic[Recorded]):
    """Serves `handler_class()` on a free port of 127.0.0.1 until closed; `record` keeps each
    request, parsed into `request_class`, in `requests`."""

    request_class: type[Recorded]

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._closing = threading.Event()  # set on close: cuts scripted delays and hangs short
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def _handler_class(self) -> type[socketserver.BaseRequestHandler]:
        raise NotImplementedError

    def record(self, handler: BaseHTTPRequestHandler) -> Recorded:
        """Read the request `handler` is serving, keep it, and return it."""
        length = int(handler.headers.get("content-length") or 0)
        raw = handler.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {k.lower(): v for k, v in handler.headers.items()}
        request = self.request_class(handler.command, handler.path, headers, raw, body)
        with self._lock:
            self.requests.append(request)
        return request

    @property
    def origin(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def close(self) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def send(handler: BaseHTTPRequestHandler, status: int, data: bytes, kind: str) -> None:
    """Answer once and close: a client that hung up meanwhile is no error of the fake's."""
    handler.close_connection = True
    try:
        handler.send_response(status)
        handler.send_header("content-type", kind)
        handler.send_header("content-length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)
    except (BrokenPipeError, ConnectionResetError):
        pass


@dataclass
class Step:
    """One scripted agent answer: its text, then at most one tool (function) call."""

    text: str = ""
    call: tuple[str, Mapping[str, Any]] | None = None
    status: int = 200
    usage: tuple[int, int] | None = None  # (input, output) tokens reported, if not the fake's


AgentRequest = TypeVar("AgentRequest", bound=RecordedRequest)


class ScriptedAgent(LoopbackServer[AgentRequest]):
    """A fake model API that answers the agent's turns from a script of `Step`s, or of
    policies: functions of the request that answer with a Step until they return None."""

    def __init__(self) -> None:
        self._script: deque[Step | Callable[[AgentRequest], Step | None]] = deque()
        super().__init__()

    @property
    def agent_requests(self) -> list[AgentRequest]:
        with self._lock:
            return [r for r in self.requests if _is_agent_turn(r)]

    def reply_text(self, text: str) -> None:
        with self._lock:
            self._script.append(Step(text))

    def reply_call(self, name: str, arguments: Mapping[str, Any], *, text: str = "") -> None:
        """An answer that says `text` (if any), then calls the tool `name`."""
        with self._lock:
            self._script.append(Step(text, (name, arguments)))

    def reply_while(self, policy: Callable[[AgentRequest], Step | None]) -> None:
        """Answers computed from each turn's request (an agent's policy, as many turns and
        sessions as it takes), until `policy` returns None: then the script goes on."""
        with self._lock:
            self._script.append(policy)

    def _next(self, request: AgentRequest | None = None) -> Step:
        while True:
            with self._lock:
                if not self._script:
                    break
                head = self._script[0]
                if isinstance(head, Step):
                    return self._script.popleft()
            # Outside the lock: a policy may look at the requests recorded so far.
            if request is not None and (step := head(request)) is not None:
                return step
            with self._lock:
                if self._script and self._script[0] is head:
                    self._script.popleft()
        return Step("fake: no scripted response left", status=500)


def _is_agent_turn(request: object) -> bool:
    return bool(getattr(request, "is_agent_turn", False))
