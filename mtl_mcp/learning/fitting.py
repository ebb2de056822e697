"""Digests that fit the model: a backend whose model has a small context window (a local
model, through `openai_compat`) gets its session digest built for that window.

The room for a digest is the window less the prompts and the longest answer; a digest
needing more is rebuilt with that budget, so the digest's own priorities (the first
request, errors, test results, how it ended) decide what stays. The backend still cuts any
request that would not fit (a summary, a repair round), as a last resort.
"""

from __future__ import annotations

from mtl_mcp.config import Settings
from mtl_mcp.learning.backends import Backend
from mtl_mcp.learning.distill import DISTILL_MAX_TOKENS, PROMPT_OVERHEAD
from mtl_mcp.learning.transcripts import Digest, Transcript, build_digest

MIN_DIGEST_TOKENS = 200  # the smallest digest `build_digest` makes sense of
# Our system prompt with its schema runs ~1,500 tokens by the high estimate; what
# PROMPT_OVERHEAD leaves out of that, and the chat template's markers.
EXTRA_OVERHEAD = 600


def digest_room(backend: Backend, settings: Settings) -> int:
    """The digest tokens `backend`'s model has room for: the configured budget, or less
    when its context window (a `context_tokens` attribute) is smaller."""
    context = getattr(backend, "context_tokens", None)
    if not isinstance(context, int) or isinstance(context, bool):
        return settings.digest_tokens
    room = context - PROMPT_OVERHEAD - EXTRA_OVERHEAD - DISTILL_MAX_TOKENS
    return max(MIN_DIGEST_TOKENS, min(settings.digest_tokens, room))


def fit_digest(
    transcript: Transcript, digest: Digest, backend: Backend, settings: Settings
) -> Digest:
    """`digest`, rebuilt smaller if `backend`'s model has no room for it."""
    room = digest_room(backend, settings)
    if room >= settings.digest_tokens:
        return digest
    return build_digest(transcript, token_budget=room)
