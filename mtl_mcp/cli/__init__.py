"""The command-line front door: `mtl-mcp <command>`.

app       the group, shared options and helpers; errors translated once
insights  recall, add, import, export, list, show, rate, forget, stats, seed, reindex
admin     serve, doctor
safety    backup, restore, purge, consolidate
sessions  distill, queue, hook
clients   install, uninstall
quality   eval, map
team      share
dashboard ui
trials    trial run, report, list, check
"""

import logging
import os
import sys

from mtl_mcp.cli import (
    admin,
    clients,
    dashboard,
    insights,
    quality,
    safety,
    sessions,
    team,
    trials,
)
from mtl_mcp.cli.app import cli

for _module in (admin, insights, team, sessions, clients, safety, quality, dashboard, trials):
    for _command in _module.COMMANDS:
        cli.add_command(_command)


def main() -> None:
    """The `mtl-mcp` executable: the CLI, then an exit that does not wait for a background
    refresh stuck on an object store that never answers. Every write of the command has
    finished by then; LanceDB's runtime would hold the exiting process for about 10 s."""
    try:
        cli()
    except SystemExit as exc:
        tier = sys.modules.get("mtl_mcp.memory.tier")  # loaded only if a store was opened
        if tier is not None and tier.refreshing():
            sys.stdout.flush()
            sys.stderr.flush()
            logging.shutdown()
            os._exit(exc.code if isinstance(exc.code, int) else 1)
        raise


__all__ = ["cli", "main"]
