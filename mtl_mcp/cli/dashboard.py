"""CLI command that opens the dashboard: ui."""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING

import click

from mtl_mcp.cli.app import common, settings

if TYPE_CHECKING:
    from mtl_mcp.dashboard.run import Links


@click.command()
@common
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    help="Port on 127.0.0.1 (default: a free one).",
)
@click.option("--no-browser", is_flag=True, help="Print the link; do not open a browser.")
def ui(port: int, no_browser: bool) -> None:
    """Open the dashboard in your browser: browse, search, try a plan, curate.

    It listens on 127.0.0.1 only. It prints a one-time link (it opens one browser tab, once,
    within 5 minutes) and opens the browser through a private file, so no secret is on a
    command line. It runs inside the warm service, over the memory the service holds (one
    model, no second copy), and closes when this command stops (Ctrl-C). Run it again while
    it is open for a new link to the same dashboard (another tab or browser).
    """
    from mtl_mcp.dashboard import run

    config = settings()
    found = run.from_service(config, port, not no_browser) if config.service else None
    if found is not None:
        opened = _announce(found)
        if found.held is None:
            click.echo("(a new link to the dashboard another `mtl-mcp ui` keeps open)", err=True)
            if opened is not None:
                opened.join(10.0)  # the browser is told before this command ends
            return
        click.echo("Press Ctrl-C to close it.", err=True)
        with contextlib.suppress(KeyboardInterrupt):
            run.hold(found.held)
        return
    why = "MTL_MCP_SERVICE is off" if not config.service else "the shared service cannot start"
    click.echo(f"mtl-mcp: serving the dashboard in this process ({why})", err=True)
    from mtl_mcp.server.keeper import MemoryKeeper

    keeper = MemoryKeeper(config)
    keeper.start_warming()
    with run.in_process(keeper, port, not no_browser) as (found, serve):
        _announce(found)
        click.echo("Press Ctrl-C to close it.", err=True)
        serve()


def _announce(found: Links) -> threading.Thread | None:
    """Print the link; open the browser on its launch file (in the background: a browser
    may take a while to start)."""
    click.echo(f"mtl-mcp dashboard: {found.url}")
    if found.browser_file is None:
        return None
    from mtl_mcp.dashboard.run import open_browser

    def opening(launch_file: str) -> None:
        with contextlib.suppress(OSError):  # no browser: the printed link is there
            open_browser(launch_file)

    thread = threading.Thread(target=opening, args=(found.browser_file,), daemon=True)
    thread.start()
    return thread


COMMANDS = [ui]
