"""A fake OpenAI-compatible chat-completions server on 127.0.0.1, as Ollama, llama.cpp's
server, LM Studio or vLLM expose it.

    with FakeChat(mode="fenced") as fake:            # every answer in prose and a fence
        fake.answers["Judgement"] = {...}            # what a step answers, by schema name
        fake.reply_status(429, retry_after="120")    # scripted replies go first
        ...  # point MTL_MCP_OPENAI_BASE_URL at fake.base_url
        fake.chat_requests[0].body["response_format"]

Modes (how the model answers once the script is empty):

    schema           honours `response_format`: the payload as compact JSON
    fenced           ignores it: prose, a ```json fence with the payload, more prose
    almost           ignores it: the payload as almost JSON (`mangle`, by `variant`)
    invalid-then-valid  not JSON that fits, then the payload once told why (a repair turn)
    garbage          prose, never JSON
    slow             the payload after `delay` seconds

The payload of a request is `answers[name]`, `name` being the `response_format`'s schema
name, else the model whose schema the system prompt carries (matched by its properties).
`flavour` adds a server's own endpoints: "ollama" (`POST /api/show`), "llamacpp"
(`GET /props`) or "plain". Usage counts ~4 characters a token, as servers report their own
tokenizer's count. `served` accumulates the seconds the handler spent, for overhead numbers.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests import fake_http
from tests.fake_http import LoopbackServer

MODEL = "qwen3:0.6b"
JUDGED = {"outcome": "success", "reason": "the failing test passes after the fix"}
LESSON = {
    "title": "Reproduce a date bug with a frozen clock",
    "description": "When a failure depends on the calendar or the current time.",
    "content": "Pin the clock at the failing boundary in a test before changing code, so the "
    "fix is proven by a test that failed first and the bug cannot return unnoticed.",
    "polarity": "success",
    "category": "test-verification",
    "domain": "web-backend",
    "languages": ["python"],
    "tags": ["dates", "testing"],
}
DEFAULT_ANSWERS: dict[str, Any] = {"Judgement": JUDGED, "DistilledInsights": {"insights": [LESSON]}}
MANGLE_VARIANTS = (
    "trailing-commas",
    "single-quotes",
    "truncated-brace",
    "python-literals",
    "unquoted-keys",
    "comments",
    "truncated-string",
    "prose-after",
    "missing-commas",
    "wrong-keys",
)


def tokens(text: str) -> int:
    return max(1, len(text) // 4)


def mangle(payload: Any, variant: str) -> str:
    """`payload` as the almost-JSON small models write."""
    text = json.dumps(payload, indent=1)
    if variant == "trailing-commas":
        return text.replace("\n ]", ",\n ]").replace("\n}", ",\n}")
    if variant == "single-quotes":
        return text.replace('"', "'")
    if variant == "truncated-brace":
        return text[: text.rstrip().rfind("}")]
    if variant == "python-literals":
        return text.replace("true", "True").replace("false", "False").replace("null", "None")
    if variant == "unquoted-keys":
        for key in set(_keys(payload)):
            text = text.replace(f'"{key}":', f"{key}:")
        return text
    if variant == "comments":
        return "// the answer\n" + text.replace("{\n", "{ /* fields */\n", 1)
    if variant == "truncated-string":
        cut = text.rfind('"', 0, len(text) - 10)
        return text[: max(1, cut - 12)]
    if variant == "prose-after":
        return text + "\n\nI hope this helps! Let me know if you need anything else."
    if variant == "missing-commas":
        return text.replace(",\n", "\n")
    if variant == "wrong-keys":
        return json.dumps({"answer": payload})
    raise ValueError(variant)


def _keys(data: Any) -> list[str]:
    if isinstance(data, dict):
        return [*data, *(k for v in data.values() for k in _keys(v))]
    if isinstance(data, list):
        return [k for v in data for k in _keys(v)]
    return []


class ChatRequest(fake_http.RecordedRequest):
    def message(self, role: str, index: int = 0) -> str:
        """The content of the `index`-th message with `role`."""
        found = [m.get("content", "") for m in self.body.get("messages", []) if m["role"] == role]
        return str(found[index]) if len(found) > index else ""


@dataclass
class Reply:
    """One scripted reply: 'text' (verbatim), 'status' (an HTTP error) or 'hang'."""

    kind: str
    text: str = ""
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    usage: bool = True


class FakeChat(LoopbackServer[ChatRequest]):
    """A local chat-completions API; a context manager."""

    request_class = ChatRequest

    def __init__(
        self,
        *,
        mode: str = "schema",
        flavour: str = "ollama",
        models: tuple[str, ...] = (MODEL,),
        context: int | None = None,
        delay: float = 0.0,
        variant: str = "trailing-commas",
        usage: bool = True,
    ) -> None:
        self.mode, self.flavour, self.models, self.context = mode, flavour, models, context
        self.delay, self.variant, self.usage = delay, variant, usage
        self.answers: dict[str, Any] = dict(DEFAULT_ANSWERS)
        self.served = 0.0
        self._script: deque[Reply] = deque()
        self._served_lock = threading.Lock()
        super().__init__()

    @property
    def base_url(self) -> str:
        return self.origin + "/v1"

    @property
    def chat_requests(self) -> list[ChatRequest]:
        with self._lock:
            return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def reply_text(self, text: str, *, usage: bool = True) -> None:
        with self._lock:
            self._script.append(Reply("text", text=text, usage=usage))

    def reply_status(self, status: int, *, retry_after: str | None = None, text: str = "") -> None:
        headers = {"retry-after": retry_after} if retry_after else {}
        with self._lock:
            self._script.append(Reply("status", status=status, headers=headers, text=text))

    def reply_hang(self) -> None:
        with self._lock:
            self._script.append(Reply("hang"))

    # -- answering ------------------------------------------------------------------------

    def payload_for(self, body: dict[str, Any]) -> Any:
        fmt = body.get("response_format") or {}
        name = (fmt.get("json_schema") or {}).get("name")
        if name in self.answers:
            return self.answers[name]
        system = next((m["content"] for m in body["messages"] if m["role"] == "system"), "")
        try:
            schema = json.loads(system.rsplit("\n", 1)[-1])
        except ValueError:
            schema = {}
        wanted = set(schema.get("properties", {}))
        for payload in self.answers.values():
            if isinstance(payload, dict) and set(payload) == wanted:
                return payload
        return {}

    def _answer(self, body: dict[str, Any]) -> str:
        payload = self.payload_for(body)
        repairing = sum(m["role"] == "assistant" for m in body["messages"]) > 0
        if self.mode in ("schema", "slow"):
            return json.dumps(payload, separators=(",", ":"))
        if self.mode == "fenced":
            return (
                "Sure! Here is the assessment you asked for.\n\n```json\n"
                f"{json.dumps(payload, indent=2)}\n```\n\nLet me know if you need more."
            )
        if self.mode == "almost":
            return mangle(payload, self.variant)
        if self.mode == "invalid-then-valid":
            if repairing:
                return json.dumps(payload)
            return "{'result': 'the session went well', 'notes': [1, 2,"
        if self.mode == "garbage":
            return "I think the session went quite well overall, nice work on the tests."
        raise ValueError(self.mode)

    def _completion(self, body: dict[str, Any], text: str, usage: bool) -> dict[str, Any]:
        prompt = "".join(str(m.get("content", "")) for m in body.get("messages", []))
        data: dict[str, Any] = {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", MODEL),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
        }
        if usage and self.usage:
            data["usage"] = {
                "prompt_tokens": tokens(prompt),
                "completion_tokens": tokens(text),
                "total_tokens": tokens(prompt) + tokens(text),
            }
        return data

    def _next(self) -> Reply | None:
        with self._lock:
            return self._script.popleft() if self._script else None

    # -- serving --------------------------------------------------------------------------

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # as real servers: no 40 ms delayed-ACK stalls

            def _json(self, status: int, data: Any, headers: Mapping[str, str] = {}) -> None:
                payload = json.dumps(data).encode("utf-8")
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(payload)))
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_GET(self) -> None:
                request = fake.record(self)
                path = request.path.split("?")[0]
                if path == "/v1/models":
                    entries = [
                        {"id": m, "object": "model", "owned_by": "library"} for m in fake.models
                    ]
                    if fake.flavour == "vllm" and fake.context:
                        for entry in entries:
                            entry["max_model_len"] = fake.context
                    self._json(200, {"object": "list", "data": entries})
                elif path == "/props" and fake.flavour == "llamacpp":
                    settings = {"n_ctx": fake.context or 4096}
                    self._json(200, {"default_generation_settings": settings})
                else:
                    self._json(404, {"error": {"message": f"fake: no route {path}"}})

            def do_POST(self) -> None:
                started = time.perf_counter()
                request = fake.record(self)
                try:
                    self._post(request)
                finally:
                    with fake._served_lock:
                        fake.served += time.perf_counter() - started

            def _post(self, request: ChatRequest) -> None:
                path = request.path.split("?")[0]
                body = request.body or {}
                if path == "/api/show" and fake.flavour == "ollama":
                    params = (
                        f"num_ctx                        {fake.context}" if fake.context else ""
                    )
                    info = {"qwen3.context_length": 40960, "general.architecture": "qwen3"}
                    self._json(200, {"parameters": params, "model_info": info})
                    return
                if path != "/v1/chat/completions":
                    self._json(404, {"error": {"message": f"fake: no route {path}"}})
                    return
                if body.get("model") not in fake.models:
                    message = f'model "{body.get("model")}" not found, try pulling it first'
                    self._json(404, {"error": {"message": message, "type": "api_error"}})
                    return
                reply = fake._next()
                if reply is not None and reply.kind == "hang":
                    fake._closing.wait()
                    return
                if reply is not None and reply.kind == "status":
                    message = reply.text or f"fake error {reply.status}"
                    self._json(reply.status, {"error": {"message": message}}, reply.headers)
                    return
                if fake.mode == "slow" and fake._closing.wait(fake.delay):
                    return
                text = reply.text if reply is not None else fake._answer(body)
                use = reply.usage if reply is not None else True
                self._json(200, fake._completion(body, text, use))

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler
