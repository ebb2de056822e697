"""The one pipeline from a session to stored insights: read -> digest -> judge -> distill ->
lint -> store. The queue worker, the CLI and `record_session` all go through it, whatever
the backend.

At most one distillation runs at a time per data directory (so per user): `learn` holds
`<home>/distill.lock` from the budget check to the stored insights. The worker lock only
keeps two workers off one queue; this one also covers `record_session`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel

from mtl_mcp.config import Settings
from mtl_mcp.errors import DistillUnavailable, MtlError
from mtl_mcp.learning.backends import Backend, is_local
from mtl_mcp.learning.backends.sampling import NeedsAnswer, SampledAnswers, SamplingRequest
from mtl_mcp.learning.backends.select import Chooser, budgets, source_of
from mtl_mcp.learning.distill import (
    DISTILL_MAX_TOKENS,
    distill,
    estimate_run_tokens,
    run_tokens_for,
)
from mtl_mcp.learning.fitting import fit_digest
from mtl_mcp.learning.proposals import DistillResult, JudgedUse
from mtl_mcp.learning.spend import SpendLedger, Usage, estimate_cost
from mtl_mcp.learning.transcripts import Digest, Format, Transcript, build_digest, read_transcript
from mtl_mcp.project import ProjectRef
from mtl_mcp.schemas import (
    GivenInsight,
    InsightDraft,
    NearInsight,
    Outcome,
    Provenance,
    RecordResult,
    VerdictEntry,
)
from mtl_mcp.storage.locks import try_exclusive
from mtl_mcp.text.tokens import estimate_tokens

if TYPE_CHECKING:
    from mtl_mcp.memory import Memory

logger = logging.getLogger(__name__)

# How long a caller waits for another process's distillation to finish: a tool call only a
# minute (its client is waiting); a detached worker as long as a whole run may take.
INTERACTIVE_WAIT = 60.0


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


def worst_case_tokens(
    digest: str, backend: Backend, outcome_hint: Outcome, given: int = 0, kept_notes: bool = False
) -> int:
    """What distilling `digest` (and judging `given` notes) with `backend` may cost at most,
    for the budget check."""
    return estimate_run_tokens(
        digest,
        outcome_hint=outcome_hint,
        extra_per_call=backend.extra_tokens_per_call,
        given=given,
        kept_notes=kept_notes,
    )


def check_budget(settings: Settings, backend: Backend, estimated_tokens: int) -> None:
    """Raise unless today's budgets cover a run: the machine's (not for a local model), and
    a subscription's or a local model's own."""
    rules = budgets(settings, backend)
    ledger(settings).check(
        estimated_tokens, backend=backend.name, backend_daily_tokens=rules.own, local=rules.local
    )


def worker_wait(settings: Settings) -> float:
    """How long the worker waits for a distillation running elsewhere: a whole run (three
    model calls at their deadline) and a minute to store."""
    return 3 * settings.cli_timeout + 60


@contextmanager
def distillation_turn(settings: Settings, wait: float) -> Iterator[None]:
    """Hold the user's one distillation slot, waiting up to `wait` seconds for it."""
    with try_exclusive(settings.home / "distill.lock", wait) as mine:
        if not mine:
            raise DistillUnavailable(
                f"another distillation is running on this machine and did not finish within "
                f"{wait:g} s; try again later (a queued job is retried by itself)"
            )
        yield


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
    backend: str | None  # None: nothing can distil it now (`backend_reason` says why)
    backend_reason: str
    model: str | None
    subscription: bool  # the tokens come from the user's subscription, not API credit
    local: bool = False  # a model on this machine: no money or quota spent
    worst_case_tokens: int | None
    worst_case_usd: float  # 0 for a subscription: it costs quota, not money
    trivial: bool


