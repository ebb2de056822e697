"""The Anthropic API backend: structured output through the `anthropic` SDK and an API key.

The SDK is imported lazily (about 1.5 s), so importing this module stays cheap. Its errors
are translated here, by one table, into `DistillError`s that name the problem and the fix.
`ANTHROPIC_BASE_URL` is honoured by the SDK. Its HTTP client is held to a deadline for the
whole call, its retries included, and a cap on what it reads (`limits`).
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from pydantic import ValidationError

from mtl_mcp.config import Settings
from mtl_mcp.errors import DistillError, DistillUnavailable
from mtl_mcp.learning.backends import Answer
from mtl_mcp.learning.backends.limits import ANSWER_MAX_BYTES, Allowance, limit_client, limited
from mtl_mcp.learning.backends.structured import problems, unusable
from mtl_mcp.learning.spend import Usage
from mtl_mcp.text.render import one_line
from mtl_mcp.text.tokens import estimate_tokens

if TYPE_CHECKING:
    import anthropic

_THINKING_OFF_PREFIXES = ("claude-haiku-", "claude-sonnet-", "claude-opus-")
_MODEL_SETTING = "set MTL_MCP_DISTILL_MODEL"
_SWITCH_MODEL = f"if this keeps happening, {_MODEL_SETTING} to another model"

# HTTP status -> (our error, what it means and what to do). {detail}, {model} and {where}
# are filled in; rate limits and server errors are retried by the SDK first.
_STATUS: dict[int, tuple[type[DistillError], str]] = {
    401: (
        DistillError,
        "the Anthropic API rejected the key (401: {detail}): check ANTHROPIC_API_KEY "
        "or anthropic_api_key in config.toml",
    ),
    402: (
        DistillError,
        "the Anthropic account cannot be billed (402: {detail}): add credit or check "
        "billing in the Anthropic console",
    ),
    403: (
        DistillError,
        "the key may not use model {model!r} (403: {detail}): check the key's permissions "
        f"or {_MODEL_SETTING}",
    ),
    404: (
        DistillError,
        "model {model!r} was not found (404: {detail}): set MTL_MCP_DISTILL_MODEL / "
        "distill_model to an available model such as claude-haiku-5-5",
    ),
    413: (DistillError, "the request is too large {where} (413): lower MTL_MCP_DIGEST_TOKENS"),
    408: (
        DistillUnavailable,
        "the Anthropic API timed out the request (408: {detail}) {where}; the job stays "
        "queued and is retried later",
    ),
    409: (
        DistillUnavailable,
        "the Anthropic API reported a conflict (409: {detail}) {where}; the job stays queued "
        "and is retried later",
    ),
    429: (
        DistillUnavailable,
        "the Anthropic API is rate limiting requests (429: {detail}) even after the SDK's "
        "retries {where}; the job stays queued and is retried later",
    ),
}
_SERVER_FAULT = (
    DistillUnavailable,
    "the Anthropic API is overloaded or failing ({status}: {detail}) after the SDK's retries "
    "{where}; the job stays queued and is retried later",
)
_OTHER_STATUS = (
    DistillError,
    "the Anthropic API rejected the request {where} ({status}: {detail}): check that model "
    f"{{model!r}} supports structured outputs, or {_MODEL_SETTING}",
)


def has_api_key(settings: Settings) -> bool:
    """Whether the API has credentials (the same sources `make_client` reads)."""
    return bool(
        settings.anthropic_api_key
        or os.environ.get("ANTHROPIC_API_KEY")
        or os.environ.get("ANTHROPIC_AUTH_TOKEN")
    )


def make_client(
    settings: Settings, *, timeout: float = 60.0, max_retries: int = 3
) -> anthropic.Anthropic:
    """An Anthropic client with the configured key.

    The key comes from `settings.anthropic_api_key`, else `$ANTHROPIC_API_KEY`, else
    `$ANTHROPIC_AUTH_TOKEN`. Passing it explicitly keeps the SDK from looking up profiles.
    """
    api_key = settings.anthropic_api_key or os.environ.get("ANTHROPIC_API_KEY") or None
    auth_token = None if api_key else (os.environ.get("ANTHROPIC_AUTH_TOKEN") or None)
    if not api_key and not auth_token:
        raise DistillError(
            "ANTHROPIC_API_KEY is not set: export it or add anthropic_api_key to "
            f"{settings.config_file} (distillation calls the Anthropic API; "
            "insights can still be recorded by the assistant without it)"
        )
    import anthropic

    return anthropic.Anthropic(
        api_key=api_key,
        auth_token=auth_token,
        timeout=timeout,
        max_retries=max_retries,
        http_client=limit_client(anthropic.DefaultHttpxClient()),
    )


BACKOFF_ALLOWANCE = 15.0  # seconds: the SDK's waits between its retries, at most


def call_deadline(client: anthropic.Anthropic) -> float:
    """Seconds one call may take in all: each attempt's timeout, and the waits between."""
    timeout = client.timeout
    each = timeout if isinstance(timeout, int | float) else getattr(timeout, "read", None)
    return float(each or 600.0) * (client.max_retries + 1) + BACKOFF_ALLOWANCE


