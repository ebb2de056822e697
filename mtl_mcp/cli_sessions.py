"""CLI commands that learn from sessions: distill, queue, hook, install, uninstall.

Registered on the main group by `mtl_mcp.cli`; errors are translated there, except in
`hook`, whose commands must exit 0 whatever happens.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar, cast

import click

from mtl_mcp import installers
from mtl_mcp.cli import common, echo_json, json_option, settings, stderr_console
from mtl_mcp.config import load_settings, platform_home, private_umask
from mtl_mcp.spool import Job, JobOutcome, Spool, run_worker

logger = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])
FORMATS = ["auto", "claude-code", "codex", "trajectory", "text"]


def _parse_age(text: str) -> timedelta:
    match = re.fullmatch(r"\s*(\d+)\s*([hdw])\s*", text)
    if not match:
        raise click.BadParameter(f"{text!r}: use a number and h, d or w, e.g. 7d")
    amount, unit = int(match[1]), match[2]
    return {
        "h": timedelta(hours=amount),
        "d": timedelta(days=amount),
        "w": timedelta(weeks=amount),
    }[unit]


def session_files(since: timedelta) -> Iterator[tuple[Path, str]]:
    """(transcript, format) for Claude Code and Codex sessions modified within `since`."""
    cutoff = datetime.now(UTC).timestamp() - since.total_seconds()
    claude = Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude") / "projects"
    codex = Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex") / "sessions"
    candidates = [(p, "claude-code") for p in claude.glob("*/*.jsonl")]
    candidates += [(p, "codex") for p in codex.glob("**/rollout-*.jsonl")]
    for path, fmt in sorted(candidates):
        try:
            if path.stat().st_mtime >= cutoff:
                yield path, fmt
        except OSError:
            continue


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
    "--dry-run", is_flag=True, help="Print the digest and its estimated cost; send nothing."
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

    Needs ANTHROPIC_API_KEY except with --dry-run. A job stays queued until its insights
    are stored, so an API outage loses nothing: rerun with --pending.
    """
    config = settings()
    if sum(bool(x) for x in (file, pending, since)) != 1:
        raise click.UsageError("give exactly one of FILE, --pending or --since")
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
                format=fmt,
                outcome_hint=outcome,
            )
        )
    elif since:
        found = list(session_files(_parse_age(since)))
        for path, kind in found:
            spool.enqueue(
                Job(session_id=path.stem, transcript_path=str(path), format=kind, client=kind)
            )
        click.echo(f"queued {len(found)} sessions from the last {since}", err=True)
    busy = stderr_console().status("distilling...") if sys.stderr.isatty() else nullcontext()
    with busy:
        outcomes = run_worker(config, ignore_backoff=True)
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
    from mtl_mcp.distill import estimate_cost, estimate_run_tokens, estimate_tokens
    from mtl_mcp.transcripts import build_digest, read_transcript

    config = settings()
    transcript = read_transcript(file, fmt)  # type: ignore[arg-type]
    digest = build_digest(transcript, token_budget=config.digest_tokens)
    worst = estimate_run_tokens(digest.text, outcome_hint=outcome)
    digest_tokens = estimate_tokens(digest.text)
    cost = estimate_cost(worst - 1500, 1500, config.distill_model)
    if as_json:
        echo_json(
            {
                "format": transcript.format,
                "skipped_lines": transcript.skipped,
                "digest": digest.text,
                "digest_tokens": digest_tokens,
                "worst_case_tokens": worst,
                "worst_case_usd": round(cost, 5),
                "model": config.distill_model,
                "trivial": digest.trivial,
            }
        )
        return
    click.echo(digest.text)
    click.echo(
        f"\n--- {transcript.format} transcript, {transcript.skipped} unreadable lines "
        f"skipped; digest ~{digest_tokens} tokens; worst case for a run ~{worst} tokens "
        f"= ${cost:.4f} with {config.distill_model}; "
        f"{'trivial: would be skipped' if digest.trivial else 'nothing sent'}",
        err=True,
    )


@click.command()
@common
@click.option("--retry-failed", is_flag=True, help="Move failed jobs back to the queue.")
@json_option
def queue(retry_failed: bool, as_json: bool) -> None:
    """Show pending and failed distillation jobs."""
    spool = Spool(settings())
    if retry_failed:
        for path, job in list(spool.jobs(spool.failed)):
            job.attempts, job.next_attempt_at = 0, datetime.now(UTC)
            spool.enqueue(job)
            path.unlink()
    rows = [
        {"state": state, **job.model_dump(mode="json")}
        for state, folder in (("pending", spool.pending), ("failed", spool.failed))
        for _, job in spool.jobs(folder)
    ]
    if as_json:
        echo_json(rows)
        return
    for row in rows:
        click.echo(
            f"{row['state']:8} {row['session_id']}  attempts {row['attempts']}  "
            f"next {row['next_attempt_at']}  {row['last_error'] or ''}".rstrip()
        )
    click.echo(f"{len(rows)} jobs", err=True)


