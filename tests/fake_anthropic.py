"""A scripted fake of the Anthropic Messages API, for the real SDK and the real Claude Code.

    with FakeAnthropic() as fake:
        fake.reply_json({"outcome": "success", "reason": "tests pass"})
        fake.reply_status(529, times=2)          # then two overloaded errors (SDK retries them)
        fake.reply_json(DistilledInsights(...))  # pydantic models are dumped for you
        fake.reply_tool("ToolSearch", {"query": "select:mcp__mtl-mcp__recall_insights"})
        fake.reply_with(lambda request: ...)     # a reply computed from the request
        fake.reply_while(agent)                  # computed replies until `agent` returns None
        client = anthropic.Anthropic(api_key="sk-ant-test", base_url=fake.base_url, max_retries=2)
        ...
        fake.requests[0].body["system"]          # every request is recorded, parsed

Each `POST /v1/messages` takes the next scripted reply, in order, answered as JSON or, when
the request asks to stream (as Claude Code always does), as Server-Sent Events. With nothing
left in the script the fake answers 500 with `x-should-retry: false` and a body saying so,
so a test that makes an unexpected call fails loudly instead of hanging. Claude Code's other
calls get small plausible answers (`HEAD /api/hello`, token counting, the model list).
Only 127.0.0.1 is used.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from pydantic import BaseModel

from tests import fake_http
from tests.fake_http import LoopbackServer

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


class RecordedRequest(fake_http.RecordedRequest):
    @property
    def system(self) -> str:
        """The system prompt as one string, whether it was sent as a string or as blocks."""
        system = self.body.get("system", "")
        if isinstance(system, str):
            return system
        return "\n".join(block.get("text", "") for block in system)

    @property
    def is_message(self) -> bool:
        """A Messages request (not token counting, not a probe)."""
        return self.method == "POST" and self.path.split("?")[0].rstrip("/") == "/v1/messages"

    def tool_results(self) -> list[dict[str, Any]]:
        """Every tool_result block in the request's messages, oldest first."""
        found = []
        for message in self.body.get("messages", []):
            content = message.get("content")
            if isinstance(content, list):
                found += [b for b in content if b.get("type") == "tool_result"]
        return found

    @property
    def tool_names(self) -> list[str]:
        """The names of the tools the request offers the model."""
        return [tool.get("name", "") for tool in self.body.get("tools", [])]

    def _text(self, role: str | None) -> str:
        parts: list[str] = []
        for message in self.body.get("messages", []):
            if role is not None and message.get("role") != role:
                continue
            content = message.get("content")
            if isinstance(content, str):
                parts.append(content)
            else:
                parts.extend(block.get("text", "") for block in content)
        return "\n".join(parts)

    @property
    def messages_text(self) -> str:
        """Every text of every message, whatever its role (Claude Code puts hook output in a
        `system` message), joined."""
        return self._text(None)

    @property
    def user_text(self) -> str:
        """Every text block of every user message, joined."""
        return self._text("user")


