"""CLI commands that learn from sessions: distill, queue, hook.

Registered on the main group by `mtl_mcp.cli`; errors are translated by its group, except
in `hook`, whose commands must exit 0 whatever happens.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from mtl_mcp.cli.app import (
    common,
    echo_json,
    json_option,
    quick_memory,
    settings,
    stderr_console,
)
from mtl_mcp.config import Settings, load_settings, private_umask
from mtl_mcp.errors import MtlError, TranscriptError
from mtl_mcp.learning.spool import Job, JobOutcome, Spool
from mtl_mcp.learning.transcripts import Format, not_text

if TYPE_CHECKING:
    from mtl_mcp.learning.discovery import NotesFile

logger = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])
FORMATS = ["auto", "claude-code", "codex", "trajectory", "text"]


def _echo_outcome(outcome: JobOutcome) -> None:
    click.echo(f"{outcome.session_id}: {outcome.status} - {outcome.detail}")
    for result in outcome.results:
        click.echo(f"  {result.status} {result.id or ''} {result.title or ''}".rstrip())
    for line in outcome.dropped:
        click.echo(f"  dropped {line}")


@click.command()
@common
@click.argument(
    "file", required=False, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="auto",
    show_default=True,
    help="Transcript format; auto detects it.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print the digest, the backend that would distil it and the estimate (for a "
    "backfill: the files it would read); send nothing.",
)
@click.option(
    "--outcome",
    type=click.Choice(["success", "failure", "unknown"]),
    default="unknown",
    show_default=True,
    help="Skip the judge call when you know how the session went.",
)
@click.option("--pending", is_flag=True, help="Retry every queued job now, ignoring backoff.")
@click.option(
    "--since",
    "since",
    help="Backfill Claude Code and Codex sessions newer than this (e.g. 7d, 12h), and "
    "the assistants' memory files changed since.",
)
@click.option(
    "--no-memories",
    is_flag=True,
    help="With --since: sessions only, not Claude Code's auto memory or Codex's memories.",
)
@click.option(
    "--memories",
    is_flag=True,
    help="Learn from every memory file Claude Code and Codex keep, whatever its age.",
)
@click.option(
    "--project-notes",
    "project_notes",
    is_flag=False,
    flag_value=".",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Learn from a project's CLAUDE.md, AGENTS.md and Cursor rules (DIR, default the "
    "current folder): only what transfers to other projects is kept.",
    metavar="[DIR]",
)
@json_option
def distill(
    file: Path | None,
    fmt: str,
    dry_run: bool,
    outcome: Any,
    pending: bool,
    since: str | None,
    no_memories: bool,
    memories: bool,
    project_notes: Path | None,
    as_json: bool,
) -> None:
    """Distil a transcript (or queued / recent sessions, or the notes the assistants keep)
    into abstract insights.

    Needs MTL_MCP_OPENAI_BASE_URL (a local model), ANTHROPIC_API_KEY or a logged-in
    `claude` or `codex` (MTL_MCP_DISTILL_BACKEND), except with --dry-run, which shows the
    backend and the estimate (or, for a backfill, what it would read). A job stays queued
    until its insights are stored, so an outage loses nothing: rerun with --pending. A
    memory or notes file is read again only once its content changes.
    """
    config = settings()
    modes = (file, pending, since, memories, project_notes)
    if sum(bool(x) for x in modes) != 1:
        raise click.UsageError(
            "give exactly one of FILE, --pending, --since, --memories or --project-notes"
        )
    if no_memories and not since:
        raise click.UsageError("--no-memories goes with --since")
    if file and (problem := not_text(file)):
        raise TranscriptError(problem)  # nothing queued: no retry would read it
    if file and dry_run:
        _dry_run(file, fmt, outcome, as_json)
        return
    spool = Spool(config)
    if since or memories or project_notes:
        with_memories = memories or bool(since and not no_memories)
        _backfill(spool, since, with_memories, project_notes, dry_run, as_json)
        if dry_run:
            return
    elif file:
        spool.enqueue(
            Job(
                session_id=f"file:{file.resolve()}",
                transcript_path=str(file.resolve()),
                cwd=str(Path.cwd()),
                client="cli",
                format=cast(Format, fmt),
                outcome_hint=outcome,
            )
        )
    busy = stderr_console().status("distilling...") if sys.stderr.isatty() else nullcontext()
    with busy:
        outcomes = _run_worker(config, ignore_backoff=True)
    if outcomes is None:
        raise click.ClickException(
            "another mtl-mcp worker is distilling right now; check `mtl-mcp queue` in a minute"
        )
    if as_json:
        echo_json([o.model_dump(mode="json") for o in outcomes])
        return
    for item in outcomes:
        _echo_outcome(item)
    if not outcomes:
        click.echo("nothing to distil", err=True)


def _backfill(
    spool: Spool,
    since: str | None,
    memories: bool,
    project: Path | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Queue the sessions of the last `since`, the assistants' memory files (those changed
    within `since`, or all) and a `project`'s notes; a notes file whose content was
    distilled before is not queued. With `dry_run`, list what would be read instead."""
    from mtl_mcp.learning.discovery import (
        memory_files,
        parse_age,
        project_note_files,
        session_files,
        unread,
    )

    age = parse_age(since) if since else None
    sessions = list(session_files(age)) if age else []
    groups: dict[str, list[NotesFile]] = {}
    if memories:
        groups["memory files"] = memory_files(age)
    if project:
        groups["project notes"] = project_note_files(project)
    done = spool.done()
    window = f" from the last {since}" if since else ""
    parts = [f"{len(sessions)} sessions{window}"] if age else []
    changed = []
    for label, found in groups.items():
        fresh = unread(found, done)
        changed += fresh
        unchanged = len(found) - len(fresh)
        parts.append(
            f"{label}: {len(fresh)} new or changed, {unchanged} unchanged (not read again)"
            if found
            else f"no {label} found"
        )
    if dry_run:
        paths = [str(path) for path, _ in sessions] + [str(notes.path) for notes in changed]
        if as_json:
            echo_json(paths)
        else:
            click.echo("\n".join(paths), nl=bool(paths))
        click.echo(f"would queue {'; '.join(parts)}; nothing sent", err=True)
        return
    for path, kind in sessions:
        spool.enqueue(
            Job(session_id=path.stem, transcript_path=str(path), format=kind, client=kind)
        )
    for notes in changed:
        spool.enqueue(notes.job())
    click.echo(f"queued {'; '.join(parts)}", err=True)


