"""The session-start context: a few insights, precomputed so a hook can print them without
loading LanceDB or the model. For a project with a plan in the ledger they are what the
relevance gate passes for that plan (`write_project_context`); what is put before a model
unasked must fit it.

Three sources, the first that exists wins:

1. `<home>/context/<project hash>.md`: the project's own context, written by the detached
   refresh the hook starts, so a project's second session gets it;
2. `<home>/context/general.md`: the store's best general lessons, rewritten whenever a
   front door changes the store (`refresh_general_context` is `Memory`'s `on_change`) and
   at `mtl-mcp install`, so a project's first session gets it;
3. the same choice from the starter pack shipped with mtl-mcp (package data, parsed in a
   few milliseconds), for a machine where neither file exists yet.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from mtl_mcp.config import Settings
from mtl_mcp.errors import MtlError
from mtl_mcp.files import write_private
from mtl_mcp.index.gate import unasked
from mtl_mcp.project import ProjectRef, resolve_project
from mtl_mcp.schemas import Category, Insight, InsightDraft, RecallOrigin
from mtl_mcp.text.frames import neutral
from mtl_mcp.text.render import RECALL_HEADER, one_line
from mtl_mcp.text.starter import starter_drafts

if TYPE_CHECKING:
    from mtl_mcp.memory import Memory

logger = logging.getLogger(__name__)
D = TypeVar("D", bound=InsightDraft)

CONTEXT_LIMIT = 2000  # characters, ~500 tokens at most (Claude Code caps hook output at 10,000)
CONTEXT_INSIGHTS = 4
# The kinds of knowledge that transferred best in the paper: verify before claiming done,
# inspect -> edit -> verify, respect interfaces, adapt to the environment.
TRANSFERABLE: tuple[Category, ...] = (
    "workflow-discipline",
    "test-verification",
    "api-compliance",
    "environment-adaptation",
)
CANDIDATES = 200  # best-supported insights a general choice looks at
INVITATION = (
    "mtl-mcp memory is attached. Before planning a non-trivial task, call recall_insights "
    "with a 3-4 sentence plan to get lessons from past sessions."
)


@dataclass(frozen=True)
class Context:
    """A session-start context: the text to print, and the ids of the insights in it (what
    the ledger records as shown to the session)."""

    text: str
    ids: list[str] = field(default_factory=list)


def _ids_file(path: Path) -> Path:
    return path.with_suffix(".ids.json")


def _write(path: Path, insights: Sequence[Insight]) -> Context:
    """Write a context file and the ids of its insights beside it."""
    context = Context(render_context(insights), [i.id for i in insights])
    write_private(_ids_file(path), json.dumps(context.ids))
    write_private(path, context.text)
    return context


def context_file(settings: Settings, project: ProjectRef) -> Path:
    """Where a project's session-start context is cached."""
    name = hashlib.sha256(project.id.encode()).hexdigest()[:16]
    return settings.home / "context" / f"{name}.md"


def general_context_file(settings: Settings) -> Path:
    """Where the context for a project without its own is kept."""
    return settings.home / "context" / "general.md"


def render_context(insights: Sequence[InsightDraft]) -> str:
    """The invitation to recall, then the insights framed as reference data, one line each
    (every field on one line, so a stored field cannot pose as another note)."""
    lines = [INVITATION]
    if insights:
        lines += ["", RECALL_HEADER]
        lines += [f"- {one_line(i.title)}: {one_line(i.content)}" for i in insights]
    return neutral("\n".join(lines))[:CONTEXT_LIMIT] + "\n"


def general_choice(candidates: Sequence[D], limit: int = CONTEXT_INSIGHTS) -> list[D]:
    """Lessons for any project from candidates ordered best first: the first of each
    transferable kind, then the next best of any kind."""
    chosen = [
        found
        for kind in TRANSFERABLE
        if (found := next((c for c in candidates if c.category == kind), None)) is not None
    ][:limit]
    chosen += [c for c in candidates if c not in chosen][: limit - len(chosen)]
    return chosen


def starter_context(settings: Settings) -> str:
    """The general context a store holding only the starter pack would have."""
    return render_context(general_choice(starter_drafts()) if settings.starter else [])


def cached_context(settings: Settings, project: ProjectRef) -> Context:
    """The project's context, else the general one, else the starter pack's (its ids are
    not known before the store exists)."""
    for path in (context_file(settings, project), general_context_file(settings)):
        try:
            text = path.read_text(encoding="utf-8")[:CONTEXT_LIMIT]
        except OSError:  # missing, or a data directory it cannot be read in
            continue
        try:
            ids = json.loads(_ids_file(path).read_text(encoding="utf-8"))
        except (OSError, ValueError):  # written by 0.2, or being rewritten
            ids = []
        return Context(text, [str(i) for i in ids] if isinstance(ids, list) else [])
    return Context(starter_context(settings))


def write_general_context(memory: Memory) -> list[Insight]:
    """Write the general context from the store's best-supported lessons (none that misled
    more often than they helped); returns the insights it holds."""
    candidates, _ = memory.list(sort="support", limit=CANDIDATES)
    chosen = general_choice([i for i in candidates if i.harmful <= i.helpful])
    _write(general_context_file(memory.settings), chosen)
    return chosen


def refresh_general_context(memory: Memory) -> None:
    """`Memory`'s `on_change` for the front doors: keep the general context in step with
    the store. It is a cache, so a failure is logged, never raised into the write."""
    try:
        write_general_context(memory)
    except (MtlError, OSError) as exc:
        logger.warning("could not update the session-start context: %s", exc)


def write_project_context(
    memory: Memory, project: ProjectRef, min_p: float | None = None
) -> Context:
    """Write (and return) a project's session-start context; the general context is
    rewritten on the way.

    Once the project has a plan in the ledger (the newest a tool call or the hook recalled
    for), the notes are what the relevance gate passes of the top CONTEXT_INSIGHTS for that
    plan (`min_p`, default the setting), none if nothing passes: what is put before a model
    unasked must fit. Before that there is nothing to measure fit against: the project's
    most useful insights, then general ones."""
    general = write_general_context(memory)
    plan = memory.loop.latest_plan(project.id)
    if plan:
        threshold = memory.settings.auto_recall_min_p if min_p is None else min_p
        preview = memory.preview(plan, k=CONTEXT_INSIGHTS, project=project.id)
        chosen = [memory.get(hit.id) for hit in unasked(preview.hits, threshold)]
    else:
        own, _ = memory.list(project=project.id, sort="helpful", limit=CONTEXT_INSIGHTS)
        chosen = list({i.id: i for i in [*own, *general]}.values())[:CONTEXT_INSIGHTS]
    return _write(context_file(memory.settings, project), chosen)


def refresh_context(
    settings: Settings,
    project_dir: str,
    origin: RecallOrigin | None = None,
    shown: Sequence[str] = (),
) -> Path | None:
    """Write the session-start context for a project, in this process, and record in the
    ledger the insights `shown` to the session of `origin` from the cache. None when there
    is no store yet: creating it is left to the server, which seeds it before its first
    recall (a store created here would look empty to the server until the seeding is
    done)."""
    from mtl_mcp.memory import Memory  # LanceDB and numpy: only in the detached refresh

    project = resolve_project(project_dir)
    memory = Memory(settings)
    try:
        if not memory.exists():
            return None
        if origin is not None and shown:
            memory.note_shown(origin, shown, project.id)
        write_project_context(memory, project)
    finally:
        memory.close()
    return context_file(settings, project)