@dataclass
class Reply:
    """One scripted HTTP response."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds to wait before answering (a client timeout test)


@dataclass
class While:
    """Replies computed from each request, until `compute` returns None for one."""

    compute: Callable[[RecordedRequest], dict[str, Any] | None]


# A scripted turn: a raw HTTP reply, a Messages-API body, or a function of the request.
Turn = Reply | dict[str, Any] | Callable[[RecordedRequest], dict[str, Any]] | While


class FakeAnthropic(LoopbackServer[RecordedRequest]):
    """A local Messages API with a script of replies; a context manager."""

    request_class = RecordedRequest

    def __init__(self, *, model: str = "claude-haiku-5-5") -> None:
        self.model = model
        self._script: deque[Turn] = deque()
        super().__init__()
        self._counter = 0

    # -- lifecycle -----------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return self.origin

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

    @property
    def message_requests(self) -> list[RecordedRequest]:
        """The Messages requests received so far (probes and token counts left out)."""
        with self._lock:
            return [r for r in self.requests if r.is_message]

    def add(self, reply: Turn, *, times: int = 1) -> None:
        with self._lock:
            self._script.extend([reply] * times)

    def message(
        self,
        text: str | None = None,
        *,
        blocks: list[dict[str, Any]] | None = None,
        input_tokens: int = 100,
        output_tokens: int = 50,
        stop_reason: str = "end_turn",
    ) -> dict[str, Any]:
        """A Messages-API response body: one text block, or the given content blocks."""
        self._counter += 1
        return {
            "id": f"msg_fake_{self._counter:04d}",
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": blocks if blocks is not None else [{"type": "text", "text": text or ""}],
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
        }

    def tool_use(
        self,
        name: str,
        tool_input: Mapping[str, Any],
        *,
        input_tokens: int = 100,
        output_tokens: int = 50,
    ) -> dict[str, Any]:
        """A response body in which the model calls tool `name` with `tool_input`."""
        self._counter += 1
        block = {
            "type": "tool_use",
            "id": f"toolu_fake_{self._counter:04d}",
            "name": name,
            "input": dict(tool_input),
        }
        return self.message(
            blocks=[block],
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            stop_reason="tool_use",
        )

    def reply_tool(self, name: str, tool_input: Mapping[str, Any], **usage: int) -> None:
        """The model calls tool `name` with `tool_input` (`usage`: as for `tool_use`)."""
        self.add(self.tool_use(name, tool_input, **usage))

    def reply_with(self, compute: Callable[[RecordedRequest], dict[str, Any]]) -> None:
        """A reply computed from the request it answers (build it with `message`)."""
        self.add(compute)

    def reply_while(self, compute: Callable[[RecordedRequest], dict[str, Any] | None]) -> None:
        """Replies computed from each request (an agent's turns, as many as it takes), until
        `compute` returns None: that request gets the next scripted reply."""
        self.add(While(compute))

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
        # As a body, so a streaming request gets it as events; a delayed one as raw bytes.
        delayed = Reply(200, _json_bytes(body), {"content-type": "application/json"}, delay)
        self.add(delayed if delay else body)

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

    def _next(self, request: RecordedRequest) -> Turn:
        while True:
            with self._lock:
                if not self._script:
                    break
                head = self._script[0]
                if not isinstance(head, While):
                    return self._script.popleft()
            # Outside the lock: `compute` may look at the fake's recorded requests.
            if (computed := head.compute(request)) is not None:
                return computed
            with self._lock:
                if self._script and self._script[0] is head:
                    self._script.popleft()
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
            protocol_version = "HTTP/1.1"

            def _send(self, reply: Reply) -> None:
                try:
                    self.send_response(reply.status)
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("content-length", str(len(reply.body)))
                    self.send_header("request-id", f"req_fake_{len(fake.requests)}")
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(reply.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

            def do_HEAD(self) -> None:  # Claude Code's connectivity probe
                fake.record(self)
                self._send(Reply(200, b""))

            def do_GET(self) -> None:  # the model list, and anything else a client looks up
                fake.record(self)
                models = {"data": [], "has_more": False, "first_id": None, "last_id": None}
                self._send(Reply(200, _json_bytes(models), {"content-type": "application/json"}))

            def do_POST(self) -> None:
                request = fake.record(self)
                if request.path.split("?")[0].endswith("/count_tokens"):
                    counted = {"input_tokens": max(1, len(request.raw) // 4)}
                    self._send(
                        Reply(200, _json_bytes(counted), {"content-type": "application/json"})
                    )
                    return
                turn = fake._next(request)
                if callable(turn):
                    turn = turn(request)
                if isinstance(turn, Reply):
                    if turn.delay and fake._closing.wait(turn.delay):
                        return
                    self._send(turn)
                elif isinstance(request.body, dict) and request.body.get("stream"):
                    self._stream(turn)
                else:
                    self._send(Reply(200, _json_bytes(turn), {"content-type": "application/json"}))

            def _stream(self, message: dict[str, Any]) -> None:
                """The message as the Server-Sent Events of a streaming response."""
                events = [("message_start", {"message": {**message, "content": []}})]
                for index, block in enumerate(message["content"]):
                    if block["type"] == "tool_use":
                        start = {**block, "input": {}}
                        delta = {
                            "type": "input_json_delta",
                            "partial_json": json.dumps(block["input"]),
                        }
                    else:
                        start = {"type": "text", "text": ""}
                        delta = {"type": "text_delta", "text": block["text"]}
                    events += [
                        ("content_block_start", {"index": index, "content_block": start}),
                        ("content_block_delta", {"index": index, "delta": delta}),
                        ("content_block_stop", {"index": index}),
                    ]
                stop = {"stop_reason": message["stop_reason"], "stop_sequence": None}
                events += [
                    ("message_delta", {"delta": stop, "usage": message["usage"]}),
                    ("message_stop", {}),
                ]
                payload = "".join(
                    f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n"
                    for name, data in events
                ).encode("utf-8")
                self.close_connection = True
                self._send(Reply(200, payload, {"content-type": "text/event-stream"}))

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep test output clean

        return Handler


def _json_bytes(data: Any) -> bytes:
    return json.dumps(data).encode("utf-8")
