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
from typing import Any, TypeVar, cast

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

logger = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])
FORMATS = ["auto", "claude-code", "codex", "trajectory", "text"]


def _echo_outcome(outcome: JobOutcome) -> None:
    click.echo(f"{outcome.session_id}: {outcome.status} - {outcome.detail}")
    for result in outcome.results:
        click.echo(f"  {result.status} {result.id or ''} {result.title or ''}".rstrip())


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
    help="Print the digest, the backend that would distil it and the estimate; send nothing.",
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
    help="Backfill Claude Code and Codex sessions newer than this (e.g. 7d, 12h).",
)
@json_option
def distill(
    file: Path | None,
    fmt: str,
    dry_run: bool,
    outcome: Any,
    pending: bool,
    since: str | None,
    as_json: bool,
) -> None:
    """Distil a transcript (or queued / recent sessions) into abstract insights.

    Needs MTL_MCP_OPENAI_BASE_URL (a local model), ANTHROPIC_API_KEY or a logged-in
    `claude` or `codex` (MTL_MCP_DISTILL_BACKEND), except with --dry-run, which shows the
    backend and the estimate. A job stays queued until its insights are stored, so an
    outage loses nothing: rerun with --pending.
    """
    config = settings()
    if sum(bool(x) for x in (file, pending, since)) != 1:
        raise click.UsageError("give exactly one of FILE, --pending or --since")
    if file and (problem := not_text(file)):
        raise TranscriptError(problem)  # nothing queued: no retry would read it
    if file and dry_run:
        _dry_run(file, fmt, outcome, as_json)
        return
    spool = Spool(config)
    if file:
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
    elif since:
        from mtl_mcp.learning.discovery import parse_age, session_files

        found = list(session_files(parse_age(since)))
        for path, kind in found:
            spool.enqueue(
                Job(session_id=path.stem, transcript_path=str(path), format=kind, client=kind)
            )
        click.echo(f"queued {len(found)} sessions from the last {since}", err=True)
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
        from mtl_mcp.hooks.io import log_to_file

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
    from mtl_mcp.operations.context import refresh_context
    from mtl_mcp.schemas import RecallOrigin

    origin = RecallOrigin(session_id=session, client=client, trigger="session-start")
    refresh_context(
        config, project_dir, origin if session else None, shown.split(",") if shown else []
    )


COMMANDS = [distill, queue, sessions, hook]
