"""CLI command that opens the dashboard: ui."""

from __future__ import annotations

import contextlib
import threading

import click

from mtl_mcp.cli.app import common, settings


@click.command()
@common
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    help="Port on 127.0.0.1 (default: a free one).",
)
@click.option("--no-browser", is_flag=True, help="Print the URL; do not open a browser.")
def ui(port: int, no_browser: bool) -> None:
    """Open the dashboard in your browser: browse, search, try a plan, curate.

    It listens on 127.0.0.1 only and prints its URL with this launch's secret token; the
    page works only with it. It runs inside the warm service, over the memory the service
    holds (one model, no second copy), and closes when this command stops (Ctrl-C).
    """
    from mtl_mcp.dashboard import run

    config = settings()
    held = run.from_service(config, port) if config.service else None
    if held is not None:
        sock, url = held
        _announce(url, no_browser)
        with contextlib.suppress(KeyboardInterrupt):
            run.hold(sock)
        return
    why = "MTL_MCP_SERVICE is off" if not config.service else "the shared service cannot start"
    click.echo(f"mtl-mcp: serving the dashboard in this process ({why})", err=True)
    from mtl_mcp.server.keeper import MemoryKeeper

    keeper = MemoryKeeper(config)
    keeper.start_warming()
    with run.in_process(keeper, port) as (url, serve):
        _announce(url, no_browser)
        serve()


def _announce(url: str, no_browser: bool) -> None:
    click.echo(f"mtl-mcp dashboard: {url}")
    click.echo("Press Ctrl-C to close it.", err=True)
    if not no_browser:
        import webbrowser

        threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()


COMMANDS = [ui]
