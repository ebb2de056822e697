"""CLI commands that register mtl-mcp in a client's config files: install, uninstall."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import click

from mtl_mcp.cli.app import common, open_memory, settings
from mtl_mcp.errors import MtlError
from mtl_mcp.operations.install.plans import apply, plan_install, plan_uninstall
from mtl_mcp.operations.install.stale import install_launch
from mtl_mcp.operations.install.targets import (
    CLIENTS,
    Client,
    InstallScope,
    Plan,
)


def _plan(client: str, scope: str, remove: bool, hooks: bool, trust_hooks: bool = False) -> Plan:
    target, where = cast(Client, client), cast(InstallScope, scope)
    home, project_dir = Path.home(), Path.cwd()
    if remove:
        return plan_uninstall(target, where, user_home=home, project_dir=project_dir)
    return plan_install(
        target,
        where,
        install_launch(settings().home),
        hooks=hooks,
        trust_hooks=trust_hooks,
        user_home=home,
        project_dir=project_dir,
    )


def _apply(plan: Plan, dry_run: bool) -> None:
    if not plan.changes:
        click.echo(f"{plan.client}: already up to date, nothing to change")
    for change in plan.changes:
        if dry_run:
            click.echo(change.diff())
    if plan.changes and not dry_run:
        for backup in apply(plan):
            click.echo(f"backup: {backup}", err=True)
        for change in plan.changes:
            click.echo(f"{'removed' if change.after is None else 'wrote'} {change.path}")
    for note in plan.notes:
        click.echo(f"note: {note}", err=True)
    if dry_run and plan.changes:
        click.echo("dry run: nothing was written", err=True)


CLIENT_CHOICE = click.Choice(CLIENTS)
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
@click.option(
    "--no-hooks",
    is_flag=True,
    help="No session hooks: the server (and Claude Code's read-only permissions) only.",
)
@click.option(
    "--trust-hooks",
    is_flag=True,
    help="Codex only: also record Codex's trust in the hooks this writes (what /hooks in "
    "Codex does), so that Codex, and `codex exec`, run them.",
)
def install(client: str, scope: str, dry_run: bool, no_hooks: bool, trust_hooks: bool) -> None:
    """Register the MCP server (and session hooks) in a client's config files; say which
    model will distil its sessions and what that costs. `--dry-run` prints the diff; every
    file changed is backed up first, and `uninstall` removes exactly what this added.

    For Claude Code and Gemini CLI, also allow the read-only tools (recall_insights,
    list_memories), so they run without a prompt, and in `claude -p` / `gemini -p`; the
    others still ask.

    Codex runs hooks only once you trust them (/hooks in Codex); `codex exec` skips the
    others silently. Install does not trust them for you unless --trust-hooks says so.
    Gemini CLI starts servers and runs hooks only in folders you trusted; install never
    trusts one (its note and `mtl-mcp doctor` say what to do).

    Session hooks: Claude Code, Cursor, Codex, Gemini CLI, Copilot CLI (hook files) and
    opencode (a plugin). Claude Desktop, VS Code, Windsurf and Zed get the server only.

    Also prepares the memory: the store (with the starter pack) and the session-start
    context, so the first session neither waits for them nor starts without context.
    """
    _apply(_plan(client, scope, remove=False, hooks=not no_hooks, trust_hooks=trust_hooks), dry_run)
    from mtl_mcp.learning.backends.select import source_of
    from mtl_mcp.learning.pipeline import backend_summary

    click.echo(f"note: {backend_summary(settings(), source_of(client))}", err=True)
    if not dry_run:
        _prepare_memory()


def _prepare_memory() -> None:
    from mtl_mcp.operations.context import write_general_context

    memory = open_memory()
    try:
        if not memory.exists():
            click.echo("creating the memory with the starter pack (once, a few seconds)", err=True)
        total = memory.stats()["total"]  # opens the store, creating it on first use
        write_general_context(memory)
    except (MtlError, OSError) as exc:
        click.echo(f"note: the memory is not ready ({exc}); run `mtl-mcp doctor`", err=True)
        return
    click.echo(f"memory: {total} insights in {memory.settings.home}", err=True)


@click.command()
@common
@click.argument("client", type=CLIENT_CHOICE)
@SCOPE_OPTION
@click.option("--dry-run", is_flag=True, help="Print the diff; write nothing.")
def uninstall(client: str, scope: str, dry_run: bool) -> None:
    """Remove what `install` added; every other setting stays."""
    _apply(_plan(client, scope, remove=True, hooks=True), dry_run)


COMMANDS = [install, uninstall]
