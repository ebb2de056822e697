"""The shapes of data that crosses a boundary: tool I/O, files, the store's rows.

Pydantic models and the literal types they use; no I/O. Field descriptions are written for
the assistant: they become the tool schemas.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
)

Category = Literal[
    "test-verification",
    "interaction-protocol",
    "workflow-discipline",
    "anti-patterns",
    "api-compliance",
    "environment-adaptation",
    "exploration",
    "input-validation",
    "file-syntax",
    "algorithmic-strategy",
    "other",
]
CATEGORIES: tuple[str, ...] = get_args(Category)
Polarity = Literal["success", "failure"]
Outcome = Literal["success", "failure", "unknown"]
Status = Literal["active", "retired"]
Scope = Literal["all", "other-projects", "this-project"]
RecordStatus = Literal["stored", "merged", "rejected"]
Source = Literal["personal", "team"]
ShareStatus = Literal["shared", "merged", "already-shared", "queued", "rejected", "would-share"]
ListSort = Literal["recent", "support", "helpful"]
# The dashboard's orders: list_memories' and a few more ("relevance": meaning, for a query).
BrowseSort = Literal["recent", "support", "helpful", "harmful", "recalled", "oldest", "relevance"]
# How people rated an insight: never, mostly helpful, mostly harmful, or retired by it all.
RatingState = Literal["unrated", "helpful", "harmful", "retired"]
# What put insights in front of a model: its own recall_insights call, the plan-triggered
# hook, or the session-start context.
Trigger = Literal["tool", "hook", "session-start"]
# The judge's verdict on an insight a session was given, and how a misleading one misled
# (the paper's three modes of negative transfer).
VerdictKind = Literal["helped", "not-used", "misled"]
MisledMode = Literal["domain-mismatch", "false-confidence", "misapplied"]

TITLE_MAX = 100
DESCRIPTION_MAX = 300
CONTENT_MAX = 1000
TAGS_MAX = 12
TAG_MAX = 40

_SLUG = re.compile(r"^[a-z0-9][a-z0-9+#.-]{0,39}$")
# A word of 16+ letters and digits, mixing both: a key or a token, never a label.
_RANDOM_RUN = re.compile(r"(?=[A-Za-z0-9]{16})(?=[A-Za-z]*[0-9])(?=[0-9]*[A-Za-z])[A-Za-z0-9]{16,}")


def _slug(value: str) -> str:
    """Lower-case and hyphenate a free label such as a domain, a language or a tag."""
    if _RANDOM_RUN.search(value):  # checked before slugging hides the token's shape
        raise ValueError("looks like a secret (a long random string): labels must not hold one")
    slug = re.sub(r"[\s_/]+", "-", value.strip().lower())
    if not _SLUG.match(slug):
        raise ValueError(
            f"{value!r} is not a short label: use 1-40 lower-case letters, digits or hyphens, "
            "e.g. 'web-backend'"
        )
    return slug


def _labels(values: list[str]) -> list[str]:
    """Slugify and deduplicate, keeping the first occurrence's order."""
    return list(dict.fromkeys(_slug(v) for v in values if v.strip()))


Slug = Annotated[str, AfterValidator(_slug)]
Labels = Annotated[list[str], AfterValidator(_labels)]
NonBlank = StringConstraints(strip_whitespace=True, min_length=1)


class InsightDraft(BaseModel):
    """An abstract, task-agnostic lesson, before the store gives it an id."""

    model_config = ConfigDict(extra="forbid")

    title: Annotated[str, NonBlank, StringConstraints(max_length=TITLE_MAX)] = Field(
        description="Short imperative title, e.g. 'Reproduce a failure before fixing it'."
    )
    description: Annotated[str, NonBlank, StringConstraints(max_length=DESCRIPTION_MAX)] = Field(
        description="One sentence saying when the lesson applies."
    )
    content: Annotated[str, NonBlank, StringConstraints(max_length=CONTENT_MAX)] = Field(
        description=(
            "The lesson itself in 1-3 sentences. Abstract: no file names, paths, URLs, "
            "project names, line numbers or task-specific strings."
        )
    )
    polarity: Polarity | None = Field(
        default=None,
        description=(
            "'success' = a practice that worked; 'failure' = a mistake and its remedy. "
            "Leave it out and the store infers it."
        ),
    )
    category: Category | None = Field(
        default=None,
        description=(
            "The kind of transferable knowledge this lesson is. Leave it out and the store "
            "infers it."
        ),
    )
    domain: Slug | None = Field(
        default=None,
        description="Where it was learned, as a slug: web-backend, data-science, devops-shell...",
    )
    languages: Labels = Field(
        default_factory=list, max_length=10, description="Programming languages involved, if any."
    )
    tags: Labels = Field(default_factory=list, max_length=TAGS_MAX, description="A few keywords.")

    def embedding_text(self) -> str:
        """The text whose embedding is the insight's retrieval key."""
        return f"{self.title}. {self.description} {self.content}"


