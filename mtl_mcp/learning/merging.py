"""A consolidation merge written by the distillation backend: one insight for a cluster of
paraphrases (`Memory.consolidate(merger=...)`).

It also weighs each contradiction a pass flags: whether the two truly contradict, or each
holds in its own scope. Its words are added to the flag's reason; the flag stays, for the
user to settle.

Used only when a backend is configured explicitly (`MTL_MCP_DISTILL_BACKEND` other than
`auto` and `off`): an idle pass of the service must not spend a subscription's quota or an
API's credit the user did not point it at. Each merge is one call, within today's budgets
like a distillation, and its tokens are counted. Without a backend (or when a call fails)
the merge keeps the best existing wording instead.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field

from mtl_mcp.config import Settings
from mtl_mcp.errors import DistillError
from mtl_mcp.learning import prompts
from mtl_mcp.learning.backends import Answer, Backend, is_local
from mtl_mcp.learning.backends.select import Chooser
from mtl_mcp.learning.pipeline import check_budget, ledger
from mtl_mcp.learning.proposals import DistilledInsights, check
from mtl_mcp.learning.spend import Usage
from mtl_mcp.schemas import Insight, InsightDraft
from mtl_mcp.text.redact import redact
from mtl_mcp.text.render import one_line
from mtl_mcp.text.tokens import estimate_tokens

logger = logging.getLogger(__name__)

MERGE_MAX_TOKENS = 800
WORDINGS_MAX = 8  # the most central wordings are enough to write the lesson once


class BackendMerger:
    """Asks `backend` to write one insight for a cluster (see the module docstring)."""

    def __init__(self, settings: Settings, backend: Backend) -> None:
        self.settings = settings
        self.backend = backend
        self.name = backend.model

    def weigh(self, first: Insight, second: Insight) -> str | None:
        return weigh_conflict(self, first, second)

    def ask(self, step: str, system: str, user: str, answer: type[Answer], most: int) -> Answer:
        """One call within today's budgets, its tokens counted even when it fails."""
        worst = estimate_tokens(system + user) + most + self.backend.extra_tokens_per_call
        check_budget(self.settings, self.backend, worst)
        usage = Usage()
        try:
            return self.backend.ask(
                step=step, system=system, user=user, answer=answer, max_tokens=most, usage=usage
            )
        finally:
            ledger(self.settings).record(
                usage.total_tokens,
                session=None,
                backend=self.backend.name,
                local=is_local(self.backend),
            )

    def __call__(self, insights: Sequence[Insight]) -> InsightDraft | None:
        wordings = [(i.title, i.description, i.content) for i in insights[:WORDINGS_MAX]]
        answer = self.ask(
            "merge",
            prompts.merge_system(),
            prompts.merge_user(wordings),
            DistilledInsights,
            MERGE_MAX_TOKENS,
        )
        if not answer.insights:
            return None
        polarity = insights[0].polarity
        checked = check(answer.insights[0], polarity, None)
        if checked.draft is None or checked.errors:
            logger.info("the merge %s wrote was rejected: %s", self.name, checked.errors)
            return None
        # The cluster's labels, which the model need not repeat.
        return checked.draft.model_copy(
            update={"domain": checked.draft.domain or insights[0].domain}
        )


class ConflictJudgement(BaseModel):
    """Whether two lessons that seem to disagree contradict each other."""

    verdict: Literal["contradict", "scoped", "same"] = Field(
        description="'contradict': at most one can be right; 'scoped': each holds in its own "
        "scope; 'same': they say the same thing."
    )
    reason: str = Field(description="One short line.")


def weigh_conflict(merger: BackendMerger, first: Insight, second: Insight) -> str | None:
    """What the model makes of a flagged pair, in a few words, or None if it did not say:
    an opinion added to the flag, never a decision (the flag stays for the user)."""
    answer = merger.ask(
        "conflict",
        prompts.CONFLICT_SYSTEM,
        prompts.conflict_user((first.title, first.content), (second.title, second.content)),
        ConflictJudgement,
        200,
    )
    words = {
        "contradict": "they contradict",
        "scoped": "each holds in its scope",
        "same": "they say the same",
    }
    return f"{merger.name} says {words[answer.verdict]}: {one_line(redact(answer.reason), 160)}"


def cluster_merger(settings: Settings) -> BackendMerger | None:
    """The merger for consolidation when a backend is configured explicitly, else None."""
    if settings.distill_backend in ("auto", "off"):
        return None
    try:
        choice = Chooser(settings).choose(None)
    except DistillError as exc:
        logger.info("consolidation merges keep the best wording: %s", exc)
        return None
    if choice.backend is None:
        logger.info("consolidation merges keep the best wording: %s", choice.reason)
        return None
    return BackendMerger(settings, choice.backend)
