"""The session-start context: a few insights for a project, precomputed so a hook can print
them without loading LanceDB or the model.

A detached refresh (started by the hook) writes `<home>/context/<project hash>.md`; the next
session of that project prints it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from mtl_mcp.config import Settings
from mtl_mcp.files import write_private
from mtl_mcp.project import ProjectRef, resolve_project
from mtl_mcp.text.render import RECALL_HEADER, one_line

CONTEXT_LIMIT = 4000  # Claude Code caps injected context at 10,000 characters
CONTEXT_INSIGHTS = 4
INVITATION = (
    "mtl-mcp memory is attached. Before planning a non-trivial task, call recall_insights "
    "with a 3-4 sentence plan to get lessons from past sessions."
)


def context_file(settings: Settings, project: ProjectRef) -> Path:
    """Where a project's session-start context is cached."""
    name = hashlib.sha256(project.id.encode()).hexdigest()[:16]
    return settings.home / "context" / f"{name}.md"


def cached_context(settings: Settings, project: ProjectRef) -> str:
    """The cached context of a project, or "" when none was computed yet."""
    cached = context_file(settings, project)
    if cached.is_file():
        return cached.read_text(encoding="utf-8")[:CONTEXT_LIMIT]
    return ""


def refresh_context(settings: Settings, project_dir: str) -> Path:
    """Write the session-start context for a project: its most useful insights."""
    from mtl_mcp.memory import Memory  # LanceDB and numpy: only in the detached refresh

    project = resolve_project(project_dir)
    memory = Memory(settings)
    try:
        own, _ = memory.list(project=project.id, sort="helpful", limit=CONTEXT_INSIGHTS)
        shared, _ = memory.list(sort="support", limit=CONTEXT_INSIGHTS)
    finally:
        memory.close()
    chosen = list({i.id: i for i in [*own, *shared]}.values())[:CONTEXT_INSIGHTS]
    lines = [INVITATION]
    if chosen:
        lines += ["", RECALL_HEADER]
        lines += [f"- {one_line(i.title)}: {one_line(i.content)}" for i in chosen]
    path = context_file(settings, project)
    write_private(path, "\n".join(lines)[:CONTEXT_LIMIT] + "\n")
    return path
