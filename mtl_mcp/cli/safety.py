"""CLI commands that protect the data: backup, restore, purge, consolidate.

Registered on the main group by `mtl_mcp.cli`; errors are translated by its group.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from mtl_mcp.cli.app import (
    common,
    confirm_destructive,
    echo_json,
    json_option,
    open_memory,
    stop_the_service,
)
from mtl_mcp.config import private_umask
from mtl_mcp.text.frames import neutral

if TYPE_CHECKING:  # the purge machinery imports pyarrow: not for `--help` or the hooks
    from mtl_mcp.operations.purge import PurgeReport
    from mtl_mcp.schemas import ConsolidationRun


def echo_purge(report: PurgeReport, as_json: bool) -> None:
    """Print what a purge did; a trace left on disk is an error (exit 1)."""
    if as_json:
        echo_json(report)
    else:
        click.echo(f"purged {len(report.ids)} insights")
        for insight, title in zip(report.ids, report.titles, strict=True):
            click.echo(f"  {insight}: {title}")
        click.echo(
            f"rewrote the table and removed {report.versions_removed} older versions; "
            f"backup without them: {report.backup or 'none (empty store)'}"
        )
        if report.scrubbed_backups:
            click.echo(f"rewrote {len(report.scrubbed_backups)} older backups without them")
        for path in report.scrubbed_files:
            click.echo(f"scrubbed {path}")
        if report.ledger_rows:
            click.echo(f"removed {report.ledger_rows} recalls and verdicts whose text matched")
        if report.team_ids:
            click.echo(
                f"removed {len(report.team_ids)} insights you shared from the team pool, and "
                f"{report.team_versions_removed} of its older versions"
            )
    for reason in report.unscanned:
        click.echo(f"not scanned: {reason}", err=True)
    if report.traces:
        others = (
            f" {report.team_others} insights other members shared match too: only they can "
            "purge those."
            if report.team_others
            else ""
        )
        raise click.ClickException(
            "the text is still in: " + ", ".join(report.traces) + ". A damaged store or a "
            "config file is never rewritten: delete or edit these files yourself." + others
        )
    if not as_json:
        click.echo("no trace of the text is left in the data directory or the stores", err=True)


@click.command()
@common
@click.option("--pattern", required=True, help="A regular expression (Python syntax).")
@click.option("-i", "--ignore-case", is_flag=True, help="Match regardless of case.")
@click.option("--dry-run", is_flag=True, help="List the insights that match; change nothing.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation (needed off a terminal).")
@json_option
def purge(pattern: str, ignore_case: bool, dry_run: bool, yes: bool, as_json: bool) -> None:
    """Delete every insight whose text matches --pattern, and every trace of it on disk.

    Also rewrites older table versions, backups, logs, the spool and the context cache, so a
    leaked secret is really gone. Stop busy servers first: a recall running at that moment
    may fail once.
    """
    from mtl_mcp.operations.purge import compile_pattern, matching, purge_pattern, team_matching

    regex = compile_pattern(pattern, ignore_case)
    memory = open_memory()
    shared, others = team_matching(memory, regex)
    found = [*matching(memory, regex), *shared]
    if dry_run:
        if as_json:
            echo_json([{"id": i.id, "title": i.title, "source": i.source} for i in found])
        else:
            for insight in found:
                where = "  (shared with the team)" if insight.source == "team" else ""
                click.echo(f"{insight.id}  {insight.title}{where}")
            click.echo(f"{len(found)} insights match; nothing was changed", err=True)
            if others:
                click.echo(f"{others} insights other members shared match too", err=True)
        return
    confirm_destructive(
        yes, f"purge deletes {len(found)} matching insights and every trace of the pattern"
    )
    stop_the_service()  # the purge rewrites every file of the table
    echo_purge(purge_pattern(memory, regex), as_json)


@click.command()
@common
@click.option("--list", "list_only", is_flag=True, help="List the backups instead, newest first.")
@json_option
def backup(list_only: bool, as_json: bool) -> None:
    """Back up the store now (one is also taken before migrations, purges and restores)."""
    private_umask()
    memory = open_memory()
    if list_only:
        backups = memory.backups()
        if as_json:
            echo_json([b.model_dump(mode="json") for b in backups])
            return
        for info in backups:
            click.echo(
                f"{info.name}  {info.insights} insights  {info.reason}  "
                f"{info.created_at:%Y-%m-%d %H:%M} UTC"
            )
        click.echo(f"{len(backups)} backups in {memory.settings.home / 'backups'}", err=True)
        return
    made = memory.backup("manual")
    if made is None:
        raise click.ClickException(
            f"there is no store at {memory.settings.store_uri} yet: nothing to back up"
        )
    if as_json:
        echo_json(made)
    else:
        click.echo(f"backed up {made.insights} insights to {made.path}")


@click.command()
@common
@click.argument("name")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation (needed off a terminal).")
@json_option
def restore(name: str, yes: bool, as_json: bool) -> None:
    """Replace the store with backup NAME (a name from `backup --list`, or a path).

    The replaced store is backed up first if it can still be read, else moved to
    <home>/damaged/. Stop running servers first.
    """
    private_umask()
    memory = open_memory()
    chosen = memory.find_backup(name)
    confirm_destructive(
        yes, f"restore replaces the store with {chosen.name} ({chosen.insights} insights)"
    )
    stop_the_service()  # the store is replaced under it
    result = memory.restore(chosen)
    if as_json:
        echo_json(result)
        return
    click.echo(f"restored {result.insights} insights from {chosen.name}")
    if result.saved_as:
        click.echo(f"the replaced store was backed up as {result.saved_as.name}", err=True)
    if result.moved_to:
        click.echo(
            f"the damaged store was moved to {result.moved_to}: delete it once you are done",
            err=True,
        )


@click.command()
@common
@click.option("--dry-run", is_flag=True, help="Show what a pass would change; change nothing.")
@click.option("--undo", "undo_run", metavar="RUN", help="Undo the run RUN (see --list).")
@click.option("--list", "list_runs", is_flag=True, help="List the runs, newest first.")
@click.option(
    "--no-model",
    is_flag=True,
    help="Keep the best existing wording of each merge, even with a backend configured.",
)
@click.option("--team", is_flag=True, help="Consolidate the team pool instead (once, by lease).")
@json_option
def consolidate(
    dry_run: bool,
    undo_run: str | None,
    list_runs: bool,
    no_model: bool,
    team: bool,
    as_json: bool,
) -> None:
    """Merge paraphrases of one lesson, retire lessons superseded or unused for
    MTL_MCP_RETIRE_UNUSED_DAYS, and flag contradictions for you to settle.

    Nothing is deleted, and every run can be undone (--undo RUN). The service runs a pass
    by itself when idle (the team pool's too, once for all members); this runs one now.
    """
    if sum((dry_run, bool(undo_run), list_runs)) > 1:
        raise click.UsageError("pass one of --dry-run, --undo RUN and --list")
    memory = open_memory()
    if list_runs:
        runs = memory.consolidation_runs()
        if as_json:
            echo_json([run.model_dump(mode="json") for run in runs])
            return
        for run in runs:
            click.echo(f"{run.run}  {run.at:%Y-%m-%d %H:%M}  {run.trigger:9s}  {_summary(run)}")
        if not runs:
            click.echo("no consolidation run yet", err=True)
        return
    if undo_run:
        run = memory.undo_consolidation(undo_run)
        if as_json:
            echo_json(run)
        else:
            click.echo(f"undid {run.run}: {_summary(run)}")
        return
    if team:
        found = memory.consolidate_team(dry_run=dry_run)
        if found is None:
            raise click.ClickException("nothing was shared with the team pool yet")
        if as_json:
            echo_json(found)
        else:
            echo_run(found)
        return
    merger = None
    if not dry_run and not no_model:
        from mtl_mcp.learning.merging import cluster_merger

        merger = cluster_merger(memory.settings)
    run = memory.consolidate(dry_run=dry_run, merger=merger)
    if as_json:
        echo_json(run)
        return
    echo_run(run)


def _summary(run: ConsolidationRun) -> str:
    merged = sum(len(members) for _, members in run.merged)
    kept = "1 insight" if len(run.merged) == 1 else f"{len(run.merged)} insights"
    parts = [
        f"merged {merged} wordings into {kept}",
        f"{len(run.superseded)} superseded",
        f"{len(run.retired)} retired",
        f"{len(run.conflicts)} conflicts flagged",
    ]
    return ", ".join(parts) + (" (undone)" if run.undone_at else "")


def echo_run(run: ConsolidationRun) -> None:
    """A run for people: what changed and why, and how to undo it."""
    head = "would change" if run.dry_run else run.run
    click.echo(f"{head}: {_summary(run)}")
    for change in run.changes:  # titles and reasons are stored text: made inert
        title = neutral(change.titles.get(change.id, ""))
        if change.kind == "merged":
            click.echo(f"  merged      {change.id} {title!r} <- {', '.join(change.others)}")
        elif change.kind == "superseded":
            click.echo(f"  superseded  {change.id} {title!r} by {change.others[0]}")
        elif change.kind == "retired":
            click.echo(f"  retired     {change.id} {title!r}")
        else:
            other = neutral(change.titles.get(change.others[0], ""))
            click.echo(f"  conflict    {change.id} {title!r} / {change.others[0]} {other!r}")
        click.echo(f"              {neutral(change.why)}")
    if run.conflicts:
        click.echo(
            "conflicts are never settled for you: keep both if each holds in its own scope, "
            "else retire or edit one (`mtl-mcp ui`) or `mtl-mcp forget ID`",
            err=True,
        )
    if run.more:
        click.echo("more merges are left for the next pass", err=True)
    if not run.dry_run and run.changes:
        click.echo(f"undo it with: mtl-mcp consolidate --undo {run.run}", err=True)
    elif not run.changes:
        click.echo("nothing to consolidate", err=True)


COMMANDS = [backup, restore, purge, consolidate]
