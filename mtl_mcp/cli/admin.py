"""CLI commands that run or check mtl-mcp itself: serve, doctor."""

from __future__ import annotations

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
@click.option("--port", default=8765, show_default=True, help="Port for --transport http.")
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
def service(idle_seconds: float | None) -> None:
    """Run the shared memory service in the foreground (windows start it by themselves).

    One per user and data directory: it keeps the model and the memory warm for every
    client window, CLI call and hook. `service status` shows it, `service stop` stops it.
    """
    if click.get_current_context().invoked_subcommand is not None:
        return
    from mtl_mcp.server.service import claim

    config = settings()
    held = claim(config)  # before the heavy imports: a second service leaves at once
    if held is None:
        click.echo(f"another mtl-mcp service already serves {config.home}", err=True)
        return
    from mtl_mcp.server.connections import run_service

    run_service(config, held, idle_seconds or config.service_idle_seconds)


@service.command()
@common
@json_option
def status(as_json: bool) -> None:
    """Show the running service: pid, version, windows connected, memory (exit 1: none)."""
    from mtl_mcp.operations.service import request

    reply = request(settings(), "status")
    if as_json:
        echo_json(reply or {"ok": False, "running": False})
    elif reply:
        click.echo(
            f"running: pid {reply['pid']}, version {reply['version']}, "
            f"{reply['windows']} windows, up {reply['uptime_s']} s, "
            f"{reply['rss_mb']} MB resident"
        )
    else:
        click.echo("not running (a window starts it when it needs it)")
    if not reply:
        raise SystemExit(1)


@service.command()
@common
def stop() -> None:
    """Stop the running service; open windows start a new one when they next need it."""
    from mtl_mcp.operations.service import stop_service

    stopped = stop_service(settings())
    click.echo("stopped" if stopped else "not running")


COMMANDS = [serve, doctor, service]