SOURCE_DESCRIPTION = "Where it is stored: your 'personal' memory or the shared 'team' pool."


class Insight(InsightDraft):
    """An insight as stored: a draft plus identity, provenance and usage counters."""

    model_config = ConfigDict(extra="ignore", serialize_by_alias=True, populate_by_name=True)

    # Always set once stored: the store infers what a draft left out.
    polarity: Polarity = Field(
        default="success", description="'success' = a practice that worked; 'failure' = a mistake."
    )
    category: Category = Field(default="other", description="The kind of transferable knowledge.")
    id: str
    project: str | None = Field(default=None, description="The project that first produced it.")
    projects: list[str] = Field(default_factory=list, description="Every project that produced it.")
    session_id: str | None = None
    client: str | None = None
    distilled_by: str | None = Field(
        default=None,
        # Stored and serialized as "model", the column name of the data format.
        validation_alias=AliasChoices("model", "distilled_by"),
        serialization_alias="model",
        description="The language model that distilled it, if one did.",
    )
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    updated_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    support: int = Field(default=1, description="How many sessions produced or confirmed it.")
    helpful: int = 0
    harmful: int = 0
    recall_count: int = 0
    status: Status = "active"
    abstraction_score: float = Field(default=1.0, ge=0.0, le=1.0)
    notes: list[str] = Field(default_factory=list, description="Notes left with ratings.")
    source: Source = Field(default="personal", description=SOURCE_DESCRIPTION)

    @field_validator("notes", "projects", "languages", "tags", mode="before")
    @classmethod
    def _null_is_empty(cls, value: object) -> object:
        """Columns added by a migration are null in older rows."""
        return [] if value is None else value


class Provenance(BaseModel):
    """Where new insights come from."""

    project: str | None = None
    session_id: str | None = None
    client: str | None = None
    distilled_by: str | None = None  # the language model, when a session was distilled


class RecordResult(BaseModel):
    """What happened to one submitted insight."""

    status: RecordStatus
    id: str | None = Field(default=None, description="The stored or merged-into insight's id.")
    title: str | None = None
    reasons: list[str] = Field(default_factory=list, description="Why it was rejected.")
    warnings: list[str] = Field(
        default_factory=list, description="Abstraction problems worth fixing; they lower its score."
    )
    abstraction_score: float | None = None


class RecallHit(BaseModel):
    """One recalled insight and how well it matches the plan."""

    id: str
    title: str
    description: str
    content: str
    polarity: Polarity
    category: Category
    domain: str | None
    project: str | None
    score: float = Field(
        description=(
            "Cosine similarity adjusted by ratings. Results are ordered by fusing it with a "
            "keyword match, so it need not fall from one result to the next."
        )
    )
    similarity: float = Field(description="Cosine similarity between the plan and the insight.")
    p: float | None = Field(
        default=None,
        description=(
            "The relevance gate's probability that this insight helps the plan. What is put "
            "before a model unasked must reach MTL_MCP_AUTO_RECALL_MIN_P (one note a plan)."
        ),
    )
    source: Source = Field(default="personal", description=SOURCE_DESCRIPTION)


class RecallOrigin(BaseModel):
    """Who a recall is for: the session (as its client names it), the client, and what
    triggered it. A recall with an origin reached a model: the ledger records it."""

    session_id: str | None = None
    client: str | None = None
    trigger: Trigger = "tool"


class LedgerHit(BaseModel):
    """An insight a recall gave, with its score."""

    id: str
    score: float


class RecallEntry(BaseModel):
    """One recall that reached a model."""

    at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    session_id: str | None = None
    client: str | None = None
    trigger: Trigger
    plan: str
    project: str | None = None
    hits: list[LedgerHit] = Field(default_factory=list)


