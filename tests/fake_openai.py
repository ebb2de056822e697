"""A scripted fake of the OpenAI Responses API, as the real Codex CLI calls it.

    with FakeOpenAI() as fake:
        fake.reply_json({"outcome": "success", "reason": "tests pass"}, input_tokens=900)
        fake.reply_status(500)                # an HTTP error
        fake.reply_text("not json at all")    # a streamed answer, verbatim
        fake.reply_hang()                     # headers never come (Codex then waits for ever)
        fake.reply_call("exec_command", {"cmd": "ls"}, text="First I will ...")  # a tool call
        ...  # run codex with a provider whose base_url is fake.base_url
        fake.response_requests[0].body["text"]["format"]   # the schema Codex sent

Each `POST .../responses` takes the next scripted reply, streamed as the Server-Sent Events
Codex reads (`response.created` ... `response.output_item.done`, `response.completed` with
the usage). With nothing left in the script it answers 500, so an unexpected call fails
loudly. Other requests (Codex's model list) get small plausible answers. Only 127.0.0.1 is
used. Adapted from the research fake of the Codex CLI report; stdlib only.
"""

from __future__ import annotations

import itertools
import json
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests import fake_http
from tests.fake_http import LoopbackServer

_ids = itertools.count(1)


class RecordedRequest(fake_http.RecordedRequest):
    def input_texts(self, role: str) -> list[str]:
        """The text of every `input` message with `role` (developer, user), in order."""
        texts = []
        for item in self.body.get("input", []):
            if item.get("role") == role and isinstance(item.get("content"), list):
                texts += [part.get("text", "") for part in item["content"]]
        return texts


@dataclass
class Step:
    """One scripted answer: 'text' (streamed), 'status' (an HTTP error) or 'hang'."""

    kind: str
    text: str = ""
    status: int = 200
    usage: Mapping[str, Any] | None = None
    call: tuple[str, Mapping[str, Any]] | None = None  # a function call after the text


class FakeOpenAI(LoopbackServer[RecordedRequest]):
    """A local Responses API with a script of replies; a context manager."""

    request_class = RecordedRequest

    def __init__(self) -> None:
        self._script: deque[Step] = deque()
        super().__init__()

    @property
    def base_url(self) -> str:
        return self.origin + "/v1"

    # -- scripting -----------------------------------------------------------------------

    @property
    def response_requests(self) -> list[RecordedRequest]:
        """The model requests received so far (POST .../responses)."""
        with self._lock:
            return [
                r
                for r in self.requests
                if r.method == "POST" and r.path.split("?")[0].endswith("/responses")
            ]

    def reply_text(
        self, text: str, *, input_tokens: int = 1000, output_tokens: int = 50, cached: int = 0
    ) -> None:
        """A streamed answer whose message text is `text`, with the given usage."""
        usage = {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens,
        }
        with self._lock:
            self._script.append(Step("text", text=text, usage=usage))

    def reply_call(self, name: str, arguments: Mapping[str, Any], *, text: str = "") -> None:
        """A streamed answer that says `text` (if any), then calls the tool `name`."""
        usage = {"input_tokens": 1000, "output_tokens": 50, "total_tokens": 1050}
        usage |= {"input_tokens_details": {"cached_tokens": 0}}
        usage |= {"output_tokens_details": {"reasoning_tokens": 0}}
        with self._lock:
            self._script.append(Step("text", text=text, usage=usage, call=(name, arguments)))

    def reply_json(self, payload: Mapping[str, Any], **usage: int) -> None:
        """A structured-output answer: `payload` as the message's JSON text."""
        self.reply_text(json.dumps(payload), **usage)

    def reply_status(self, status: int, *, times: int = 1) -> None:
        """An HTTP error answer."""
        with self._lock:
            self._script.extend([Step("status", status=status)] * times)

    def reply_hang(self) -> None:
        """Accept the request and never send the response headers."""
        with self._lock:
            self._script.append(Step("hang"))

    def _next(self) -> Step:
        with self._lock:
            if self._script:
                return self._script.popleft()
        return Step("status", status=500, text="fake: no scripted response left")

    # -- serving ---------------------------------------------------------------------------

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _json(self, status: int, data: Any) -> None:
                payload = json.dumps(data).encode("utf-8")
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_GET(self) -> None:  # Codex refreshes its model list; none is fine
                fake.record(self)
                self._json(200, {"object": "list", "data": [], "models": []})

            def do_POST(self) -> None:
                request = fake.record(self)
                if not request.path.split("?")[0].endswith("/responses"):
                    self._json(404, {"error": {"message": f"fake: no route {request.path}"}})
                    return
                step = fake._next()
                if step.kind == "hang":
                    fake._closing.wait()
                    return
                if step.kind == "status":
                    message = step.text or f"fake error {step.status}"
                    self._json(step.status, {"error": {"message": message, "type": "fake"}})
                    return
                model = (request.body or {}).get("model", "fake-model")
                self._stream(_events(step, model))

            def _stream(self, events: list[tuple[str, dict[str, Any]]]) -> None:
                payload = "".join(
                    f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n"
                    for name, data in events
                ).encode("utf-8")
                self.close_connection = True
                try:
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("content-length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep test output clean

        return Handler


def _events(step: Step, model: str) -> list[tuple[str, dict[str, Any]]]:
    """The Responses-API event sequence of one streamed answer: its text, then its call."""
    response_id, message_id = f"resp_fake_{next(_ids)}", f"msg_fake_{next(_ids)}"
    response = {"id": response_id, "object": "response", "status": "in_progress"}
    response |= {"model": model, "output": []}
    part = {"type": "output_text", "text": step.text, "annotations": []}
    where = {"item_id": message_id, "output_index": 0, "content_index": 0}
    item = {"id": message_id, "type": "message", "role": "assistant", "content": [part]}
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"response": response}),
        ("response.in_progress", {"response": response}),
    ]
    output: list[dict[str, Any]] = []
    if step.text or step.call is None:
        events += [
            (
                "response.output_item.added",
                {"output_index": 0, "item": {**item, "status": "in_progress", "content": []}},
            ),
            ("response.content_part.added", {**where, "part": {**part, "text": ""}}),
            ("response.output_text.delta", {**where, "delta": step.text}),
            ("response.output_text.done", {**where, "text": step.text}),
            ("response.content_part.done", {**where, "part": part}),
            (
                "response.output_item.done",
                {"output_index": 0, "item": {**item, "status": "completed"}},
            ),
        ]
        output.append({**item, "status": "completed"})
    if step.call is not None:
        name, arguments = step.call
        number = next(_ids)
        call = {"id": f"fc_fake_{number}", "type": "function_call", "call_id": f"call_{number}"}
        call |= {"name": name, "arguments": json.dumps(arguments), "status": "completed"}
        index = len(output)
        events += [
            ("response.output_item.added", {"output_index": index, "item": call}),
            ("response.output_item.done", {"output_index": index, "item": call}),
        ]
        output.append(call)
    return [
        *events,
        (
            "response.completed",
            {
                "response": {
                    **response,
                    "status": "completed",
                    "output": output,
                    "usage": dict(step.usage or {}),
                }
            },
        ),
    ]
