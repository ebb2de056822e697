"""An OpenAI-compatible chat-completions endpoint as a backend: a model on this machine
(Ollama, LM Studio, llama.cpp's server, vLLM) or a remote API or gateway (OpenAI,
OpenRouter, a LiteLLM proxy).

Requests go through `openai_endpoint` (HTTP, loopback, keys, statuses).

Structured output, robustly. Each request asks for `response_format` json_schema (strict),
and the same schema is in the system prompt, since many servers and small models ignore
the former. The answer is read by `structured.loose_json` (prose, a code fence, almost
JSON), validated, and if it still does not fit, the model is told why and asked once more.
An answer that fails that too raises DistillUnavailable, so the job stays queued and backs
off as in an outage (the next attempt may sample a usable answer); `answers` counts how
each answer ended, for `mtl-mcp stats`.

Fitting the model: the context window comes from the server where it says (the model list's
`max_model_len` or `context_length`, Ollama's `/api/show`, llama.cpp's `/props`), else from
MTL_MCP_OPENAI_CONTEXT_TOKENS; a request that would not fit has the middle of its session
digest cut (`fit_prompt`), and the pipeline builds digests to fit (`digest_room`).

A base URL on loopback is local: it spends no money or quota, so it has its own budget
(MTL_MCP_LOCAL_DAILY_TOKENS, unlimited when unset) instead of the daily one, and it gets no
OPENAI_API_KEY (that key is for a remote API; set MTL_MCP_OPENAI_API_KEY for a local server
that wants one). Anything else is a paid API: the daily budget applies.
"""

from __future__ import annotations

import json
import logging
import re
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from mtl_mcp.config import Settings
from mtl_mcp.errors import DistillError, DistillUnavailable
from mtl_mcp.learning.answers import AnswerOutcome, record_answer
from mtl_mcp.learning.backends import Answer
from mtl_mcp.learning.backends.openai_endpoint import (
    AnswerTooLarge,
    Endpoint,
    EndpointStatus,
    endpoint_status,
    error_detail,
    positive_int,
    status_error,
)
from mtl_mcp.learning.backends.structured import loose_json, problems, strict_schema
from mtl_mcp.learning.spend import Usage
from mtl_mcp.learning.transcripts.events import valid_unicode
from mtl_mcp.text.render import one_line
from mtl_mcp.text.tokens import chars_for_tokens, estimate_tokens
from mtl_mcp.untrusted import json_loads

if TYPE_CHECKING:
    import httpx2

logger = logging.getLogger(__name__)

NAME = "openai"
MARGIN_TOKENS = 64  # the chat template's own tokens around each message
MIN_USER_TOKENS = 300  # below this a session cannot be judged: the model is too small
CUT = "\n[... {} lines cut to fit the model's context window ...]\n"
_DIGEST = re.compile(r"(<session_digest>\n)(.*)(\n</session_digest>)", re.S)
_FIX_MODEL = "set MTL_MCP_OPENAI_MODEL to a larger instruction-tuned model"
_SCHEMA_REFUSED = ("response_format", "json_schema", "schema")
_SETTING = " (MTL_MCP_OPENAI_TIMEOUT)"


def digest_cut(user: str, room_tokens: int) -> str:
    """`user` within `room_tokens`: the middle lines of its session digest (else of the
    whole text) replaced by a note, so the request (the first ask) and how the session
    ended both stay."""
    if estimate_tokens(user) <= room_tokens:
        return user
    match = _DIGEST.search(user)
    head, body, tail = (
        (user[: match.start(2)], match.group(2), user[match.end(2) :]) if match else ("", user, "")
    )
    room = chars_for_tokens(room_tokens - estimate_tokens(head + tail)) - len(CUT) - 8
    lines = body.split("\n")
    first, last, used, front = 0, len(lines) - 1, 0, True
    kept_head: list[str] = []
    kept_tail: list[str] = []
    while first <= last:  # a line from each end in turn, while they fit
        line = lines[first] if front else lines[last]
        if used + len(line) + 1 > room:
            break
        used += len(line) + 1
        if front:
            kept_head.append(line)
            first += 1
        else:
            kept_tail.append(line)
            last -= 1
        front = not front
    cut = last - first + 1
    middle = CUT.format(cut) if cut else "\n"
    return head + "\n".join(kept_head) + middle + "\n".join(reversed(kept_tail)) + tail


