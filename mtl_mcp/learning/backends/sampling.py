"""MCP sampling as a backend: the client's own model, through `sampling/createMessage`.

Used by `record_session` without insights, when the client declared the sampling
capability. Sampling has no structured output: each request carries the answer's JSON
schema in its system prompt, and the text that comes back is parsed and checked like the
command-line backends' (`structured`).

A server cannot hold a tool call open while the client samples (from protocol 2026-07-28
the tool returns its question and the client calls again with the answer), so the
conversation is replayed: `SampledAnswers` answers the pipeline's calls from the answers
received so far and, at the first question it has no answer for, stops the pipeline with
`NeedsAnswer` (control flow, not an error: `pipeline.next_sampling_request` catches it).
The same pipeline, prompts, redaction and lint run every round; a run asks at most three
questions (judge, distill, repair). Clients report no token usage: the ledger counts
estimates of each prompt and answer.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from mtl_mcp.learning.backends import Answer
from mtl_mcp.learning.backends.structured import json_in_text, parse_answer, strict_schema, unusable
from mtl_mcp.learning.spend import Usage
from mtl_mcp.text.tokens import estimate_tokens

SAMPLING_BACKEND = "mcp-sampling"
ANSWER_MAX_CHARS = 256 * 1024  # an answer is a few KB: a longer one is not read
_FIX = "the client's model could not follow the schema; pass the insights yourself"


@dataclass(frozen=True)
class SamplingRequest:
    """One question for the client's model."""

    system: str
    user: str
    max_tokens: int


class NeedsAnswer(Exception):  # control flow, not an error: outside the error tree
    """The pipeline reached a question no answer has been received for yet."""

    def __init__(self, request: SamplingRequest) -> None:
        super().__init__("the pipeline needs another answer from the client's model")
        self.request = request


def _with_schema(system: str, answer: type[Answer]) -> str:
    """The system prompt plus the instruction to answer with JSON of `answer`'s schema."""
    schema = json.dumps(strict_schema(answer), separators=(",", ":"))
    return (
        f"{system}\n\nAnswer with one JSON object and nothing else (no prose, no code fence), "
        f"matching this JSON schema:\n{schema}"
    )


class SampledAnswers:
    """A backend that answers from what the client's model already said, in order."""

    name = SAMPLING_BACKEND
    uses_subscription = True  # the client's model: the user's quota, not our API credit
    extra_tokens_per_call = 0

    def __init__(self, answers: Sequence[str], model: str) -> None:
        self._answers = list(answers)
        self._asked = 0
        self.model = model

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
        prompt = _with_schema(system, answer)
        if self._asked >= len(self._answers):
            raise NeedsAnswer(SamplingRequest(prompt, user, max_tokens))
        text = self._answers[self._asked]
        self._asked += 1
        usage.add(estimate_tokens(prompt + user), estimate_tokens(text))
        if len(text) > ANSWER_MAX_CHARS:
            raise unusable(step, f"the answer is {len(text):,} characters long", _FIX)
        try:
            data = json_in_text(text)
        except ValueError:
            raise unusable(step, "the answer is not JSON", _FIX) from None
        return parse_answer(data, answer, step=step, fix=_FIX)
