"""A scripted fake of the Gemini API, as the real Gemini CLI calls it (API-key mode).

    with FakeGemini() as fake:
        fake.reply_call("read_file", {"file_path": "a.py"}, text="First I will ...")
        fake.reply_text("Fixed.")
        ...  # run gemini with GOOGLE_GEMINI_BASE_URL=fake.base_url, GEMINI_API_KEY=anything
        fake.agent_requests[1].function_responses()   # what the tools answered

An agent turn is a `:streamGenerateContent` request that offers tools; each takes the next
scripted reply, streamed as Server-Sent Events. With nothing left in the script it answers
500, so an unexpected turn fails loudly. Gemini CLI's helper calls (its model router, any
request with a `responseJsonSchema`) get a minimal answer that fits the schema, and
`countTokens` a small count. Only 127.0.0.1 is used; stdlib only. Adapted from the research
probe of Gemini CLI 0.61.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests import fake_http
from tests.fake_http import ScriptedAgent


class GeminiRequest(fake_http.RecordedRequest):
    @property
    def is_agent_turn(self) -> bool:
        return "streamGenerateContent" in self.path and bool((self.body or {}).get("tools"))

    def tool_names(self) -> list[str]:
        return [
            f["name"]
            for tool in (self.body or {}).get("tools", [])
            for f in tool.get("functionDeclarations", [])
        ]

    def texts(self, role: str = "user") -> list[str]:
        """Every text part of the `contents` with `role`, in order."""
        return [
            part["text"]
            for content in (self.body or {}).get("contents", [])
            if content.get("role") == role
            for part in content.get("parts", [])
            if isinstance(part.get("text"), str)
        ]

    def function_responses(self) -> dict[str, Any]:
        """The latest response of each function the request answers, by name."""
        found: dict[str, Any] = {}
        for content in (self.body or {}).get("contents", []):
            for part in content.get("parts", []):
                if "functionResponse" in part:
                    found[part["functionResponse"]["name"]] = part["functionResponse"]["response"]
        return found


class FakeGemini(ScriptedAgent[GeminiRequest]):
    """A local Gemini API with a script of agent replies; a context manager."""

    request_class = GeminiRequest

    @property
    def base_url(self) -> str:
        return self.origin

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                fake.record(self)
                fake_http.send(self, 200, b'{"models": []}', "application/json")

            def do_POST(self) -> None:
                request = fake.record(self)
                body = request.body if isinstance(request.body, dict) else {}
                if "countTokens" in request.path:
                    fake_http.send(self, 200, b'{"totalTokens": 10}', "application/json")
                    return
                if not request.is_agent_turn:
                    schema = (body.get("generationConfig") or {}).get("responseJsonSchema")
                    answer = json.dumps(_fill(schema)) if schema else "OK"
                    self._reply(request, _response([{"text": answer}], (100, 20)))
                    return
                step = fake._next(request)
                if step.status != 200:
                    error = {"error": {"code": step.status, "message": step.text}}
                    fake_http.send(
                        self, step.status, json.dumps(error).encode(), "application/json"
                    )
                    return
                parts: list[dict[str, Any]] = [{"text": step.text}] if step.text else []
                if step.call is not None:
                    name, arguments = step.call
                    parts.append({"functionCall": {"name": name, "args": dict(arguments)}})
                self._reply(request, _response(parts, step.usage or (100, 20)))

            def _reply(self, request: GeminiRequest, answer: dict[str, Any]) -> None:
                if "alt=sse" in request.path:
                    data = f"data: {json.dumps(answer)}\n\n".encode()
                    fake_http.send(self, 200, data, "text/event-stream")
                else:
                    fake_http.send(self, 200, json.dumps(answer).encode(), "application/json")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


def _response(parts: list[dict[str, Any]], usage: tuple[int, int]) -> dict[str, Any]:
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {"promptTokenCount": usage[0], "candidatesTokenCount": usage[1]},
        "modelVersion": "gemini-fake",
    }


def _fill(schema: Mapping[str, Any]) -> Any:
    """A minimal value that fits a (Gemini-style) JSON schema."""
    kind = str(schema.get("type", "object")).lower()
    if schema.get("enum"):
        return schema["enum"][0]
    if kind == "object":
        properties = schema.get("properties") or {}
        return {key: _fill(value) for key, value in properties.items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 1
    if kind == "boolean":
        return False
    return "fake"