class BadAnswer(Exception):  # control flow inside `ask`, never raised out of this module
    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class OpenAIBackend:
    """Structured output from `POST {base}/chat/completions`."""

    name = NAME
    uses_subscription = False
    extra_tokens_per_call = 0

    def __init__(
        self,
        settings: Settings,
        status: EndpointStatus | None = None,
        *,
        endpoint: Endpoint | None = None,
        record_answers: bool = True,
        timeout: float | None = None,
    ) -> None:
        """`timeout`: each chat request's deadline, if not MTL_MCP_OPENAI_TIMEOUT's (the
        doctor's question is short, and must not keep it waiting as long as a job may)."""
        self._settings = settings
        self.timeout = timeout or settings.openai_timeout
        self.endpoint = endpoint or Endpoint(settings)
        self._status = status
        self._context: tuple[int, str] | None = None
        self._schema_accepted = True
        self.record_answers = record_answers

    @property
    def model(self) -> str:
        return self._settings.openai_model

    @property
    def local(self) -> bool:
        """A model on this machine: no money or quota spent, its own budget."""
        return self.endpoint.local

    # -- the context window -------------------------------------------------------------

    @property
    def context_tokens(self) -> int:
        return self.context_window()[0]

    def context_window(self) -> tuple[int, str]:
        """The model's context window in tokens, and where that number came from."""
        if self._context is None:
            self._context = self._discover_context()
        return self._context

    def _discover_context(self) -> tuple[int, str]:
        setting = self._settings.openai_context_tokens
        if self._status is None:
            self._status = endpoint_status(self._settings, self.endpoint)
        entry = self._status.entry or {}
        for key in ("max_model_len", "context_length", "context_window"):
            if found := positive_int(entry.get(key)):
                return found, f"the server's model list ({key})"
        show = self.endpoint.probe_json(
            "POST", f"{self.endpoint.root}/api/show", {"model": self.model}
        )
        if isinstance(show, dict):  # Ollama
            params = str(show.get("parameters") or "")
            if found := positive_int(next(iter(re.findall(r"(?m)^num_ctx\s+(\d+)", params)), None)):
                return found, "Ollama's num_ctx for the model"
            info = show.get("model_info")
            trained = [
                positive_int(v)
                for k, v in (info.items() if isinstance(info, dict) else ())
                if str(k).endswith(".context_length")
            ]
            if trained and trained[0]:
                return min(trained[0], setting), (
                    f"MTL_MCP_OPENAI_CONTEXT_TOKENS, within the model's {trained[0]:,} (Ollama "
                    "runs a model with its num_ctx, which /api/show does not report)"
                )
        props = self.endpoint.probe_json("GET", f"{self.endpoint.root}/props")
        if isinstance(props, dict):  # llama.cpp's server
            settings_ = props.get("default_generation_settings")
            n_ctx = positive_int(settings_.get("n_ctx")) if isinstance(settings_, dict) else None
            if found := n_ctx or positive_int(props.get("n_ctx")):
                return found, "llama.cpp's /props (n_ctx)"
        return setting, "MTL_MCP_OPENAI_CONTEXT_TOKENS"

    def fit_prompt(self, system: str, user: str, max_tokens: int, extra: str = "") -> str:
        """`user` cut to what the context window leaves after the system prompt, `extra`
        (earlier turns) and the answer; DistillError if too little is left to be useful."""
        context = self.context_tokens
        room = context - estimate_tokens(system + extra) - max_tokens - 3 * MARGIN_TOKENS
        if room < MIN_USER_TOKENS:
            raise DistillError(
                f"model {self.model!r} has a context window of {context:,} tokens, too small "
                f"for the prompts and a {max_tokens}-token answer: use a model with at least "
                "4,096 tokens of context (or raise MTL_MCP_OPENAI_CONTEXT_TOKENS if the "
                "server runs it with more)"
            )
        return digest_cut(user, room)

    # -- asking -------------------------------------------------------------------------

    def ask(
        self,
        *,
        step: str,
        system: str,
        user: str,
        answer: type[Answer],
        max_tokens: int,
        usage: Usage,
    ) -> Answer:
        """One structured answer: a request, and one repair request if the answer does not
        fit; failures become DistillErrors; usage is added for every request."""
        schema = strict_schema(answer)
        system = (
            f"{system}\n\nAnswer with one JSON object and nothing else (no prose, no code "
            f"fence), matching this JSON schema:\n{json.dumps(schema, separators=(',', ':'))}"
        )
        messages = [
            {"role": "system", "content": system},
            {"role": "user", "content": self.fit_prompt(system, user, max_tokens)},
        ]
        text = self._complete(step, messages, answer.__name__, schema, max_tokens, usage)
        try:
            parsed, outcome = self._read(text, answer)
        except BadAnswer as first:
            logger.info(
                "%s: unusable answer at the %s step (%s); asking once more", NAME, step, first.why
            )
            retry = (
                f"Your answer could not be used: {first.why}. Answer again with only the JSON "
                "object, matching the schema exactly: no prose, no code fence, no comments."
            )
            messages[1]["content"] = self.fit_prompt(system, user, max_tokens, text + retry)
            messages += [
                {"role": "assistant", "content": text},
                {"role": "user", "content": retry},
            ]
            text = self._complete(
                f"{step} repair", messages, answer.__name__, schema, max_tokens, usage
            )
            try:
                parsed, _ = self._read(text, answer)
            except BadAnswer as second:
                self._record(step, "rejected")
                logger.warning("%s: rejected the answer at the %s step: %s", NAME, step, second.why)
                raise DistillUnavailable(
                    f"model {self.model!r} at {self.endpoint.shown} did not return usable JSON at "
                    f"the {step} step, even when told why ({second.why}); the job stays queued "
                    f"and is retried later; if this keeps happening, {_FIX_MODEL}"
                ) from None
            outcome = "repaired"
        self._record(step, outcome)
        return parsed

    def _read(self, text: str, answer: type[Answer]) -> tuple[Answer, AnswerOutcome]:
        if not text.strip():
            raise BadAnswer("the answer was empty")
        try:
            data, mended = loose_json(text)
        except ValueError as exc:
            raise BadAnswer(str(exc)) from None
        try:
            parsed = answer.model_validate(data)
        except ValidationError as exc:
            inner = next(iter(data.values())) if isinstance(data, dict) and len(data) == 1 else None
            if isinstance(inner, dict):  # {"answer": {...}}: small models wrap it
                try:
                    return answer.model_validate(inner), "recovered"
                except ValidationError:
                    pass
            raise BadAnswer(f"it does not match the schema: {problems(exc)}") from None
        return parsed, "recovered" if mended else "valid"

    def _record(self, step: str, outcome: AnswerOutcome) -> None:
        if self.record_answers:
            record_answer(self._settings.home, NAME, step, outcome)

    def _complete(
        self,
        step: str,
        messages: list[dict[str, str]],
        schema_name: str,
        schema: dict[str, Any],
        max_tokens: int,
        usage: Usage,
    ) -> str:
        """One chat-completions request: the answer's text."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": 0,
            "stream": False,
        }
        if self._schema_accepted:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": schema_name, "schema": schema, "strict": True},
            }
        response = self._post(step, body, usage, max_tokens)
        if response.status_code in (400, 422) and self._schema_accepted:
            detail = error_detail(response).lower()
            if any(word in detail for word in _SCHEMA_REFUSED):
                # A server without structured output: the schema is in the prompt anyway.
                logger.info("%s: the server refused response_format (%s)", NAME, detail[:120])
                self._schema_accepted = False
                body.pop("response_format")
                response = self._post(step, body, usage, max_tokens)
        if response.status_code != 200:
            raise self._status_error(response, step)
        try:
            data = json_loads(response.content)
            choice = data["choices"][0]
            text = valid_unicode(str(choice["message"].get("content") or ""))
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise DistillUnavailable(
                f"{self.endpoint.shown} sent a malformed chat completion at the {step} step; "
                "the job stays queued and is retried later"
            ) from None
        counts = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        prompt, completion = (
            positive_int(counts.get("prompt_tokens")),
            positive_int(counts.get("completion_tokens")),
        )
        usage.add(
            prompt or estimate_tokens("".join(m["content"] for m in messages)),
            completion or estimate_tokens(text),
        )
        return text

    def _post(
        self, step: str, body: dict[str, Any], usage: Usage, max_tokens: int
    ) -> httpx2.Response:
        import httpx2

        url = f"{self.endpoint.base}/chat/completions"
        try:
            return self.endpoint.post(url, body, self.timeout)
        except httpx2.TimeoutException:
            # It may have spent the tokens: count a whole call, as for a killed CLI.
            usage.add(estimate_tokens(json.dumps(body["messages"])), max_tokens)
            raise DistillUnavailable(
                f"{self.endpoint.shown} did not answer within {self.timeout:g} s at the {step} "
                f"step{_SETTING if self.timeout == self._settings.openai_timeout else ''}; the "
                "job stays queued and is retried later"
            ) from None
        except AnswerTooLarge as exc:
            usage.add(estimate_tokens(json.dumps(body["messages"])), max_tokens)
            raise DistillUnavailable(
                f"{self.endpoint.shown} sent a broken answer at the {step} step ({exc}); the "
                "job stays queued and is retried later (check MTL_MCP_OPENAI_BASE_URL)"
            ) from None
        except httpx2.HTTPError as exc:
            raise DistillUnavailable(
                f"{self.endpoint.shown} is unreachable at the {step} step "
                f"({one_line(str(exc), 160)}); the job stays queued and is retried (is the "
                "server running? check MTL_MCP_OPENAI_BASE_URL)"
            ) from None

    def _status_error(self, response: httpx2.Response, step: str) -> DistillError:
        return status_error(response, step, self.endpoint.shown, self.model)

    def close(self) -> None:
        self.endpoint.close()
