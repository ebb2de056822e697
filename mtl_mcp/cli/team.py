"""CLI commands for the team pool: share.

Registered on the main group by `mtl_mcp.cli`; errors are translated by its group.
"""

from __future__ import annotations

from collections import Counter

import click

from mtl_mcp.cli.app import common, echo_json, json_option, open_memory


@click.command()
@common
@click.argument("ids", nargs=-1)
@click.option(
    "--policy",
    is_flag=True,
    help="Share every insight the policy admits: abstraction score and support at least the "
    "minimums below, never rated harmful.",
)
@click.option(
    "--min-abstraction",
    default=0.8,
    show_default=True,
    type=click.FloatRange(0, 1),
    help="The policy's minimum abstraction score.",
)
@click.option(
    "--min-support",
    default=2,
    show_default=True,
    type=click.IntRange(1),
    help="The policy's minimum support (sessions that produced or confirmed it).",
)
@click.option("--dry-run", is_flag=True, help="Screen and list what would be shared; send nothing.")
@json_option
def share(
    ids: tuple[str, ...],
    policy: bool,
    min_abstraction: float,
    min_support: int,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Share insights IDS (or --policy's choice) with the team pool.

    Each is linted again (secrets, instructions, task detail); project identities reach
    the pool as opaque hashes. When the pool is unreachable they wait in a local outbox,
    which every share (and a running server) retries; with no IDS this only retries it.
    """
    from mtl_mcp.memory.sharing import SharePolicy

    memory = open_memory()
    chosen = list(ids)
    rules = SharePolicy(min_abstraction, min_support) if policy else None
    if rules is not None:
        chosen += [i for i in memory.share_candidates(rules) if i not in chosen]
    results = memory.share(chosen, dry_run=dry_run, policy=rules)
    if as_json:
        echo_json([r.model_dump(mode="json") for r in results])
        return
    for result in results:
        into = f" -> {result.team_id}" if result.team_id and result.team_id != result.id else ""
        click.echo(f"{result.status:<14} {result.id}{into}  {result.title or ''}".rstrip())
        for reason in result.reasons:
            click.echo(f"  {reason}", err=True)
        for warning in result.warnings:
            click.echo(f"  warning: {warning}", err=True)
    tally = Counter(r.status for r in results)
    summary = ", ".join(f"{n} {status}" for status, n in sorted(tally.items())) or "nothing to do"
    click.echo(summary + ("; nothing was sent" if dry_run else ""), err=True)
    if tally["rejected"]:
        raise SystemExit(1)


COMMANDS = [share]
