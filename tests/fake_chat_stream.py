"""A scripted fake of a streaming OpenAI chat-completions API, as agents call it (opencode
through its OpenAI-compatible provider, GitHub Copilot CLI in bring-your-own-key mode).

    with FakeChatStream() as fake:
        fake.reply_call("read", {"filePath": "/p/a.py"}, text="First I will ...")
        fake.reply_text("Fixed.")
        ...  # point the agent's provider at fake.base_url
        fake.agent_requests[1].tool_results()   # what the tools answered, by call id

An agent turn is a request that offers tools; each takes the next scripted reply, streamed
as `chat.completion.chunk` events. With nothing left in the script it answers 500, so an
unexpected turn fails loudly. A request without tools (a session title, a summary) gets a
short text. Only 127.0.0.1 is used; stdlib only. Adapted from the research probes.
"""

from __future__ import annotations

import itertools
import json
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests import fake_http
from tests.fake_http import ScriptedAgent, Step

_ids = itertools.count(1)


class ChatStreamRequest(fake_http.RecordedRequest):
    @property
    def is_agent_turn(self) -> bool:
        return self.method == "POST" and bool((self.body or {}).get("tools"))

    def tool_names(self) -> list[str]:
        return [t["function"]["name"] for t in (self.body or {}).get("tools", [])]

    def messages(self, role: str) -> list[str]:
        """The text of every message with `role`, in order (parts joined)."""
        found = []
        for message in (self.body or {}).get("messages", []):
            if message.get("role") != role:
                continue
            content = message.get("content")
            if isinstance(content, list):
                content = "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
            found.append(content if isinstance(content, str) else "")
        return found

    def tool_results(self) -> dict[str, str]:
        """The content of each `role: tool` message, by its tool call id."""
        return {
            str(m.get("tool_call_id")): text
            for m in (self.body or {}).get("messages", [])
            if m.get("role") == "tool"
            for text in [_text(m.get("content"))]
        }


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


class FakeChatStream(ScriptedAgent[ChatStreamRequest]):
    """A local streaming chat-completions API with a script of agent replies."""

    request_class = ChatStreamRequest

    def __init__(self, model: str = "fake-model") -> None:
        self.model = model
        super().__init__()

    @property
    def base_url(self) -> str:
        return self.origin + "/v1"

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # a model list
                fake.record(self)
                models = {"object": "list", "data": [{"id": fake.model, "object": "model"}]}
                fake_http.send(self, 200, json.dumps(models).encode(), "application/json")

            def do_POST(self) -> None:
                request = fake.record(self)
                step = fake._next() if request.is_agent_turn else Step("A short title")
                if step.status != 200:
                    error = {"error": {"message": step.text, "type": "fake"}}
                    fake_http.send(
                        self, step.status, json.dumps(error).encode(), "application/json"
                    )
                    return
                fake_http.send(self, 200, _stream(step, fake.model), "text/event-stream")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


def _stream(step: Step, model: str) -> bytes:
    ident = f"chatcmpl-fake-{next(_ids)}"

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        data = {"id": ident, "object": "chat.completion.chunk", "created": 1, "model": model}
        data |= {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
        return f"data: {json.dumps(data)}\n\n"

    events = [chunk({"role": "assistant", "content": step.text})]
    finish = "stop"
    if step.call is not None:
        name, arguments = step.call
        call = {"index": 0, "id": f"call_fake_{next(_ids)}", "type": "function"}
        call |= {"function": {"name": name, "arguments": json.dumps(arguments)}}
        events.append(chunk({"tool_calls": [call]}))
        finish = "tool_calls"
    usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
    events.append(chunk({}, finish, usage=usage))
    events.append("data: [DONE]\n\n")
    return "".join(events).encode("utf-8")