def estimate(path: Path, settings: Settings, fmt: Format, outcome: Outcome) -> Estimate:
    """The digest of a transcript, the backend that would distil it and the worst-case
    cost; sends nothing."""
    transcript, digest = digest_transcript(path, settings, fmt)
    choice = Chooser(settings).choose(transcript.format)
    backend = choice.backend
    if backend is not None:
        digest = fit_digest(transcript, digest, backend, settings)
    worst = worst_case_tokens(digest.text, backend, outcome) if backend else None
    cost = 0.0
    local = backend is not None and is_local(backend)
    if backend is not None and worst is not None and not backend.uses_subscription and not local:
        cost = estimate_cost(worst - DISTILL_MAX_TOKENS, DISTILL_MAX_TOKENS, backend.model)
    return Estimate(
        format=transcript.format,
        skipped_lines=transcript.skipped,
        digest=digest.text,
        digest_tokens=estimate_tokens(digest.text),
        backend=backend.name if backend else None,
        backend_reason=choice.reason,
        model=backend.model if backend else None,
        subscription=bool(backend and backend.uses_subscription),
        local=local,
        worst_case_tokens=worst,
        worst_case_usd=round(cost, 5),
        trivial=digest.trivial,
    )


def backend_summary(settings: Settings, source: str | None) -> str:
    """For people (`mtl-mcp install`): which backend distils the sessions of `source` and
    what a session costs at most, or why none would be distilled now."""
    choice = Chooser(settings).choose(source)
    backend = choice.backend
    if backend is None:
        return f"sessions wait in the queue, not distilled: {choice.reason}"
    worst = run_tokens_for(settings.digest_tokens, extra_per_call=backend.extra_tokens_per_call)
    if is_local(backend):
        limit = settings.local_daily_tokens
        daily = "no daily limit" if limit is None else f"at most {limit:,} tokens a day"
        cost = (
            f"no charge (it runs on this machine); at most ~{worst:,} tokens a session, "
            f"{daily} (MTL_MCP_LOCAL_DAILY_TOKENS)"
        )
    elif backend.uses_subscription:
        cost = (
            f"no API charge; a session uses at most ~{worst:,} tokens of your subscription's "
            f"quota, and all sessions together at most {settings.subscription_daily_tokens:,} "
            "a day (MTL_MCP_SUBSCRIPTION_DAILY_TOKENS)"
        )
    else:
        usd = estimate_cost(worst - DISTILL_MAX_TOKENS, DISTILL_MAX_TOKENS, backend.model)
        cost = (
            f"at most ~${usd:.4f} a session, and at most {settings.daily_token_budget:,} "
            "tokens a day (MTL_MCP_DAILY_TOKENS)"
        )
    return f"sessions are distilled by {choice.reason}: {cost}"


class Recorder(Protocol):
    """Where distilled insights go: a `Memory`, or the running service's (which keeps its
    deduplication exact across every window and worker)."""

    settings: Settings

    def record(
        self,
        drafts: Sequence[InsightDraft | dict[str, Any]],
        provenance: Provenance | None = None,
        project_name: str | None = None,
    ) -> list[RecordResult]: ...

    def given_insights(self, session_id: str) -> list[GivenInsight]: ...

    def record_verdicts(self, entries: Sequence[VerdictEntry]) -> None: ...

    def nearest(self, text: str, k: int = ...) -> list[NearInsight]: ...

    def confirm(
        self, ids: Sequence[str], provenance: Provenance | None = None
    ) -> list[RecordResult]: ...


def learn(
    memory: Recorder,
    digest: str,
    *,
    backend: Backend,
    outcome_hint: Outcome,
    project: ProjectRef | None,
    provenance: Provenance,
    wait: float,
    given: Sequence[GivenInsight] = (),
    kept_notes: bool = False,
) -> Learned:
    """Distil `digest` within today's token budgets and record what comes out, once no other
    distillation runs (waiting up to `wait` seconds for one). The judge's verdicts on the
    insights the session was `given` are recorded as feedback, with the session, the
    backend and the plan each was recalled for. `kept_notes`: the digest is notes an
    assistant keeps, not a session (see `distill`).

    Raises DistillError (BudgetExceeded and DistillUnavailable are Retryable); tokens spent
    by a failed call are still counted against the budget.
    """
    settings = memory.settings
    name = project.name if project else None
    with distillation_turn(settings, wait):
        worst = worst_case_tokens(digest, backend, outcome_hint, len(given), kept_notes)
        check_budget(settings, backend, worst)
        usage = Usage()
        # The client's model was asked without them (`next_sampling_request`): its
        # answers are replayed as given.
        known = [] if isinstance(backend, SampledAnswers) else memory.nearest(digest)
        try:
            result = distill(
                digest,
                backend,
                outcome_hint=outcome_hint,
                project_name=name,
                usage=usage,
                given=given,
                kept_notes=kept_notes,
                known=known,
            )
        finally:
            ledger(settings).record(
                usage.total_tokens,
                session=provenance.session_id,
                backend=backend.name,
                local=is_local(backend),
            )
        stamped = provenance.model_copy(update={"distilled_by": backend.model})
        results = memory.record(result.drafts, stamped, project_name=name)
        if result.confirmed:  # support + 1 instead of a row that says it again
            results += memory.confirm(result.confirmed, stamped)
        if result.uses and provenance.session_id:
            _record_uses(memory, provenance.session_id, backend.name, result.uses)
    return Learned(result, results, backend.name, backend.model)


