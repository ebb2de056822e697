"""Distillation: a session digest in, 0-3 abstract insights out, through any `Backend`.

A judge labels the session (unless the caller knows the outcome), the model writes insights
with instructions for that outcome, and every insight passes the abstraction lint; those
with problems get one repair round, and any still failing the lint's errors are dropped
(with the reason kept in `dropped`). The digest is redacted again before it is sent.

Notes an assistant keeps (`kept_notes=True`: its memory files, a project's instructions) have no
outcome to judge: they go straight to the distiller with the notes prompt, and the check is
stricter (`proposals.check`): what reads as a fact about one project is an error.
"""

from __future__ import annotations

from collections.abc import Sequence

from mtl_mcp.errors import DistillError, UnusableOutput
from mtl_mcp.learning import prompts
from mtl_mcp.learning.backends import Backend
from mtl_mcp.learning.proposals import (
    MAX_INSIGHTS,
    REASON_MAX,
    Checked,
    DistilledInsights,
    DistilledOrConfirmed,
    DistillResult,
    InsightVerdict,
    JudgedOutcome,
    JudgedUse,
    Judgement,
    JudgementWithVerdicts,
    check,
)
from mtl_mcp.learning.spend import Usage
from mtl_mcp.schemas import GivenInsight, InsightDraft, NearInsight, Outcome
from mtl_mcp.text.redact import redact
from mtl_mcp.text.render import one_line
from mtl_mcp.text.tokens import estimate_tokens

JUDGE_MAX_TOKENS = 200
VERDICT_MAX_TOKENS = 60  # more judge output per note the session was given
NOTE_TOKENS = 300  # a given note in the judge's request, at the longest
GIVEN_MAX = 12  # notes judged per session (the latest ones, when there were more)
DISTILL_MAX_TOKENS = 1500
REPAIR_MAX_TOKENS = 1500
PROMPT_OVERHEAD = 1200  # system prompt and schema, in tokens
NOTES_REASON = "notes an assistant keeps"


def estimate_run_tokens(
    digest: str,
    *,
    outcome_hint: Outcome = "unknown",
    extra_per_call: int = 0,
    given: int = 0,
    kept_notes: bool = False,
) -> int:
    """Worst-case tokens of one `distill()` run on `digest`, for a budget check beforehand:
    the judge call (unless a hint or `kept_notes` skips it) with `given` notes to judge, the
    distill call and a repair round, each at its full `max_tokens`, each with the backend's
    `extra_per_call` input tokens."""
    return run_tokens_for(
        estimate_tokens(digest),
        outcome_hint=outcome_hint,
        extra_per_call=extra_per_call,
        given=given,
        kept_notes=kept_notes,
    )


def run_tokens_for(
    digest_tokens: int,
    *,
    outcome_hint: Outcome = "unknown",
    extra_per_call: int = 0,
    given: int = 0,
    kept_notes: bool = False,
) -> int:
    """`estimate_run_tokens` for a digest of `digest_tokens` tokens."""
    overhead = PROMPT_OVERHEAD + extra_per_call
    total = digest_tokens + overhead + DISTILL_MAX_TOKENS
    total += 2 * PROMPT_OVERHEAD + extra_per_call + REPAIR_MAX_TOKENS + DISTILL_MAX_TOKENS
    if outcome_hint == "unknown" and not kept_notes:
        notes = min(given, GIVEN_MAX)
        total += digest_tokens + overhead + JUDGE_MAX_TOKENS
        total += notes * (NOTE_TOKENS + VERDICT_MAX_TOKENS)
    return total


