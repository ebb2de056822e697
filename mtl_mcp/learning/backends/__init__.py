"""Where distillation's model calls go: one `Backend` per way of reaching a model.

A backend answers one structured-output request at a time: a system prompt, a user message
and a pydantic model to fill. It adds the tokens it spent to `usage` (also when it fails)
and raises only `DistillError`s: `DistillUnavailable` when trying again later may help.

    openai_compat  an OpenAI-compatible chat endpoint: a local model (Ollama, LM Studio,
                   llama.cpp, vLLM) or a remote API or gateway
    anthropic_api  the Anthropic API with an API key (pay per token)
    claude_code    the user's Claude Code login: `claude -p`
    codex          the user's Codex login: `codex exec`
    sampling       the MCP client's own model, through `sampling/createMessage`
    select         which one distils a session (`MTL_MCP_DISTILL_BACKEND`)
    child, structured   what the command-line backends share
    (`answers`, one level up, counts how a backend's answers ended)
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from pydantic import BaseModel

from mtl_mcp.learning.spend import Usage

Answer = TypeVar("Answer", bound=BaseModel)


class Backend(Protocol):
    """A way to ask a model for structured output."""

    @property
    def name(self) -> str:
        """What `mtl-mcp queue` and the provenance call it, e.g. 'anthropic'."""
        ...

    @property
    def model(self) -> str:
        """The model that answers (for provenance and the price estimate)."""
        ...

    @property
    def uses_subscription(self) -> bool:
        """Whether calls spend the user's assistant subscription rather than API credit:
        such a backend also has its own, smaller daily budget."""
        ...

    @property
    def extra_tokens_per_call(self) -> int:
        """Input tokens a call costs beyond our prompts and schema (the tool's own system
        prompt and tools), for the worst-case estimate a budget check needs."""
        ...

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
        """One request; `step` names it in errors (judge, distill, repair)."""
        ...


def is_local(backend: Backend) -> bool:
    """Whether `backend` runs a model on this machine, spending neither money nor quota
    (such a backend has a `local` attribute that says so)."""
    return getattr(backend, "local", False) is True