def _dry_run(file: Path, fmt: str, outcome: Any, as_json: bool) -> None:
    from mtl_mcp.learning.pipeline import estimate

    found = estimate(file, settings(), cast(Format, fmt), outcome)
    if as_json:
        echo_json(found)
        return
    click.echo(found.digest)
    if found.backend is None:
        would = f"nothing would distil it now: {found.backend_reason}"
    elif found.local:
        would = (
            f"backend {found.backend} ({found.backend_reason}); worst case for a run "
            f"~{found.worst_case_tokens} tokens on this machine, no charge"
        )
    elif found.subscription:
        would = (
            f"backend {found.backend} ({found.backend_reason}); worst case for a run "
            f"~{found.worst_case_tokens} tokens of your subscription's quota, no API charge"
        )
    else:
        would = (
            f"backend {found.backend} ({found.backend_reason}); worst case for a run "
            f"~{found.worst_case_tokens} tokens = ${found.worst_case_usd:.4f} with {found.model}"
        )
    click.echo(
        f"\n--- {found.format} transcript, {found.skipped_lines} unreadable lines "
        f"skipped; digest ~{found.digest_tokens} tokens; {would}; "
        f"{'trivial: would be skipped' if found.trivial else 'nothing sent'}",
        err=True,
    )


def _run_worker(config: Settings, ignore_backoff: bool) -> list[JobOutcome] | None:
    """The queue worker, storing through the running service when there is one (its
    deduplication stays exact), else through a memory of this process."""
    from mtl_mcp.learning.worker import run_worker
    from mtl_mcp.operations.context import refresh_general_context
    from mtl_mcp.server.calls import ServiceMemory

    warm = ServiceMemory.running(config) if config.service else None
    return run_worker(
        config, ignore_backoff=ignore_backoff, on_change=refresh_general_context, recorder=warm
    )


@click.command()
@common
@click.option("--retry-failed", is_flag=True, help="Move failed jobs back to the queue.")
@json_option
def queue(retry_failed: bool, as_json: bool) -> None:
    """Show pending and failed distillation jobs."""
    spool = Spool(settings())
    if retry_failed:
        spool.requeue_failed()
    rows = spool.listing()
    if as_json:
        echo_json(rows)
        return
    for row in rows:
        click.echo(
            f"{row['state']:8} {row['session_id']}  attempts {row['attempts']}  "
            f"next {row['next_attempt_at']}  {row['last_error'] or ''}".rstrip()
        )
    click.echo(f"{len(rows)} jobs", err=True)