class AnthropicBackend:
    """Structured output from the Messages API (`messages.parse`)."""

    name = "anthropic"
    uses_subscription = False
    extra_tokens_per_call = 0

    def __init__(self, settings: Settings, client: anthropic.Anthropic | None = None) -> None:
        self._settings = settings
        self._client = client

    @property
    def model(self) -> str:
        return self._settings.distill_model

    @property
    def client(self) -> anthropic.Anthropic:
        if self._client is None:
            self._client = make_client(self._settings)
        return self._client

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
        """One structured-output call; SDK failures become DistillErrors; usage is added."""
        import anthropic

        client, model = self.client, self.model
        # Thinking would spend output tokens on a short extraction; Claude models accept
        # "disabled". Other names (a proxy's aliases) get the server's default.
        thinking: anthropic.types.ThinkingConfigParam | anthropic.Omit = (
            {"type": "disabled"} if model.startswith(_THINKING_OFF_PREFIXES) else anthropic.omit
        )
        try:
            with limited(call_deadline(client)) as allowance:
                try:
                    response = client.messages.parse(
                        model=model,
                        max_tokens=max_tokens,
                        system=system,
                        messages=[{"role": "user", "content": user}],
                        output_format=answer,
                        thinking=thinking,
                    )
                except anthropic.AnthropicError as exc:
                    if allowance.tripped:
                        raise _stopped(allowance, step, client) from exc
                    raise
        except ValidationError as exc:
            # The SDK validated the text itself and raised before handing back the usage:
            # count the prompt and a full answer, so the ledger never under-counts.
            usage.add(estimate_tokens(system + json.dumps(user)), max_tokens)
            raise unusable(step, problems(exc), _SWITCH_MODEL) from exc
        except ValueError as exc:  # the HTTP body itself was not JSON (a proxy or gateway fault)
            raise DistillUnavailable(
                f"the Anthropic API sent a malformed response at the {step} step ({exc}); "
                "the job stays queued and is retried later"
            ) from exc
        except anthropic.AnthropicError as exc:
            raise translate(exc, step=step, model=model, client=client) from exc
        u = response.usage
        usage.add(
            u.input_tokens
            + (u.cache_creation_input_tokens or 0)
            + (u.cache_read_input_tokens or 0),
            u.output_tokens,
        )
        if response.parsed_output is None:
            raise unusable(
                step, f"no text answer, stop_reason={response.stop_reason}", _SWITCH_MODEL
            )
        return response.parsed_output


def _stopped(allowance: Allowance, step: str, client: anthropic.Anthropic) -> DistillError:
    """The error for a call our limits stopped."""
    if allowance.tripped == "size":
        return DistillUnavailable(
            f"the Anthropic API sent an answer larger than {ANSWER_MAX_BYTES >> 20} MB at the "
            f"{step} step and was cut off; the job stays queued and is retried (check "
            "ANTHROPIC_BASE_URL: a proxy or gateway may be broken)"
        )
    return DistillUnavailable(
        f"the Anthropic API did not finish answering within {call_deadline(client):g} s at the "
        f"{step} step (timeout {client.timeout}s, {client.max_retries} retries); the job "
        "stays queued and is retried"
    )


def translate(
    exc: anthropic.AnthropicError, *, step: str, model: str, client: anthropic.Anthropic
) -> DistillError:
    """An SDK exception as our error, by the tables above."""
    import anthropic

    where = f"at the {step} step"
    if isinstance(exc, anthropic.APITimeoutError):
        return DistillUnavailable(
            f"the Anthropic API did not answer in time {where} (timeout {client.timeout}s, "
            f"{client.max_retries} retries); the job stays queued and is retried"
        )
    if isinstance(exc, anthropic.APIConnectionError):
        return DistillUnavailable(
            f"the Anthropic API is unreachable at {client.base_url} {where} ({exc}); "
            "the job stays queued and is retried (check the network or ANTHROPIC_BASE_URL)"
        )
    if isinstance(exc, anthropic.APIStatusError):
        status = exc.status_code
        kind, template = _STATUS.get(status, _SERVER_FAULT if status >= 500 else _OTHER_STATUS)
        detail = one_line(exc.api_message or str(exc), 200)
        return kind(template.format(detail=detail, model=model, where=where, status=status))
    if isinstance(exc, anthropic.APIResponseValidationError):
        return DistillUnavailable(
            f"the Anthropic API sent a malformed response {where}; the job stays queued "
            "and is retried later"
        )
    return DistillError(
        f"the Anthropic client failed {where} ({type(exc).__name__}: {exc}): check the "
        "API key and ANTHROPIC_BASE_URL"
    )