def hook_command(fn: F) -> F:
    """Hooks never fail the session: log everything to a file and exit 0."""

    @click.option("--home", type=click.Path(file_okay=False, path_type=Path), hidden=True)
    @functools.wraps(fn)
    def wrapper(*args: Any, home: Path | None, **kwargs: Any) -> None:
        from mtl_mcp.hooks import log_to_file

        try:
            private_umask()  # logs, spool and context cache are for the owner only
            config = load_settings(home)
            log_to_file(config)
            fn(config, *args, **kwargs)
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
    from mtl_mcp.hooks import read_stdin
    from mtl_mcp.hooks import session_end as spool_session

    logger.info(spool_session(read_stdin(), config))


@hook.command("session-start")
@hook_command
def session_start(config: Any) -> None:
    """Print a few insights for this project as context (hook JSON on stdin)."""
    from mtl_mcp.hooks import read_stdin
    from mtl_mcp.hooks import session_start as context_for

    text = context_for(read_stdin(), config)
    if text:
        click.echo(text)


@hook.command("worker", hidden=True)
@hook_command
def worker(config: Any) -> None:
    """Distil ready jobs (started detached by session-end)."""
    outcomes = run_worker(config)
    if outcomes is None:
        logger.info("another worker is running")
    for item in outcomes or []:
        logger.info("job %s: %s", item.session_id, item.status)


@hook.command("refresh", hidden=True)
@click.option("--project-dir", default=".")
@hook_command
def refresh(config: Any, project_dir: str) -> None:
    """Recompute the session-start context of a project."""
    from mtl_mcp.hooks import refresh_context

    refresh_context(config, project_dir)


def _install_plan(client: str, scope: str, remove: bool, hooks: bool) -> installers.Plan:
    target = cast(installers.Client, client)
    where = cast(installers.InstallScope, scope)
    home, project_dir = Path.home(), Path.cwd()
    if remove:
        return installers.plan_uninstall(target, where, user_home=home, project_dir=project_dir)
    # Clients start us with their own environment: pass a non-default data dir explicitly.
    config = settings()
    env = {} if config.home == platform_home() else {"MTL_MCP_HOME": str(config.home)}
    return installers.plan_install(
        target,
        where,
        installers.detect_launch(env),
        hooks=hooks,
        user_home=home,
        project_dir=project_dir,
    )


def _apply_plan(plan: installers.Plan, dry_run: bool) -> None:
    if not plan.changes:
        click.echo(f"{plan.client}: already up to date, nothing to change")
    for change in plan.changes:
        if dry_run:
            click.echo(change.diff())
    if plan.changes and not dry_run:
        for backup in installers.apply(plan):
            click.echo(f"backup: {backup}", err=True)
        for change in plan.changes:
            click.echo(f"wrote {change.path}")
    for note in plan.notes:
        click.echo(f"note: {note}", err=True)
    if dry_run and plan.changes:
        click.echo("dry run: nothing was written", err=True)


CLIENT_CHOICE = click.Choice(installers.CLIENTS)
SCOPE_OPTION = click.option(
    "--scope",
    type=click.Choice(["user", "project"]),
    default="user",
    show_default=True,
    help="user: every project; project: this folder.",
)


@click.command()
@common
@click.argument("client", type=CLIENT_CHOICE)
@SCOPE_OPTION
@click.option("--dry-run", is_flag=True, help="Print the diff; write nothing.")
@click.option("--no-hooks", is_flag=True, help="Register the MCP server only.")
def install(client: str, scope: str, dry_run: bool, no_hooks: bool) -> None:
    """Register the MCP server (and session hooks) in a client's config files."""
    _apply_plan(_install_plan(client, scope, remove=False, hooks=not no_hooks), dry_run)


@click.command()
@common
@click.argument("client", type=CLIENT_CHOICE)
@SCOPE_OPTION
@click.option("--dry-run", is_flag=True, help="Print the diff; write nothing.")
def uninstall(client: str, scope: str, dry_run: bool) -> None:
    """Remove what `install` added; every other setting stays."""
    _apply_plan(_install_plan(client, scope, remove=True, hooks=True), dry_run)


COMMANDS = [distill, queue, hook, install, uninstall]