@click.command()
@common
@click.option("--limit", default=10, show_default=True, type=click.IntRange(1, 1000))
@json_option
def sessions(limit: int, as_json: bool) -> None:
    """Recent sessions: what each was given and by which trigger (tool call, plan hook,
    session-start context), what was learnt from it, and the verdicts on what it was given."""
    from mtl_mcp.text.render import session_text

    reports = quick_memory().sessions(limit)
    if as_json:
        echo_json([r.model_dump(mode="json") for r in reports])
        return
    for report in reports:
        click.echo(session_text(report))
    if not reports:
        click.echo("no session has been given a recall yet", err=True)


def hook_command(fn: F) -> F:
    """Hooks never fail the session: log everything to a file and exit 0."""

    @click.option("--home", type=click.Path(file_okay=False, path_type=Path), hidden=True)
    @functools.wraps(fn)
    def wrapper(*args: Any, home: Path | None, **kwargs: Any) -> None:
        from mtl_mcp.hooks.io import log_early, log_to_file

        log_early()
        try:
            private_umask()  # logs, spool and context cache are for the owner only
            config = load_settings(home)
            log_to_file(config)
            fn(config, *args, **kwargs)
        except MtlError as exc:  # said in our words: one line
            logger.warning("hook %s: %s", fn.__name__, exc)
        except Exception:  # a memory bug must never break the user's session
            logger.exception("hook %s failed", fn.__name__)
        sys.exit(0)

    return wrapper  # type: ignore[return-value]


@click.group()
def hook() -> None:
    """Entry points for client hooks. They always exit 0 and log to <home>/logs/hooks.log."""


@hook.command("session-end")
@hook_command
def session_end(config: Any) -> None:
    """Spool the ended session (hook JSON on stdin) and start a detached distiller."""
    from mtl_mcp.hooks.fast import read_stdin
    from mtl_mcp.hooks.session import session_end as spool_session

    logger.info(spool_session(read_stdin(), config))


@hook.command("session-start")
@hook_command
def session_start(config: Any) -> None:
    """Print a few insights for this project as context (hook JSON on stdin)."""
    from mtl_mcp.hooks.fast import read_stdin
    from mtl_mcp.hooks.session import session_start as context_for

    text = context_for(read_stdin(), config)
    if text:
        click.echo(text, nl=not text.endswith("\n"))


@hook.command("tool-use")
@click.option("--home", type=click.Path(file_okay=False, path_type=Path), hidden=True)
def tool_use(home: Path | None) -> None:
    """After a tool call (hook JSON on stdin): recall for the plan the model stated.

    `mtl-mcp hook tool-use` itself skips this CLI and starts in a few milliseconds; this
    entry runs the same hook.
    """
    from mtl_mcp.hooks.fast import read_stdin
    from mtl_mcp.hooks.tool_use import run

    sys.exit(run(str(home) if home else None, read_stdin()))


@hook.command("worker", hidden=True)
@hook_command
def worker(config: Any) -> None:
    """Distil ready jobs (started detached by session-end)."""
    if hasattr(os, "nice"):  # POSIX: in the background, behind whatever the user is doing
        os.nice(10)
    outcomes = _run_worker(config, ignore_backoff=False)
    if outcomes is None:
        logger.info("another worker is running")
    for item in outcomes or []:
        logger.info("job %s: %s", item.session_id, item.status)


@hook.command("refresh", hidden=True)
@click.option("--project-dir", default=".")
@click.option("--session", help="The session the cached context was shown to.")
@click.option("--client", help="Its client.")
@click.option("--shown", default="", help="The ids of the insights it was shown, comma-separated.")
@hook_command
def refresh(
    config: Any, project_dir: str, session: str | None, client: str | None, shown: str
) -> None:
    """Recompute the session-start context of a project (and record what was shown)."""
    if hasattr(os, "nice"):  # a cache for next time: behind the service warming up meanwhile
        os.nice(10)
    from mtl_mcp.operations.context import refresh_context
    from mtl_mcp.schemas import RecallOrigin

    origin = RecallOrigin(session_id=session, client=client, trigger="session-start")
    refresh_context(
        config, project_dir, origin if session else None, shown.split(",") if shown else []
    )


COMMANDS = [distill, queue, sessions, hook]
