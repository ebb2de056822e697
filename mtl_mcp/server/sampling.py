"""MCP sampling for `record_session`: distil through the client's own model.

From protocol 2026-07-28 a tool cannot wait inside a call for the client to sample: it
returns its question and the client calls again with the answer. The SDK's resolvers do
that dance (and, on older protocols, ask mid-call): `sampling_plan` decides whether a call
samples at all, then one resolver per question (judge, distill, repair; at most three)
asks what the replayed pipeline needs next. They run before the tool body, which stores
what the answers distil (`app.record_session`). Only translation lives here: the pipeline
and its replay are in `mtl_mcp.learning`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, cast

import anyio
from mcp.server.mcpserver import Context, Resolve, Sample
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import (
    CreateMessageResult,
    ModelHint,
    ModelPreferences,
    SamplingMessage,
    TextContent,
)

from mtl_mcp.config import Settings
from mtl_mcp.errors import MtlError
from mtl_mcp.project import ProjectRef
from mtl_mcp.schemas import GivenInsight, Outcome

if TYPE_CHECKING:
    from mtl_mcp.learning.pipeline import SessionDigest


@dataclass(frozen=True)
class ServerState:
    """What the lifespan yields: for code that reaches the server only through `ctx`."""

    settings: Settings
    project_of: Callable[[Context | None, str | None], Awaitable[ProjectRef | None]]
    # What the calling window's session was given so far (for the judge's verdicts).
    given: Callable[[], Awaitable[list[GivenInsight]]]
    local: bool = True  # False over HTTP: the client may be on another machine


def refuse_remote_transcript(local: bool, transcript_path: str | None) -> None:
    """A client over HTTP names no file of the server's machine: it sends a summary."""
    if transcript_path and not local:
        raise ToolError(
            "transcript_path is not accepted over HTTP (the file would be read on the "
            "server's machine): pass a summary of the session, or 0-3 insights"
        )


@dataclass(frozen=True)
class SamplingPlan:
    """A record_session call that distils through the client's model."""

    session: SessionDigest
    project: ProjectRef | None
    outcome: Outcome
    given: list[GivenInsight]


def _state(ctx: Context) -> ServerState:
    return cast(ServerState, ctx.request_context.lifespan_context)


def _declares_sampling(ctx: Context) -> bool:
    capabilities = ctx.session.client_capabilities
    return capabilities is not None and capabilities.sampling is not None


async def sampling_plan(
    ctx: Context,
    summary: str,
    outcome: Outcome,
    insights: list[dict[str, Any]] | None,
    transcript_path: str | None,
    project: str | None,
) -> SamplingPlan | None:
    """Whether this call distils by sampling: no insights given, the client samples, and
    `auto` allows it (no API key, budgets above 0)."""
    state = _state(ctx)
    refuse_remote_transcript(state.local, transcript_path)
    if insights or not _declares_sampling(ctx):
        return None
    from mtl_mcp.learning.backends.select import sampling_allowed
    from mtl_mcp.learning.pipeline import session_digest

    if not sampling_allowed(state.settings):
        return None
    ref = await state.project_of(ctx, project)
    try:
        session = await anyio.to_thread.run_sync(
            lambda: session_digest(state.settings, summary, transcript_path, client_name(ctx))
        )
    except MtlError as exc:
        raise ToolError(str(exc)) from exc
    if not session.text.strip():
        return None
    return SamplingPlan(session, ref, outcome, await state.given())


def _question(ctx: Context, sampling: SamplingPlan | None, answered: list[Any]) -> Sample | None:
    """The next question for the client's model, or None when no (more) is needed."""
    if sampling is None or None in answered:
        return None
    from mtl_mcp.learning.pipeline import next_sampling_request

    state = _state(ctx)
    texts = [answer_text(a) for a in answered]
    try:
        request = next_sampling_request(
            state.settings,
            sampling.session,
            texts,
            sampling.outcome,
            sampling.project,
            sampling.given,
        )
    except MtlError as exc:
        raise ToolError(str(exc)) from exc
    if request is None:
        return None
    return Sample(
        [SamplingMessage(role="user", content=TextContent(type="text", text=request.user))],
        max_tokens=request.max_tokens,
        system_prompt=request.system,
        # A small, cheap model does: it is a short extraction.
        model_preferences=ModelPreferences(
            hints=[ModelHint(name="haiku")], cost_priority=0.9, intelligence_priority=0.3
        ),
    )


def first_answer(
    ctx: Context, sampling: Annotated[SamplingPlan | None, Resolve(sampling_plan)]
) -> Sample | None:
    return _question(ctx, sampling, [])


def second_answer(
    ctx: Context,
    sampling: Annotated[SamplingPlan | None, Resolve(sampling_plan)],
    first: Annotated[CreateMessageResult | None, Resolve(first_answer)],
) -> Sample | None:
    return _question(ctx, sampling, [first])


def third_answer(
    ctx: Context,
    sampling: Annotated[SamplingPlan | None, Resolve(sampling_plan)],
    first: Annotated[CreateMessageResult | None, Resolve(first_answer)],
    second: Annotated[CreateMessageResult | None, Resolve(second_answer)],
) -> Sample | None:
    return _question(ctx, sampling, [first, second])


def answer_text(answer: CreateMessageResult) -> str:
    """The text the client's model answered ('' for an image or audio answer)."""
    return answer.content.text if isinstance(answer.content, TextContent) else ""


def client_name(ctx: Context | None) -> str | None:
    """The MCP client's name from its handshake (e.g. 'claude-code'), if it gave one."""
    params = ctx.session.client_params if ctx is not None else None
    return params.client_info.name if params is not None else None
