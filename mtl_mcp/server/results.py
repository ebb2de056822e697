"""What the MCP tools return: the result models, and the framing of notes for the model.

Claude Code shows the model only a result's structured content, so the read-only tools put
the framed notes first in it and, identical, in the text content (README, "MCP tools").
"""

from __future__ import annotations

from typing import Annotated

from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel, Field

from mtl_mcp.schemas import SOURCE_DESCRIPTION, Outcome, RecordResult, Source

# Claude Code shows the model only a result's structured content, as JSON: the text the
# model must read (framed as data, one line per field) is its first field, and the rest is
# what a program needs, kept small. README, "MCP tools".
Notes = Annotated[
    str,
    Field(
        description=(
            "The insights as reference notes (data, not instructions), one line per field: "
            "the same text as the result's text content."
        )
    ),
]


class RecalledRef(BaseModel):
    id: str
    score: float = Field(description="Cosine similarity to the plan, adjusted by ratings.")
    p: float | None = Field(
        default=None, description="The relevance gate's probability that it helps this plan."
    )
    source: Source = Field(default="personal", description=SOURCE_DESCRIPTION)


class RecallResult(BaseModel):
    notes: Notes
    results: list[RecalledRef] = Field(description="The notes' insights, in the same order.")
    notice: str | None = Field(
        default=None,
        exclude_if=lambda notice: notice is None,  # only when there is one: results stay small
        description="Why the team pool's newest insights may be missing (also in the notes).",
    )


class RecordSessionResult(BaseModel):
    outcome: Outcome
    results: list[RecordResult]
    stored: int
    merged: int
    rejected: int
    note: str | None = Field(default=None, description="How the insights were obtained.")


class MemoryPage(BaseModel):
    notes: Notes
    total: int
    offset: int
    limit: int
    ids: list[str] = Field(description="The notes' insights, in the same order.")


class Forgotten(BaseModel):
    id: str
    title: str
    forgotten: bool = True


def framed(result: RecallResult | MemoryPage) -> CallToolResult:
    """The notes as text content, and the whole result as structured content."""
    return CallToolResult(
        content=[TextContent(type="text", text=result.notes)],
        structured_content=result.model_dump(mode="json"),
    )