def _record_uses(
    memory: Recorder, session_id: str, backend: str, uses: Sequence[JudgedUse]
) -> None:
    """Store the verdicts; a failure loses them, never the insights already stored."""
    entries = [
        VerdictEntry(
            session_id=session_id,
            insight=use.given.id,
            verdict=use.verdict,
            mode=use.mode,
            reason=use.reason or None,
            backend=backend,
            plan=use.given.plan,
            trigger=use.given.trigger,
        )
        for use in uses
    ]
    try:
        memory.record_verdicts(entries)
    except MtlError as exc:
        logger.warning("the verdicts of session %s were not stored: %s", session_id, exc)


@dataclass(frozen=True)
class SessionDigest:
    """What `record_session` distils: the transcript's digest, else the summary; and the
    assistant behind it ('claude-code', 'codex' or None), for `auto`."""

    text: str
    source: str | None


def session_digest(
    settings: Settings, summary: str, transcript_path: str | None, client: str | None
) -> SessionDigest:
    """The digest for `record_session`; `client` is the MCP client's name, which tells the
    assistant when no transcript does. A transcript must be one the assistants wrote
    (`discovery.known_transcript`): InputError for any other file."""
    if not transcript_path:
        return SessionDigest(summary, source_of(client))
    from mtl_mcp.learning.discovery import known_transcript

    transcript, condensed = digest_transcript(known_transcript(transcript_path), settings)
    return SessionDigest(condensed.text, source_of(transcript.format) or source_of(client))


def learn_from_summary(
    memory: Memory,
    session: SessionDigest,
    outcome: Outcome,
    project: ProjectRef | None,
    provenance: Provenance,
    backend: Backend | None = None,
    given: Sequence[GivenInsight] = (),
) -> tuple[list[RecordResult], str]:
    """For `record_session` without insights: distil the session with `backend` (the
    client model's answers, when it sampled), else with the one `auto` (or the setting)
    picks; the judge rates what the session was `given`. Returns the results and a note
    saying how the insights were obtained (or why none were)."""
    if not session.text.strip():
        return [], "nothing recorded: the summary is empty and no transcript was given"
    if backend is None:
        choice = Chooser(memory.settings).choose(session.source)
        if choice.backend is None:
            return [], f"nothing recorded: pass 0-3 insights you wrote ({choice.reason})"
        backend = choice.backend
    learned = learn(
        memory,
        session.text,
        backend=backend,
        outcome_hint=outcome,
        project=project,
        provenance=provenance,
        wait=INTERACTIVE_WAIT,
        given=given,
    )
    return learned.results, (
        f"distilled with {learned.model} via {learned.backend}: {learned.distilled.outcome}"
    )


def next_sampling_request(
    settings: Settings,
    session: SessionDigest,
    answers: list[str],
    outcome: Outcome,
    project: ProjectRef | None,
    given: Sequence[GivenInsight] = (),
) -> SamplingRequest | None:
    """The next question for the client's model (MCP sampling), given its `answers` to the
    earlier ones; None once they are all the pipeline needs. Before the first question,
    today's budgets must cover the run. Raises DistillError (an unusable answer, a spent
    budget)."""
    replay = SampledAnswers(answers, "replay")
    if not answers:
        worst = worst_case_tokens(session.text, replay, outcome, len(given))
        check_budget(settings, replay, worst)
    try:
        distill(
            session.text,
            replay,
            outcome_hint=outcome,
            project_name=project.name if project else None,
            given=given,
        )
    except NeedsAnswer as pending:
        return pending.request
    return None