class VerdictEntry(BaseModel):
    """The judge's verdict on one insight a session was given."""

    at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    session_id: str
    insight: str
    verdict: VerdictKind
    mode: MisledMode | None = None
    reason: str | None = None
    backend: str | None = None
    plan: str | None = Field(default=None, description="The plan it was recalled for.")
    trigger: Trigger | None = None


class GivenInsight(BaseModel):
    """An insight a session was given, and the plan it was recalled for (if one was)."""

    id: str
    title: str
    content: str
    plan: str | None = None
    trigger: Trigger | None = None


class LearntInsight(BaseModel):
    id: str
    title: str


class SessionReport(BaseModel):
    """One session as the loop saw it (`mtl-mcp sessions`)."""

    session_id: str
    client: str | None = None
    project: str | None = None
    first_at: datetime | None = None
    last_at: datetime | None = None
    recalls: list[RecallEntry] = Field(default_factory=list, description="Oldest first.")
    titles: dict[str, str] = Field(
        default_factory=dict, description="The title of each insight recalled."
    )
    learnt: list[LearntInsight] = Field(default_factory=list)
    verdicts: list[VerdictEntry] = Field(default_factory=list)


class RecallPart(BaseModel):
    """Why one recalled insight ranked where it did: the parts fused into its rank."""

    id: str
    similarity: float = Field(description="Cosine similarity between the plan and the insight.")
    rating: float = Field(description="The rating term added to the similarity.")
    dense_rank: int | None = Field(description="Its rank by meaning (similarity + rating).")
    keyword_score: float | None = Field(description="Its BM25 score for the plan's words.")
    keyword_rank: int | None = Field(description="Its rank by keywords; None if no word matched.")
    fused: float = Field(description="The reciprocal-rank fusion score the results are ordered by.")
    p: float | None = Field(default=None, description="The relevance gate's probability.")
    signals: dict[str, float] = Field(
        default_factory=dict, description="What the gate's probability was computed from."
    )


class LeftOut(BaseModel):
    """An insight recall left out for a plan because of session verdicts, and why."""

    id: str
    title: str
    reason: str
    retired: bool = Field(description="Left out of every plan (it keeps misleading).")


class RecallPreview(BaseModel):
    """What a recall for a plan gives, and why: the hits, in order, each with its parts."""

    hits: list[RecallHit]
    parts: list[RecallPart]
    left_out: list[LeftOut] = Field(default_factory=list)
    method: str
    seconds: float = Field(description="How long the recall itself took.")
    min_p: float = Field(
        description="The relevance gate's threshold (MTL_MCP_AUTO_RECALL_MIN_P): of a plan's "
        "top 3, the most probable hit with p at least this is put before a model unasked.",
    )
    unasked: list[str] = Field(
        default_factory=list,
        description="The ids of the hits the plan hook would put before a model unasked for "
        "this plan (of the top 3, with no note shown yet).",
    )


class InsightHistory(BaseModel):
    """One insight's feedback (`mtl-mcp show`): verdicts and recalls, newest first."""

    recalls: list[RecallEntry] = Field(default_factory=list)
    verdicts: list[VerdictEntry] = Field(default_factory=list)


class NearInsight(BaseModel):
    """An insight close to a text: what the distiller is shown, to confirm it rather than
    write it again."""

    id: str
    title: str
    similarity: float


class ShareResult(BaseModel):
    """What sharing one insight with the team pool did."""

    id: str = Field(description="The insight's id in your memory.")
    status: ShareStatus
    title: str | None = None
    team_id: str | None = Field(
        default=None, description="The team pool's insight it became or merged into."
    )
    reasons: list[str] = Field(default_factory=list, description="Why it was not shared.")
    warnings: list[str] = Field(default_factory=list, description="Abstraction problems.")


# What one consolidation run did to one insight: merged paraphrases into it, found it
# superseded, retired it unused, or flagged it as contradicting another.
ChangeKind = Literal["merged", "superseded", "retired", "conflict"]


