"""What the model is asked to return, and how its answer becomes drafts the lint accepts.

The docstrings and field descriptions of these models are sent to the model as the output
schema. `ProposedInsight` is lenient on purpose (plain strings, no limits enforced): an
overlong field costs a repair round, not the whole answer; `InsightDraft` enforces the real
limits after.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from mtl_mcp.learning.spend import Usage
from mtl_mcp.schemas import (
    CONTENT_MAX,
    DESCRIPTION_MAX,
    TAGS_MAX,
    TITLE_MAX,
    Category,
    GivenInsight,
    InsightDraft,
    MisledMode,
    Polarity,
    Slug,
    VerdictKind,
    validation_problems,
)
from mtl_mcp.text.lint import lint, project_facts
from mtl_mcp.text.render import one_line

JudgedOutcome = Literal["success", "failure", "unclear"]
MAX_INSIGHTS = 3
REASON_MAX = 200


class Judgement(BaseModel):
    """The verdict on one session."""

    outcome: JudgedOutcome = Field(
        description=(
            "'success' if the session reached its goal (verified or accepted by the user); "
            "'failure' if it was abandoned, left broken or rejected; "
            "'unclear' if the digest does not show the end state."
        )
    )
    reason: str = Field(description="One short line of evidence for the verdict.")


class InsightVerdict(BaseModel):
    """Whether one insight the assistant was given mattered in the session."""

    model_config = ConfigDict(extra="ignore")

    note: int = Field(description="The number of the note in the list you were given.")
    verdict: VerdictKind = Field(
        description=(
            "'helped': the assistant applied it and it mattered to the result; 'not-used': "
            "it played no visible part; 'misled': following it made the session worse."
        )
    )
    mode: MisledMode | None = Field(
        default=None,
        description=(
            "Only for 'misled': 'domain-mismatch' (a lesson from another kind of task anchored "
            "the work wrongly), 'false-confidence' (it made an unverified result look "
            "checked), 'misapplied' (a sound practice applied where it does not fit)."
        ),
    )
    reason: str = Field(default="", description="One short line of evidence.")


class JudgementWithVerdicts(Judgement):
    """The verdict on one session, and on each note the assistant was given in it."""

    verdicts: list[InsightVerdict] = Field(
        default_factory=list, description="One verdict per note, in any order."
    )


@dataclass(frozen=True)
class JudgedUse:
    """The judge's verdict on one given insight."""

    given: GivenInsight
    verdict: VerdictKind
    mode: MisledMode | None
    reason: str


class ProposedInsight(BaseModel):
    """One abstract, task-agnostic lesson."""

    model_config = ConfigDict(extra="ignore")

    title: str = Field(
        description=f"Short imperative title, at most {TITLE_MAX} characters, e.g. "
        "'Reproduce a failure before changing code'."
    )
    description: str = Field(
        description=f"One sentence, at most {DESCRIPTION_MAX} characters: when the lesson applies."
    )
    content: str = Field(
        description=f"The lesson in 1-3 sentences, at most {CONTENT_MAX} characters: what to do "
        "and why. No file names, paths, URLs, project names, versions or task-specific strings."
    )
    polarity: Polarity = Field(
        description="'success' = a practice that worked; 'failure' = a mistake and its remedy."
    )
    category: Category = Field(
        description="The kind of transferable knowledge; 'other' only if none of the rest fits."
    )
    domain: str = Field(
        description="Where it was learned, as a lower-case slug: web-backend, data-science, "
        "devops-shell, cli-tooling, frontend, embedded..."
    )
    languages: list[str] = Field(
        default_factory=list,
        description="Programming languages involved, lower-case; may be empty.",
    )
    tags: list[str] = Field(default_factory=list, description="Up to 5 lower-case keywords.")


class DistilledInsights(BaseModel):
    """The insights distilled from one session (structured output of distill and repair)."""

    insights: list[ProposedInsight] = Field(
        description=f"At most {MAX_INSIGHTS} insights; an empty list when nothing transfers.",
        json_schema_extra={"maxItems": MAX_INSIGHTS},
    )


class DistilledOrConfirmed(DistilledInsights):
    """The insights distilled from one session, and the insights the memory already holds
    that the session confirms (asked when the distiller is shown some)."""

    confirms: list[str] = Field(
        default_factory=list,
        description="Ids of insights the memory already holds (from the list you were "
        "shown) that this session confirms: write those ids here instead of writing the "
        "lesson again. Empty when none applies.",
        json_schema_extra={"maxItems": MAX_INSIGHTS},
    )


@dataclass
class DistillResult:
    """What one distillation run produced."""

    outcome: JudgedOutcome
    reason: str
    drafts: list[InsightDraft]
    dropped: list[str] = field(default_factory=list)  # "<title>: <why>"
    usage: Usage = field(default_factory=Usage)
    uses: list[JudgedUse] = field(default_factory=list)  # verdicts on the given insights
    confirmed: list[str] = field(default_factory=list)  # ids of known insights confirmed


_SLUG_ADAPTER: TypeAdapter[str] = TypeAdapter(Slug)
_REDACTION_MARKER = re.compile(r"\[REDACTED(?::[a-z0-9-]*)?\]")


def _slug_or_none(value: str) -> str | None:
    try:
        return _SLUG_ADAPTER.validate_python(value) if value.strip() else None
    except ValidationError:
        return None


def _slugs(values: list[str], limit: int) -> list[str]:
    found = [s for s in (_slug_or_none(v) for v in values) if s]
    return list(dict.fromkeys(found))[:limit]


def to_draft(
    proposal: ProposedInsight, outcome: JudgedOutcome
) -> tuple[InsightDraft | None, list[str]]:
    """The proposal as an InsightDraft (labels cleaned, polarity matched to the outcome)."""
    polarity: Polarity = outcome if outcome != "unclear" else proposal.polarity
    try:
        draft = InsightDraft(
            title=proposal.title,
            description=proposal.description,
            content=proposal.content,
            polarity=polarity,
            category=proposal.category,
            domain=_slug_or_none(proposal.domain),
            languages=_slugs(proposal.languages, 10),
            tags=_slugs(proposal.tags, min(5, TAGS_MAX)),
        )
    except ValidationError as exc:
        return None, validation_problems(exc)
    return draft, []


@dataclass
class Checked:
    """A proposal, its draft (None if invalid), and what the lint says of it."""

    proposal: ProposedInsight
    draft: InsightDraft | None
    errors: list[str]
    warnings: list[str]

    @property
    def title(self) -> str:
        return one_line(self.proposal.title, 80) or "(untitled)"


def check(
    proposal: ProposedInsight,
    outcome: JudgedOutcome,
    project_name: str | None,
    *,
    kept_notes: bool = False,
) -> Checked:
    """Validate and lint a proposal; a redaction marker left in it is an error. From `kept_notes`
    (an assistant's memory, a project's instructions), anything that reads as a fact about
    one project is an error too: such a draft is repaired once, else dropped."""
    draft, errors = to_draft(proposal, outcome)
    if draft is None:
        return Checked(proposal, None, errors, [])
    report = lint(draft, project_name)
    errors = list(report.errors)
    texts = (draft.title, draft.description, draft.content, *draft.tags)
    if any(_REDACTION_MARKER.search(text) for text in texts):
        errors.append("contains a redaction marker: leave the redacted value out entirely")
    if kept_notes:
        errors += project_facts(draft, project_name)
        concrete = set(errors)  # now errors; what the lint warns of besides stays a warning
        return Checked(proposal, draft, errors, [w for w in report.warnings if w not in concrete])
    return Checked(proposal, draft, errors, list(report.warnings))
