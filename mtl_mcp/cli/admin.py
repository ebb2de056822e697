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
    """Run the MCP server (stdio by default). Logs go to stderr."""
    from mtl_mcp.server import serve as run

    if transport == "http":
        from mtl_mcp.server.http import check_exposure

        check_exposure(host, token)
        guard = "bearer token required" if token else "loopback only, no token"
        click.echo(f"serving MCP at http://{host}:{port}/mcp ({guard})", err=True)
    run(
        settings(),
        "http" if transport == "http" else "stdio",
        host=host,
        port=port,
        token=token,
        allowed_hosts=allowed_hosts,
    )


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


COMMANDS = [serve, doctor]
