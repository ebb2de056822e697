"""HTTP to an OpenAI-compatible server, for the `openai` backend (`openai_compat`).

Plain HTTP through `httpx2` (already installed for the Anthropic SDK), not the `openai`
SDK: the SDK insists on a key (local servers have none), reads ambient variables such as
OPENAI_ORG_ID and OPENAI_CUSTOM_HEADERS into every request, and knows nothing of the
servers' own endpoints we read the context window from. One client per backend, no
retries of its own (the queue backs off), and for a loopback URL no proxy from the
environment. Every request has a wall-clock deadline (MTL_MCP_OPENAI_TIMEOUT for a chat
request, PROBE_TIMEOUT for the probes) and a cap on what it reads (`limits`): a server that
drips its answer, or sends a huge one, costs no more than that. Failures are translated by
one table, `_STATUS`.

A base URL on loopback is local, and it gets no OPENAI_API_KEY (that key is for a remote
API; set MTL_MCP_OPENAI_API_KEY for a local server that wants one).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from mtl_mcp.config import Settings
from mtl_mcp.errors import DistillError, DistillUnavailable
from mtl_mcp.learning.backends.limits import ANSWER_MAX_BYTES, limit_client, limited
from mtl_mcp.learning.transcripts.events import valid_unicode
from mtl_mcp.text.redact import redact, uri_without_secrets
from mtl_mcp.text.render import one_line
from mtl_mcp.untrusted import json_loads

if TYPE_CHECKING:
    import httpx2

logger = logging.getLogger(__name__)

PROBE_TIMEOUT = 5.0  # seconds for the model list and the context-window probes


# HTTP status -> (our error, what it means and what to do); {detail}, {model}, {url} and
# {where} are filled in. Rate limits and busy servers are retried by the queue, at the time
# Retry-After names if the server sent one.
_STATUS: dict[int, tuple[type[DistillError], str]] = {
    400: (
        DistillError,
        "{url} rejected the request {where} (400: {detail}): check that model {model!r} "
        "takes chat requests, or lower MTL_MCP_OPENAI_CONTEXT_TOKENS if it is too long",
    ),
    401: (
        DistillError,
        "{url} refused the request (401: {detail}): set MTL_MCP_OPENAI_API_KEY (or "
        "openai_api_key in config.toml) to a key it accepts",
    ),
    403: (
        DistillError,
        "{url} refused model {model!r} (403: {detail}): check the key's permissions or "
        "MTL_MCP_OPENAI_MODEL",
    ),
    404: (
        DistillError,
        "{url} has no model {model!r} or no chat endpoint (404: {detail}): pull or load the "
        "model (`ollama pull {model}`), set MTL_MCP_OPENAI_MODEL to one `mtl-mcp doctor` "
        "lists, and check that MTL_MCP_OPENAI_BASE_URL ends in /v1",
    ),
    408: (
        DistillUnavailable,
        "{url} timed out the request (408: {detail}) {where}; the job stays queued",
    ),
    409: (DistillUnavailable, "{url} reported a conflict (409: {detail}) {where}; queued"),
    413: (
        DistillError,
        "the request is too large for {url} {where} (413): lower MTL_MCP_OPENAI_CONTEXT_TOKENS",
    ),
    429: (
        DistillUnavailable,
        "{url} is rate limiting or busy (429: {detail}) {where}; the job stays queued and "
        "is retried later",
    ),
}
_SERVER_FAULT = (
    DistillUnavailable,
    "{url} failed ({status}: {detail}) {where}; the job stays queued and is retried later",
)
_OTHER_STATUS = (
    DistillError,
    "{url} rejected the request {where} ({status}: {detail}): check MTL_MCP_OPENAI_BASE_URL "
    "and MTL_MCP_OPENAI_MODEL",
)


def is_loopback(url: str) -> bool:
    """Whether `url` names this machine: localhost, 127.0.0.0/8 and ::1 in any form the
    resolver reads (127.1, ::ffff:127.0.0.1), and 0.0.0.0 or ::, which connect here (Ollama's
    docs use http://0.0.0.0:11434)."""
    host = (urlsplit(url).hostname or "").lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.ip_address(host)
    except ValueError:
        try:  # the shorthand forms getaddrinfo accepts too: 127.1, 2130706433, 0x7f.1
            address = ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback or address.is_unspecified


def api_key(settings: Settings) -> str | None:
    """The key sent to the endpoint: MTL_MCP_OPENAI_API_KEY, else (for a remote endpoint
    only) OPENAI_API_KEY; None for none."""
    if settings.openai_api_key:
        return settings.openai_api_key
    if is_loopback(settings.openai_base_url):
        return None
    return os.environ.get("OPENAI_API_KEY") or None


def positive_int(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value) or None
    return None


def _same_model(wanted: str, listed: str) -> bool:
    """Ollama lists `name:latest` for `name`."""
    return listed in (wanted, f"{wanted}:latest") or wanted == f"{listed}:latest"


def retry_at(headers: httpx2.Headers, now: datetime | None = None) -> datetime | None:
    """When a Retry-After header (seconds, or an HTTP date) says to come back."""
    raw = (headers.get("retry-after") or "").strip()
    if not raw:
        return None
    now = now or datetime.now(UTC)
    if raw.isdigit():
        return now + timedelta(seconds=min(int(raw), 86_400))
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


class AnswerTooLarge(Exception):  # raised by Endpoint, translated by its callers
    """The server sent more than ANSWER_MAX_BYTES."""

    def __init__(self) -> None:
        super().__init__(f"the answer is larger than {ANSWER_MAX_BYTES // (1 << 20)} MB")


class Endpoint:
    """HTTP to one OpenAI-compatible server: `base` is its `/v1` URL, `root` the server.
    A request ends within its deadline (httpx2's TimeoutException) and reads at most
    ANSWER_MAX_BYTES (AnswerTooLarge)."""

    def __init__(self, settings: Settings) -> None:
        self.base = settings.openai_base_url.rstrip("/")
        self.shown = uri_without_secrets(self.base)  # what messages name: no password
        self.root = re.sub(r"/v1$", "", self.base)
        self.local = is_loopback(self.base)
        self._key = api_key(settings)
        self._timeout = settings.openai_timeout
        self._client: httpx2.Client | None = None

    @property
    def client(self) -> httpx2.Client:
        if self._client is None:
            import httpx2

            headers = {"authorization": f"Bearer {self._key}"} if self._key else {}
            self._client = limit_client(
                httpx2.Client(
                    headers=headers,
                    timeout=httpx2.Timeout(self._timeout, connect=min(self._timeout, 10.0)),
                    trust_env=not self.local,  # no proxy between us and this machine
                    follow_redirects=False,
                )
            )
        return self._client

    def get(self, url: str, timeout: float = PROBE_TIMEOUT) -> httpx2.Response:
        return self._limited(timeout, lambda: self.client.get(url, timeout=timeout))

    def post(self, url: str, body: dict[str, Any], timeout: float | None = None) -> httpx2.Response:
        # Lone surrogates (a model can send them escaped) cannot be encoded: replaced.
        content = valid_unicode(json.dumps(body, ensure_ascii=False)).encode("utf-8")
        headers = {"content-type": "application/json"}
        seconds = self._timeout if timeout is None else timeout
        client = self.client
        return self._limited(
            seconds, lambda: client.post(url, content=content, headers=headers, timeout=seconds)
        )

    def _limited(self, seconds: float, send: Callable[[], httpx2.Response]) -> httpx2.Response:
        """`send()` within `seconds` in all, reading at most ANSWER_MAX_BYTES."""
        import httpx2

        with limited(seconds) as allowance:
            try:
                return send()
            except httpx2.HTTPError:
                if allowance.tripped == "size":
                    raise AnswerTooLarge() from None
                raise

    def probe_json(self, method: str, url: str, body: dict[str, Any] | None = None) -> Any:
        """A quick informational request: its JSON, or None for any failure."""
        import httpx2

        try:
            response = (
                self.post(url, body or {}, PROBE_TIMEOUT) if method == "POST" else self.get(url)
            )
            return json_loads(response.content) if response.status_code == 200 else None
        except (httpx2.HTTPError, AnswerTooLarge, ValueError):
            return None

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


@dataclass(frozen=True)
class EndpointStatus:
    """What the model list said: whether a backend can use the endpoint now, `detail` (what
    was found or is wrong), `fix` (what to do), the model ids listed (None: it does not list
    them) and the configured model's entry."""

    usable: bool
    detail: str
    fix: str | None = None
    models: tuple[str, ...] | None = None
    entry: dict[str, Any] | None = None

    @property
    def reason(self) -> str:
        return f"{self.detail}: {self.fix}" if self.fix else self.detail


def _pull_hint(endpoint: Endpoint, model: str, listed: list[dict[str, Any]]) -> str:
    """Ollama (its port, or its model list's `owned_by`) pulls models; others load them."""
    if urlsplit(endpoint.base).port == 11434 or any(e.get("owned_by") == "library" for e in listed):
        return f"run `ollama pull {model}`"
    return "load it in the server"


def endpoint_status(settings: Settings, endpoint: Endpoint | None = None) -> EndpointStatus:
    """Whether the endpoint answers `GET /models` and has the configured model."""
    import httpx2

    endpoint = endpoint or Endpoint(settings)
    url, model = endpoint.shown, settings.openai_model
    start = (
        "start the server (`ollama serve`, LM Studio's server, `llama-server`) or fix "
        "MTL_MCP_OPENAI_BASE_URL"
    )
    try:
        response = endpoint.get(f"{endpoint.base}/models")
    except httpx2.TimeoutException:
        return EndpointStatus(False, f"{url} did not answer within {PROBE_TIMEOUT:g} s", start)
    except AnswerTooLarge as exc:
        return EndpointStatus(
            False,
            f"{url}/models sent more than it should ({exc})",
            "check that MTL_MCP_OPENAI_BASE_URL is the API's base, usually ending in /v1",
        )
    except httpx2.HTTPError as exc:
        return EndpointStatus(False, f"nothing answers at {url} ({one_line(str(exc), 120)})", start)
    if response.status_code in (401, 403):
        return EndpointStatus(
            False,
            f"{url} refused the key ({response.status_code})",
            "set MTL_MCP_OPENAI_API_KEY (or openai_api_key in config.toml) to a key it accepts",
        )
    listed: list[dict[str, Any]] | None = None
    if response.status_code == 200:
        try:
            data = json_loads(response.content).get("data")
        except (ValueError, AttributeError):
            data = None
        if not isinstance(data, list):
            return EndpointStatus(
                False,
                f"{url}/models is not an OpenAI-compatible model list",
                "check that MTL_MCP_OPENAI_BASE_URL is the API's base, usually ending in /v1",
            )
        listed = [e for e in data if isinstance(e, dict) and isinstance(e.get("id"), str)]
    ids = tuple(e["id"] for e in listed) if listed is not None else None
    shown = ", ".join(ids[:8]) + (", ..." if ids and len(ids) > 8 else "") if ids else "none"
    if not model:
        return EndpointStatus(
            False,
            "MTL_MCP_OPENAI_MODEL is not set",
            f"set it to a model {url} has ({shown})",
            ids,
        )
    entry = next((e for e in listed or [] if _same_model(model, e["id"])), None)
    if ids and entry is None:
        return EndpointStatus(
            False,
            f"{url} has no model {model!r} (it lists {shown})",
            f"{_pull_hint(endpoint, model, listed or [])}, or set MTL_MCP_OPENAI_MODEL to one "
            "it lists",
            ids,
        )
    where = "on this machine" if endpoint.local else "a remote API"
    has = "lists it" if entry else "does not list its models"
    return EndpointStatus(True, f"{url} ({where}) answers and {has}", None, ids, entry)


def status_error(response: httpx2.Response, step: str, shown: str, model: str) -> DistillError:
    """Our error for an HTTP error status at one step of a request to `shown` (the URL
    without secrets) for `model`."""
    status = response.status_code
    kind, template = _STATUS.get(status, _SERVER_FAULT if status >= 500 else _OTHER_STATUS)
    message = template.format(
        url=shown,
        detail=error_detail(response),
        model=model,
        where=f"at the {step} step",
        status=status,
    )
    if issubclass(kind, DistillUnavailable):
        return DistillUnavailable(message, retry_at=retry_at(response.headers))
    return kind(message)


def error_detail(response: httpx2.Response) -> str:
    """The server's error message, short, secrets redacted."""
    try:
        data = json_loads(response.content)
        error = data.get("error", data) if isinstance(data, dict) else data
        text = error.get("message", error) if isinstance(error, dict) else error
    except ValueError:
        text = response.text
    return redact(one_line(str(text), 200)) or "no detail"
