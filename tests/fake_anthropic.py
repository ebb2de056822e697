"""A scripted fake of the Anthropic Messages API for tests that drive the real SDK over HTTP.

    with FakeAnthropic() as fake:
        fake.reply_json({"outcome": "success", "reason": "tests pass"})
        fake.reply_status(529, times=2)          # then two overloaded errors (SDK retries them)
        fake.reply_json(DistilledInsights(...))  # pydantic models are dumped for you
        client = anthropic.Anthropic(api_key="sk-ant-test", base_url=fake.base_url, max_retries=2)
        ...
        fake.requests[0].body["system"]          # every request is recorded, parsed

Each request to `POST /v1/messages` takes the next scripted reply, in order. With nothing left
in the script the fake answers 500 with `x-should-retry: false` and a body saying so, so a
test that makes an unexpected call fails loudly instead of hanging. Only 127.0.0.1 is used.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from pydantic import BaseModel

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


@dataclass
class RecordedRequest:
    """One request as the fake received it."""

    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    raw: bytes
    body: Any  # the parsed JSON body, or None if it was not JSON

    @property
    def text(self) -> str:
        """The raw body as text: handy for 'this string was never sent' assertions."""
        return self.raw.decode("utf-8", errors="replace")

    @property
    def system(self) -> str:
        """The system prompt as one string, whether it was sent as a string or as blocks."""
        system = self.body.get("system", "")
        if isinstance(system, str):
            return system
        return "\n".join(block.get("text", "") for block in system)

    @property
    def user_text(self) -> str:
        """Every text block of every user message, joined."""
        parts: list[str] = []
        for message in self.body.get("messages", []):
            if message.get("role") != "user":
                continue
            content = message.get("content")
            if isinstance(content, str):
                parts.append(content)
            else:
                parts.extend(block.get("text", "") for block in content)
        return "\n".join(parts)


@dataclass
class Reply:
    """One scripted HTTP response."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds to wait before answering (a client timeout test)


class FakeAnthropic:
    """A local Messages API with a script of replies; a context manager."""

    def __init__(self, *, model: str = "claude-haiku-5-5") -> None:
        self.model = model
        self.requests: list[RecordedRequest] = []
        self._script: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        self._counter = 0

    # -- lifecycle -----------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def close(self) -> None:
        self._closing.set()  # cut scripted delays short
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeAnthropic:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- scripting -----------------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Scripted replies not yet used."""
        with self._lock:
            return len(self._script)

    def reset(self) -> None:
        """Forget recorded requests and unused scripted replies."""
        with self._lock:
            self._script.clear()
            self.requests.clear()

    def add(self, reply: Reply, *, times: int = 1) -> None:
        with self._lock:
            self._script.extend([reply] * times)

    def message(
        self,
        text: str,
        *,
        input_tokens: int = 100,
        output_tokens: int = 50,
        stop_reason: str = "end_turn",
    ) -> dict[str, Any]:
        """A Messages-API response body with one text block."""
        self._counter += 1
        return {
            "id": f"msg_fake_{self._counter:04d}",
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
        }

    def reply_json(
        self,
        payload: BaseModel | Mapping[str, Any],
        *,
        input_tokens: int = 100,
        output_tokens: int = 50,
        stop_reason: str = "end_turn",
        delay: float = 0.0,
    ) -> None:
        """A structured-output answer: `payload` as JSON text in the first text block."""
        data = payload.model_dump(mode="json") if isinstance(payload, BaseModel) else payload
        self.reply_text(
            json.dumps(data),
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            stop_reason=stop_reason,
            delay=delay,
        )

    def reply_text(
        self,
        text: str,
        *,
        input_tokens: int = 100,
        output_tokens: int = 50,
        stop_reason: str = "end_turn",
        delay: float = 0.0,
    ) -> None:
        """An answer whose text block holds `text` verbatim (e.g. prose instead of JSON)."""
        body = self.message(
            text, input_tokens=input_tokens, output_tokens=output_tokens, stop_reason=stop_reason
        )
        self.add(Reply(200, _json_bytes(body), {"content-type": "application/json"}, delay))

    def reply_status(
        self,
        status: int,
        *,
        times: int = 1,
        message: str | None = None,
        should_retry: bool | None = None,
    ) -> None:
        """An API error (429, 529, 500, 401...) with headers that make SDK retries instant."""
        body = {
            "type": "error",
            "error": {
                "type": _ERROR_TYPES.get(status, "api_error"),
                "message": message or f"fake error {status}",
            },
        }
        headers = {"content-type": "application/json", "retry-after-ms": "1"}
        if should_retry is not None:
            headers["x-should-retry"] = "true" if should_retry else "false"
        self.add(Reply(status, _json_bytes(body), headers), times=times)

    def reply_delay(self, seconds: float, *, times: int = 1) -> None:
        """Answer only after `seconds` (longer than the client's timeout, in timeout tests)."""
        self.add(
            Reply(
                200,
                _json_bytes(self.message('{"late": true}')),
                {"content-type": "application/json"},
                seconds,
            ),
            times=times,
        )

    def reply_malformed(self, *, times: int = 1) -> None:
        """A 200 whose JSON body is cut off mid-way."""
        self.add(
            Reply(200, b'{"id": "msg_broken", "type": "mess', {"content-type": "application/json"}),
            times=times,
        )

    # -- serving ---------------------------------------------------------------------------

    def _next(self) -> Reply:
        with self._lock:
            if self._script:
                return self._script.popleft()
        body = {
            "type": "error",
            "error": {"type": "api_error", "message": "fake: no scripted response left"},
        }
        return Reply(
            500, _json_bytes(body), {"content-type": "application/json", "x-should-retry": "false"}
        )

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body: Any = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                headers = {k.lower(): v for k, v in self.headers.items()}
                with fake._lock:
                    fake.requests.append(RecordedRequest("POST", self.path, headers, raw, body))
                reply = fake._next()
                if reply.delay and fake._closing.wait(reply.delay):
                    return
                try:
                    self.send_response(reply.status)
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("content-length", str(len(reply.body)))
                    self.send_header("request-id", f"req_fake_{len(fake.requests)}")
                    self.end_headers()
                    self.wfile.write(reply.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep test output clean

        return Handler


def _json_bytes(data: Any) -> bytes:
    return json.dumps(data).encode("utf-8")
