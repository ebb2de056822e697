"""Distillation: a session digest in, 0-3 abstract insights out, through any `Backend`.

A judge labels the session (unless the caller knows the outcome), the model writes insights
with instructions for that outcome, and every insight passes the abstraction lint; those
with problems get one repair round, and any still failing the lint's errors are dropped
(with the reason kept in `dropped`). The digest is redacted again before it is sent.
"""

from __future__ import annotations

from mtl_mcp.errors import DistillError, UnusableOutput
from mtl_mcp.learning import prompts
from mtl_mcp.learning.backends import Backend
from mtl_mcp.learning.proposals import (
    MAX_INSIGHTS,
    REASON_MAX,
    Checked,
    DistilledInsights,
    DistillResult,
    JudgedOutcome,
    Judgement,
    check,
)
from mtl_mcp.learning.spend import Usage
from mtl_mcp.schemas import InsightDraft, Outcome
from mtl_mcp.text.redact import redact
from mtl_mcp.text.render import one_line
from mtl_mcp.text.tokens import estimate_tokens

JUDGE_MAX_TOKENS = 200
DISTILL_MAX_TOKENS = 1500
REPAIR_MAX_TOKENS = 1500
PROMPT_OVERHEAD = 1200  # system prompt and schema, in tokens


def estimate_run_tokens(
    digest: str, *, outcome_hint: Outcome = "unknown", extra_per_call: int = 0
) -> int:
    """Worst-case tokens of one `distill()` run on `digest`, for a budget check beforehand:
    the judge call (unless a hint skips it), the distill call and a repair round, each at
    its full `max_tokens`, each with the backend's `extra_per_call` input tokens."""
    return run_tokens_for(
        estimate_tokens(digest), outcome_hint=outcome_hint, extra_per_call=extra_per_call
    )


def run_tokens_for(
    digest_tokens: int, *, outcome_hint: Outcome = "unknown", extra_per_call: int = 0
) -> int:
    """`estimate_run_tokens` for a digest of `digest_tokens` tokens."""
    overhead = PROMPT_OVERHEAD + extra_per_call
    total = digest_tokens + overhead + DISTILL_MAX_TOKENS
    total += 2 * PROMPT_OVERHEAD + extra_per_call + REPAIR_MAX_TOKENS + DISTILL_MAX_TOKENS
    if outcome_hint == "unknown":
        total += digest_tokens + overhead + JUDGE_MAX_TOKENS
    return total


def distill(
    digest: str,
    backend: Backend,
    *,
    outcome_hint: Outcome = "unknown",
    project_name: str | None = None,
    usage: Usage | None = None,
) -> DistillResult:
    """Judge the session (unless `outcome_hint` says), write insights, lint and repair them.

    Raises DistillError (`DistillUnavailable` when a retry may help) when a call fails; a
    judge answer that is unusable falls back to 'unclear' instead. Tokens spent accumulate
    in `usage`, failed calls included.
    """
    usage = usage if usage is not None else Usage()
    digest = redact(digest)
    if not digest.strip():  # nothing to learn from, and nothing worth paying for
        empty: JudgedOutcome = "unclear" if outcome_hint == "unknown" else outcome_hint
        return DistillResult(outcome=empty, reason="the session digest is empty", drafts=[])
    outcome, reason = _judge(digest, backend, outcome_hint, usage)
    proposed = backend.ask(
        step="distill",
        system=prompts.distill_system(outcome, project_name),
        user=prompts.distill_user(digest, outcome, reason),
        answer=DistilledInsights,
        max_tokens=DISTILL_MAX_TOKENS,
        usage=usage,
    ).insights
    dropped = [
        f"{one_line(p.title, 80) or '(untitled)'}: beyond the limit of {MAX_INSIGHTS} "
        "insights per session"
        for p in proposed[MAX_INSIGHTS:]
    ]
    checked = [check(p, outcome, project_name) for p in proposed[:MAX_INSIGHTS]]
    drafts = _repair(checked, backend, outcome, project_name, usage, dropped)
    return DistillResult(
        outcome=outcome,
        reason=reason,
        drafts=drafts,
        dropped=[redact(line) for line in dropped],  # they end up in logs
        usage=usage,
    )


def _judge(
    digest: str, backend: Backend, outcome_hint: Outcome, usage: Usage
) -> tuple[JudgedOutcome, str]:
    if outcome_hint != "unknown":
        return outcome_hint, "outcome reported by the caller"
    try:
        verdict = backend.ask(
            step="judge",
            system=prompts.JUDGE_SYSTEM,
            user=prompts.judge_user(digest),
            answer=Judgement,
            max_tokens=JUDGE_MAX_TOKENS,
            usage=usage,
        )
    except UnusableOutput:
        return "unclear", "the judge's answer was unusable"
    return verdict.outcome, one_line(redact(verdict.reason), REASON_MAX) or "no reason given"


def _repair(
    checked: list[Checked],
    backend: Backend,
    outcome: JudgedOutcome,
    project_name: str | None,
    usage: Usage,
    dropped: list[str],
) -> list[InsightDraft]:
    """The drafts that pass, after one repair round for those the lint found fault with."""
    flawed = [i for i, c in enumerate(checked) if c.errors or c.warnings]
    revised: dict[int, Checked] = {}
    repair_error: DistillError | None = None
    if flawed:
        request = prompts.repair_user(
            [(checked[i].proposal, checked[i].errors + checked[i].warnings) for i in flawed]
        )
        try:
            revisions = backend.ask(
                step="repair",
                system=prompts.repair_system(outcome, project_name),
                user=request,
                answer=DistilledInsights,
                max_tokens=REPAIR_MAX_TOKENS,
                usage=usage,
            ).insights
        except DistillError as exc:
            # Keep what is already good rather than lose the whole run to the last call.
            repair_error = exc
        else:
            for i, revision in zip(flawed, revisions, strict=False):
                revised[i] = check(revision, outcome, project_name)
    drafts: list[InsightDraft] = []
    for i, item in enumerate(checked):
        if i not in flawed and item.draft is not None:
            drafts.append(item.draft)
        elif i in revised:
            after = revised[i]
            if after.draft is not None and not after.errors:
                drafts.append(after.draft)  # warnings alone after the repair keep it
            else:
                dropped.append(
                    f"{item.title}: still failing after repair: {'; '.join(after.errors)}"
                )
        elif item.draft is not None and not item.errors:
            drafts.append(item.draft)  # no revision came back; warnings alone keep it
        else:
            why = f"repair failed: {repair_error}" if repair_error else "no revision came back"
            dropped.append(f"{item.title}: {'; '.join(item.errors)} ({why})")
    return drafts
