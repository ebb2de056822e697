"""Which backend distils a session (`MTL_MCP_DISTILL_BACKEND`).

`auto` uses an OpenAI-compatible endpoint whenever one is configured
(MTL_MCP_OPENAI_BASE_URL): that is an explicit choice, a local one sends nothing off the
machine and costs no quota, so it comes first, and while it cannot serve (its server is
down, the model missing) the job waits rather than go to a backend that would send the
digest elsewhere. Otherwise `auto` uses the Anthropic API when a key is configured;
otherwise, for `record_session`, the client's own model when it offers MCP sampling;
otherwise the command-line tool of the assistant that produced the transcript (Claude Code
transcripts -> `claude`, Codex rollouts -> `codex`; any other source tries both, Claude
Code first), when it is installed, new enough and logged in. Otherwise nothing distils the
session: the job waits in the queue and the `Choice` says why. A budget of 0 turns a backend
off (`MTL_MCP_DAILY_TOKENS=0` all of them but a local model,
`MTL_MCP_SUBSCRIPTION_DAILY_TOKENS=0` the ones that spend a subscription,
`MTL_MCP_LOCAL_DAILY_TOKENS=0` a local model).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mtl_mcp.config import Settings
from mtl_mcp.learning.backends import Backend, is_local
from mtl_mcp.learning.backends.anthropic_api import AnthropicBackend, has_api_key
from mtl_mcp.learning.backends.child import CliStatus
from mtl_mcp.learning.backends.claude_code import ClaudeCodeBackend, claude_status
from mtl_mcp.learning.backends.codex import CodexBackend, codex_status
from mtl_mcp.learning.backends.openai_compat import OpenAIBackend
from mtl_mcp.learning.backends.openai_endpoint import EndpointStatus, endpoint_status, is_loopback

CLI_BACKENDS = ("claude-code", "codex")
NO_API_KEY = "ANTHROPIC_API_KEY is not set (export it or add anthropic_api_key to config.toml)"
_STATUS: dict[str, Callable[[Settings], CliStatus]] = {
    "claude-code": claude_status,
    "codex": codex_status,
}


@dataclass(frozen=True)
class Choice:
    """The backend for a session, or None; `reason` says how it was chosen, or why none was
    (what `mtl-mcp queue`, `doctor` and `install` show)."""

    backend: Backend | None
    reason: str


@dataclass(frozen=True)
class Budgets:
    """The daily budgets that hold a backend: the machine's (`daily`), and its own (`own`
    tokens, None for none); `local` backends spend nothing but their own."""

    daily: bool
    own: int | None
    local: bool


def budgets(settings: Settings, backend: Backend) -> Budgets:
    """Which budgets a run of `backend` must fit."""
    if is_local(backend):
        return Budgets(daily=False, own=settings.local_daily_tokens, local=True)
    own = settings.subscription_daily_tokens if backend.uses_subscription else None
    return Budgets(daily=True, own=own, local=False)


def sampling_allowed(settings: Settings) -> bool:
    """Whether `record_session` may distil through the client's own model (MCP sampling,
    when the client offers it): only under `auto`, without an endpoint or an API key, with
    budgets."""
    return (
        settings.distill_backend == "auto"
        and not settings.openai_base_url
        and not has_api_key(settings)
        and settings.daily_token_budget > 0
        and settings.subscription_daily_tokens > 0
    )


def source_of(producer: str | None) -> str | None:
    """The assistant behind a transcript format or an MCP client name: 'claude-code',
    'codex' or None."""
    name = (producer or "").lower()
    if name.startswith("claude-code"):
        return "claude-code"
    if name.startswith("codex"):
        return "codex"
    return None


class Chooser:
    """Chooses backends for sessions; each CLI is checked at most once per chooser (a check
    runs the CLI three times), so make one per batch of jobs, not one per process."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._status: dict[str, CliStatus] = {}
        self._endpoint: tuple[EndpointStatus, OpenAIBackend | None] | None = None

    def _status_of(self, cli: str) -> CliStatus:
        if cli not in self._status:
            self._status[cli] = _STATUS[cli](self.settings)
        return self._status[cli]

    def choose(self, source: str | None) -> Choice:
        """The backend for a session produced by `source` (see `source_of`)."""
        settings = self.settings
        wanted = settings.distill_backend
        if wanted == "off":
            return Choice(None, "distillation is off (MTL_MCP_DISTILL_BACKEND=off)")
        if wanted == "openai" or (wanted == "auto" and settings.openai_base_url):
            return self._openai(wanted)
        if settings.daily_token_budget == 0:
            return Choice(None, "distillation is off (the daily budget MTL_MCP_DAILY_TOKENS is 0)")
        if wanted == "anthropic" or (wanted == "auto" and has_api_key(settings)):
            if not has_api_key(settings):
                return Choice(None, f"MTL_MCP_DISTILL_BACKEND=anthropic, but {NO_API_KEY}")
            how = "as configured" if wanted == "anthropic" else "auto: an API key is set"
            return Choice(AnthropicBackend(settings), f"the Anthropic API ({how})")
        if settings.subscription_daily_tokens == 0:
            off = "the subscription backends are off (MTL_MCP_SUBSCRIPTION_DAILY_TOKENS=0)"
            return Choice(None, f"{NO_API_KEY}, and {off}" if wanted == "auto" else off)
        if wanted != "auto":
            return self._cli(wanted, f"as configured (MTL_MCP_DISTILL_BACKEND={wanted})")
        source = source_of(source)
        candidates = [source] if source in CLI_BACKENDS else list(CLI_BACKENDS)
        problems = []
        for cli in candidates:
            choice = self._cli(cli, f"auto: no API key, {_whose(source)}")
            if choice.backend is not None:
                return choice
            problems.append(choice.reason)
        return Choice(None, f"no model to distil with: {NO_API_KEY}; " + "; ".join(problems))

    def _openai(self, wanted: str) -> Choice:
        settings = self.settings
        url = settings.openai_base_url
        if not url:
            return Choice(
                None,
                "MTL_MCP_DISTILL_BACKEND=openai, but MTL_MCP_OPENAI_BASE_URL is not set "
                "(e.g. http://127.0.0.1:11434/v1 for Ollama)",
            )
        local = is_loopback(url)
        only = (
            "; auto uses only the configured endpoint: unset MTL_MCP_OPENAI_BASE_URL for "
            "another backend"
            if wanted == "auto"
            else ""
        )
        if local and settings.local_daily_tokens == 0:
            return Choice(None, f"the local model is off (MTL_MCP_LOCAL_DAILY_TOKENS=0){only}")
        if not local and settings.daily_token_budget == 0:
            return Choice(
                None, f"distillation is off (the daily budget MTL_MCP_DAILY_TOKENS is 0){only}"
            )
        if self._endpoint is None:  # one model-list request per chooser
            status = endpoint_status(settings)
            backend = OpenAIBackend(settings, status) if status.usable else None
            self._endpoint = (status, backend)
        status, found = self._endpoint
        if found is None:
            return Choice(None, status.reason + only)
        how = "as configured" if wanted == "openai" else "auto: MTL_MCP_OPENAI_BASE_URL is set"
        whose = "your local model" if local else "the remote API, model"
        return Choice(found, f"{whose} {found.model} ({how}; {status.detail})")

    def _cli(self, cli: str, how: str) -> Choice:
        status = self._status_of(cli)
        if status.executable is None:
            return Choice(None, status.detail)
        backend: Backend = (
            ClaudeCodeBackend(self.settings, status.executable)
            if cli == "claude-code"
            else CodexBackend(self.settings, status.executable)
        )
        return Choice(backend, f"your {cli} login, model {backend.model} ({how}; {status.detail})")


def _whose(source: str | None) -> str:
    if source is None:
        return "a session from another client"
    return f"a {source} session"
