"""The one pipeline from a session to stored insights: read -> digest -> judge -> distill ->
lint -> store. The queue worker, the CLI and `record_session` all go through it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from mtl_mcp.config import Settings
from mtl_mcp.learning.backends import Backend
from mtl_mcp.learning.backends.select import choose_backend
from mtl_mcp.learning.distill import DISTILL_MAX_TOKENS, distill, estimate_run_tokens
from mtl_mcp.learning.proposals import DistillResult
from mtl_mcp.learning.spend import SpendLedger, Usage, estimate_cost
from mtl_mcp.learning.transcripts import Digest, Format, Transcript, build_digest, read_transcript
from mtl_mcp.memory import Memory
from mtl_mcp.project import ProjectRef
from mtl_mcp.schemas import Outcome, Provenance, RecordResult
from mtl_mcp.text.tokens import estimate_tokens


@dataclass
class Learned:
    """What one pass through the pipeline distilled and what the memory made of it."""

    distilled: DistillResult
    results: list[RecordResult]
    backend: str
    model: str

    @property
    def stored(self) -> int:
        return sum(r.status == "stored" for r in self.results)


def ledger(settings: Settings) -> SpendLedger:
    """The machine's spend ledger, with today's budget."""
    return SpendLedger(settings.home / "spend", settings.daily_token_budget)


def digest_transcript(
    path: Path, settings: Settings, fmt: Format = "auto"
) -> tuple[Transcript, Digest]:
    """Read a transcript (bad lines skipped) and condense it within the digest budget."""
    transcript = read_transcript(path, fmt)
    return transcript, build_digest(transcript, token_budget=settings.digest_tokens)


class Estimate(BaseModel):
    """What distilling a transcript would send and cost (`mtl-mcp distill --dry-run`)."""

    format: str
    skipped_lines: int
    digest: str
    digest_tokens: int
    worst_case_tokens: int
    worst_case_usd: float
    model: str
    trivial: bool


def estimate(path: Path, settings: Settings, fmt: Format, outcome: Outcome) -> Estimate:
    """The digest of a transcript and the worst-case cost of distilling it; sends nothing."""
    transcript, digest = digest_transcript(path, settings, fmt)
    worst = estimate_run_tokens(digest.text, outcome_hint=outcome)
    cost = estimate_cost(worst - DISTILL_MAX_TOKENS, DISTILL_MAX_TOKENS, settings.distill_model)
    return Estimate(
        format=transcript.format,
        skipped_lines=transcript.skipped,
        digest=digest.text,
        digest_tokens=estimate_tokens(digest.text),
        worst_case_tokens=worst,
        worst_case_usd=round(cost, 5),
        model=settings.distill_model,
        trivial=digest.trivial,
    )


def learn(
    memory: Memory,
    digest: str,
    *,
    backend: Backend,
    outcome_hint: Outcome,
    project: ProjectRef,
    provenance: Provenance,
) -> Learned:
    """Distil `digest` within today's token budget and record what comes out.

    Raises DistillError (BudgetExceeded and DistillUnavailable are Retryable); tokens spent
    by a failed call are still counted against the budget.
    """
    spend = ledger(memory.settings)
    spend.check(estimate_run_tokens(digest, outcome_hint=outcome_hint))
    usage = Usage()
    try:
        result = distill(
            digest, backend, outcome_hint=outcome_hint, project_name=project.name, usage=usage
        )
    finally:
        spend.record(usage.total_tokens, session=provenance.session_id)
    stamped = provenance.model_copy(update={"distilled_by": backend.model})
    results = memory.record(result.drafts, stamped, project_name=project.name)
    return Learned(result, results, backend.name, backend.model)


def learn_from_summary(
    memory: Memory,
    summary: str,
    transcript_path: str | None,
    outcome: Outcome,
    project: ProjectRef,
    provenance: Provenance,
) -> tuple[list[RecordResult], str]:
    """For `record_session` without insights: distil the transcript, else the summary.

    Returns the results and a note saying how the insights were obtained (or why none were).
    """
    backend = choose_backend(memory.settings)
    if backend is None:
        return [], (
            "nothing recorded: pass 0-3 insights you wrote, or configure ANTHROPIC_API_KEY "
            "so the summary or transcript can be distilled"
        )
    digest = summary
    if transcript_path:
        _, condensed = digest_transcript(Path(transcript_path).expanduser(), memory.settings)
        digest = condensed.text
    if not digest.strip():
        return [], "nothing recorded: the summary is empty and no transcript was given"
    learned = learn(
        memory,
        digest,
        backend=backend,
        outcome_hint=outcome,
        project=project,
        provenance=provenance,
    )
    return learned.results, f"distilled with {learned.model}: {learned.distilled.outcome}"