def distill(
    digest: str,
    backend: Backend,
    *,
    outcome_hint: Outcome = "unknown",
    project_name: str | None = None,
    usage: Usage | None = None,
    given: Sequence[GivenInsight] = (),
    kept_notes: bool = False,
    known: Sequence[NearInsight] = (),
) -> DistillResult:
    """Judge the session (unless `outcome_hint` says), write insights, lint and repair them;
    for `kept_notes`, no judge, the notes prompt and the stricter check.

    With `known` (the memory's insights closest to the session), the distiller may answer
    that the session confirms one of them instead of writing it again: `confirmed` holds
    their ids (only ids it was shown count).

    With `given` (the insights the session was given), the judge also says of each whether
    it helped, was not used or misled, in the same call; a session whose outcome is known
    beforehand gets no judge call, so no verdicts. Raises DistillError (`DistillUnavailable`
    when a retry may help) when a call fails; a judge answer that is unusable falls back to
    'unclear' instead. Tokens spent accumulate in `usage`, failed calls included.
    """
    usage = usage if usage is not None else Usage()
    digest = redact(digest)
    if not digest.strip():  # nothing to learn from, and nothing worth paying for
        empty: JudgedOutcome = "unclear" if outcome_hint == "unknown" else outcome_hint
        return DistillResult(outcome=empty, reason="the session digest is empty", drafts=[])
    outcome: JudgedOutcome
    uses: list[JudgedUse]
    if kept_notes:  # nothing happened to judge: lessons that hold either way
        outcome, reason, uses = "unclear", NOTES_REASON, []
        request = prompts.notes_user(digest, known)
    else:
        given = list(given)[-GIVEN_MAX:]
        outcome, reason, uses = _judge(digest, backend, outcome_hint, usage, given)
        request = prompts.distill_user(digest, outcome, reason, known)
    # The confirmations are asked for only when there is something to confirm.
    answer = DistilledOrConfirmed if known else DistilledInsights
    answered = backend.ask(
        step="distill",
        system=prompts.distill_system(outcome, project_name, kept_notes),
        user=request,
        answer=answer,
        max_tokens=DISTILL_MAX_TOKENS,
        usage=usage,
    )
    proposed = answered.insights
    shown = {k.id for k in known}
    confirms = answered.confirms if isinstance(answered, DistilledOrConfirmed) else []
    confirmed = list(dict.fromkeys(i.strip() for i in confirms if i.strip() in shown))
    dropped = [
        f"{one_line(p.title, 80) or '(untitled)'}: beyond the limit of {MAX_INSIGHTS} "
        "insights per session"
        for p in proposed[MAX_INSIGHTS:]
    ]
    checked = [
        check(p, outcome, project_name, kept_notes=kept_notes) for p in proposed[:MAX_INSIGHTS]
    ]
    drafts = _repair(checked, backend, outcome, project_name, usage, dropped, kept_notes)
    return DistillResult(
        outcome=outcome,
        reason=reason,
        drafts=drafts,
        dropped=[redact(line) for line in dropped],  # they end up in logs
        usage=usage,
        uses=uses,
        confirmed=confirmed,
    )


def _judge(
    digest: str,
    backend: Backend,
    outcome_hint: Outcome,
    usage: Usage,
    given: Sequence[GivenInsight],
) -> tuple[JudgedOutcome, str, list[JudgedUse]]:
    if outcome_hint != "unknown":
        return outcome_hint, "outcome reported by the caller", []
    answer: type[Judgement] = JudgementWithVerdicts if given else Judgement
    try:
        verdict = backend.ask(
            step="judge",
            system=prompts.judge_system(bool(given)),
            user=prompts.judge_user(digest, [(g.title, g.content) for g in given]),
            answer=answer,
            max_tokens=JUDGE_MAX_TOKENS + VERDICT_MAX_TOKENS * len(given),
            usage=usage,
        )
    except UnusableOutput:
        return "unclear", "the judge's answer was unusable", []
    reason = one_line(redact(verdict.reason), REASON_MAX) or "no reason given"
    uses = _uses(verdict.verdicts, given) if isinstance(verdict, JudgementWithVerdicts) else []
    return verdict.outcome, reason, uses


def _uses(verdicts: Sequence[InsightVerdict], given: Sequence[GivenInsight]) -> list[JudgedUse]:
    """The verdicts on notes that exist, one per note (the first), in the notes' order."""
    by_note: dict[int, InsightVerdict] = {}
    for verdict in verdicts:
        if 1 <= verdict.note <= len(given):
            by_note.setdefault(verdict.note, verdict)
    return [
        JudgedUse(
            given=given[note - 1],
            verdict=found.verdict,
            mode=found.mode if found.verdict == "misled" else None,
            reason=one_line(redact(found.reason), 120),
        )
        for note, found in sorted(by_note.items())
    ]


def _repair(
    checked: list[Checked],
    backend: Backend,
    outcome: JudgedOutcome,
    project_name: str | None,
    usage: Usage,
    dropped: list[str],
    kept_notes: bool = False,
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
                system=prompts.repair_system(outcome, project_name, kept_notes),
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
                revised[i] = check(revision, outcome, project_name, kept_notes=kept_notes)
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
