"""Which backend distils: the Anthropic API when a key is configured, else none."""

from __future__ import annotations

from mtl_mcp.config import Settings
from mtl_mcp.learning.backends import Backend
from mtl_mcp.learning.backends.anthropic_api import AnthropicBackend, has_api_key

NO_BACKEND = (
    "no model to distil with: ANTHROPIC_API_KEY is not set; export it or add "
    "anthropic_api_key to config.toml (the job stays queued and is retried)"
)


def choose_backend(settings: Settings) -> Backend | None:
    """The backend for a distillation, or None when no model can be reached."""
    if has_api_key(settings):
        return AnthropicBackend(settings)
    return None
