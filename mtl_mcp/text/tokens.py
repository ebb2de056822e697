"""Token estimates for text sent to a language model, before anything is spent.

One estimate for every purpose (the digest's budget, the dry run, the spend check): about
3.2 ASCII characters per token, and one token per other character. Deliberately high (the
Haiku 5.5 tokenizer counts ~30% more than older ones): a budget check must overestimate.
"""

from __future__ import annotations

import math

CHARS_PER_TOKEN = 3.2


def estimate_tokens(text: str) -> int:
    """A conservative token count for `text`."""
    ascii_chars = sum(1 for ch in text if ch.isascii())
    return math.ceil(ascii_chars / CHARS_PER_TOKEN) + (len(text) - ascii_chars)


def chars_for_tokens(tokens: int) -> int:
    """How many ASCII characters `estimate_tokens` counts as at most `tokens` tokens."""
    return int(tokens * CHARS_PER_TOKEN)
