"""CLI commands that run or check mtl-mcp itself: serve, doctor."""

from __future__ import annotations

from typing import Any

import click

from mtl_mcp.cli.app import common, echo_json, json_option, settings


@click.command()
@common
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio for local clients; http for a shared server.",
)
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address for --transport http."
)
@click.option(
    "--port",
    default=8765,
    show_default=True,
    type=click.IntRange(1, 65535),
    help="Port for --transport http.",
)
@click.option(
    "--token",
    envvar="MTL_MCP_TOKEN",
    show_envvar=True,
    help="Bearer token every HTTP request must send; required off loopback. Prefer the "
    "variable: other users can see command lines.",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    help="A name clients reach the HTTP server by (repeatable), e.g. memory.example.lan:8765.",
)
def serve(
    transport: str, host: str, port: int, token: str | None, allowed_hosts: tuple[str, ...]
) -> None:
    """Run the MCP server (stdio by default). Logs go to stderr.

    Over stdio, each window relays to the shared service (started if need be) unless
    MTL_MCP_SERVICE=off; HTTP serves every client from this process.
    """
    if transport == "stdio":
        from mtl_mcp.server.window import serve_window

        serve_window(settings())
        return
    from mtl_mcp.server import serve as run
    from mtl_mcp.server.http import check_exposure

    check_exposure(host, token)
    guard = "bearer token required" if token else "loopback only, no token"
    click.echo(f"serving MCP at http://{host}:{port}/mcp ({guard})", err=True)
    run(settings(), "http", host=host, port=port, token=token, allowed_hosts=allowed_hosts)


@click.command()
@common
@json_option
def doctor(as_json: bool) -> None:
    """Check the data dir, model, store and API key; say how to fix each problem."""
    from mtl_mcp.operations.doctor import run_checks

    checks = run_checks(settings())
    if as_json:
        echo_json([c.model_dump() for c in checks])
    else:
        for check in checks:
            click.echo(f"[{'ok' if check.ok else '!!'}] {check.name}: {check.detail}")
            if check.fix:
                click.echo(f"     fix: {check.fix}")
    if any(not c.ok and c.required for c in checks):
        raise SystemExit(1)


@click.group(invoke_without_command=True)
@common
@click.option(
    "--idle-seconds",
    type=click.FloatRange(min=1),
    help="Exit after this long with no window (default: service_idle_seconds, 600).",
)
@click.option("--key", hidden=True, help="Exit at once unless these settings have this key.")
def service(idle_seconds: float | None, key: str | None) -> None:
    """Run the shared memory service in the foreground (windows start it by themselves).

    One per user, data directory and settings: it keeps the model and the memory warm for
    every client window, CLI call and hook configured like it; a caller with another store,
    team pool, model, threshold or distillation setup gets a service of its own.
    `service status` shows them all, `service stop` stops them all.
    """
    if click.get_current_context().invoked_subcommand is not None:
        return
    from mtl_mcp.operations.service import Rendezvous
    from mtl_mcp.server.service import claim

    config = settings()
    if key is not None and key != Rendezvous.of(config).key:
        # The window that started it saw other settings (the config file changed between).
        click.echo("mtl-mcp service: these settings are not the starting window's", err=True)
        raise SystemExit(2)
    held = claim(config)  # before the heavy imports: a second service leaves at once
    if held is None:
        click.echo(f"another mtl-mcp service already serves these settings in {config.home}",
                   err=True)  # fmt: skip
        return
    from mtl_mcp.server.keeper import MemoryKeeper
    from mtl_mcp.server.service import retire_predecessors

    # Older releases' services step aside first: the keeper's re-embedding waits for them.
    retire_predecessors(config)

    # The store and the model load while the MCP SDK and the dashboard are imported: the
    # runtime's and LanceDB's native work overlaps those imports (a cold start's first
    # recall waits for both).
    keeper = MemoryKeeper(config)
    keeper.start_warming()
    from mtl_mcp.dashboard.run import KIND, UiDoor
    from mtl_mcp.server.connections import run_service

    # The dashboard runs inside the service, over its memory (`mtl-mcp ui`).
    idle = idle_seconds or config.service_idle_seconds
    run_service(config, held, idle, {KIND: UiDoor()}, keeper=keeper)


@service.command()
@common
@json_option
def status(as_json: bool) -> None:
    """Show every service of the data directory: pid, version, windows, memory, what it
    serves; `*` marks the one these settings use (exit 1: none runs)."""
    from mtl_mcp.operations.service import Rendezvous, statuses

    config = settings()
    found = statuses(config)
    if as_json:
        echo_json({"running": bool(found), "key": Rendezvous.of(config).key, "services": found})
    elif not found:
        click.echo("not running (a window starts one when it needs it)")
    for reply in [] if as_json else found:
        click.echo(_status_line(reply))
    if found and not as_json and not any(reply["current"] for reply in found):
        click.echo("none serves these settings (a window with them starts its own)")
    if not found:
        raise SystemExit(1)


def _status_line(reply: dict[str, Any]) -> str:
    """One service of `service status`: `*` if it serves these settings."""
    from mtl_mcp.operations.service import TAKEOVER
    from mtl_mcp.version import __version__

    where = f"{'*' if reply['current'] else ' '} {reply['key'] or 'mtl-mcp 0.2 layout'}: "
    if reply.get("retiring"):
        return (
            f"{where}pid {reply['pid']}, version {reply['version']}, {reply['rss_mb']} MB "
            "resident; retiring: it stepped aside for a newer service, serves the windows "
            "opened before, and exits when they close"
        )
    serves = reply.get("serves") or {}
    what = ", ".join(f"{name} {value}" for name, value in serves.items() if value is not None)
    line = (
        f"{where}pid {reply['pid']}, version {reply['version']}, {reply['windows']} windows, "
        f"up {reply['uptime_s']} s, {reply['rss_mb']} MB resident" + (f"; {what}" if what else "")
    )
    if reply.get("older") and (reply["current"] or reply["key"] is None):
        line += f"; older than this mtl-mcp ({__version__}): {TAKEOVER}"
    return line


@service.command()
@common
def stop() -> None:
    """Stop every service of the data directory; open windows start a new one when they
    next need it."""
    from mtl_mcp.operations.service import stop_services

    stopped = stop_services(settings().home)
    click.echo(f"stopped {_services(len(stopped))}" if stopped else "not running")


def _services(count: int) -> str:
    return "1 service" if count == 1 else f"{count} services"


COMMANDS = [serve, doctor, service]