class ConsolidationChange(BaseModel):
    """One change of a consolidation run, and why (`mtl-mcp consolidate`, the dashboard)."""

    kind: ChangeKind
    id: str = Field(description="The kept, superseded, retired or first conflicting insight.")
    others: list[str] = Field(
        default_factory=list,
        description="The insights merged into `id`, the one superseding it, or the other "
        "side of the conflict.",
    )
    why: str
    titles: dict[str, str] = Field(default_factory=dict, description="Titles, by id, then.")


class ConsolidationRun(BaseModel):
    """What one consolidation pass did (or, dry, would do). Every change is undone by
    `mtl-mcp consolidate --undo RUN`; a conflict is only flagged, never resolved."""

    model_config = ConfigDict(extra="ignore")

    run: str = Field(description="The run's id, for --undo.")
    at: datetime
    source: Source = "personal"
    trigger: str = Field(default="cli", description="cli, idle (the service), dashboard...")
    dry_run: bool = False
    merged: list[tuple[str, list[str]]] = Field(
        default_factory=list, description="[kept id, [ids merged into it]]"
    )
    superseded: list[tuple[str, str]] = Field(
        default_factory=list, description="[old id, the id that supersedes it]"
    )
    retired: list[str] = Field(default_factory=list, description="Retired: unused too long.")
    conflicts: list[tuple[str, str]] = Field(
        default_factory=list, description="Pairs that contradict each other, for you to settle."
    )
    changes: list[ConsolidationChange] = Field(default_factory=list)
    more: bool = Field(default=False, description="Work was left for the next pass (bounded).")
    undone_at: datetime | None = None
    seconds: float = 0.0


# A plan or a query is a few sentences: embedding and scoring megabytes would stall a shared
# server (a 20 MB plan took 24 s). One limit, checked by `Memory`, for every front door.
TEXT_MAX = 4000
NOTE_MAX = 500  # a rating's note

# What a value of each JSON type is called in an error message.
_KINDS = {
    "string": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "list": "a list",
    "dict": "an object",
    "model": "an object",
    "int_from_float": "an integer",
    "datetime": "a date and time (ISO 8601)",
    "date": "a date (ISO 8601)",
}


def too_long(where: str, length: int, limit: int) -> str:
    """The one message for a text over its limit, whichever door it came through."""
    return f"{where} is {length} characters: shorten it to at most {limit}"


def validation_problems(exc: ValidationError, what: str = "insight") -> list[str]:
    """One readable line per problem pydantic found, in our words (no pydantic text or
    links), naming the field and what to pass instead. The offending value itself is never
    quoted."""
    return [_problem(error, what) for error in exc.errors(include_url=False)]


def _problem(error: Any, what: str) -> str:
    where = ".".join(str(part) for part in error.get("loc", ())) or what
    kind = str(error.get("type", ""))
    ctx = error.get("ctx") or {}
    value = error.get("input")
    if kind == "string_too_long" and isinstance(value, str):
        return too_long(where, len(value), int(ctx.get("max_length", 0)))
    if kind == "string_too_short":
        return f"{where} is empty: write it"
    if kind == "missing":
        return f"{where} is missing: pass it"
    if kind == "too_long":
        return f"{where} has too many items: pass at most {ctx.get('max_length')}"
    if kind == "too_short":
        return f"{where} has too few items: pass at least {ctx.get('min_length')}"
    if kind in ("literal_error", "enum"):
        return f"{where} must be one of {ctx.get('expected')}"
    bounds = {
        "greater_than_equal": ("at least", "ge"),
        "greater_than": ("more than", "gt"),
        "less_than_equal": ("at most", "le"),
        "less_than": ("less than", "lt"),
    }
    if kind in bounds:
        words, key = bounds[kind]
        return f"{where} is out of range: use {words} {ctx.get(key)}"
    if kind == "finite_number":
        return f"{where} must be a finite number"
    if kind == "json_invalid":
        return f"{where} is not valid JSON"
    if kind == "string_pattern_mismatch":
        return f"{where} does not have the expected form: see its description"
    base = kind.removesuffix("_type").removesuffix("_parsing")
    base = next((b for b in ("datetime", "date") if base.startswith(b)), base)
    if base in _KINDS:
        return f"{where} must be {_KINDS[base]}"
    if kind == "value_error":  # our own validators' words, after pydantic's prefix
        return f"{where}: {str(error.get('msg', '')).removeprefix('Value error, ')}"
    return f"{where} is not valid here: see the tool's or the format's description"
