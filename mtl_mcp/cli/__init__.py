"""The command-line front door: `mtl-mcp <command>`.

app       the group, shared options and helpers; errors translated once
insights  recall, add, import, export, list, show, rate, forget, stats, seed, reindex
admin     serve, doctor
safety    backup, restore, purge
sessions  distill, queue, hook
clients   install, uninstall
quality   eval, map
team      share
"""

from mtl_mcp.cli import admin, clients, insights, quality, safety, sessions, team
from mtl_mcp.cli.app import cli

for _module in (admin, insights, team, sessions, clients, safety, quality):
    for _command in _module.COMMANDS:
        cli.add_command(_command)

__all__ = ["cli"]
