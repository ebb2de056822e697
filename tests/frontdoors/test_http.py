"""The HTTP transport over real HTTP on loopback: bearer token, Host/Origin checks, MCP."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import httpx2
import pytest
from click.testing import CliRunner
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from mtl_mcp.cli import cli
from tests.conftest import lesson

pytestmark = pytest.mark.slow

TOKEN = "team-" + "s3cr3t-" + "0123456789abcdef"
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Server:
    """`mtl-mcp serve --transport http` in a subprocess, reachable on 127.0.0.1."""

    def __init__(self, home: Path, *args: str, token: str | None = None) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        env = {**os.environ, "MTL_MCP_HOME": str(home), "MTL_MCP_STARTER": "0"}
        env.pop("MTL_MCP_TOKEN", None)
        if token:
            env["MTL_MCP_TOKEN"] = token
        command = [sys.executable, "-m", "mtl_mcp", "serve", "--transport", "http"]
        self.process = subprocess.Popen(
            [*command, "--port", str(self.port), *args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    def wait_ready(self) -> None:
        deadline = time.monotonic() + 60
        while True:
            assert self.process.poll() is None, self.process.stderr.read()  # type: ignore[union-attr]
            try:
                httpx.get(self.url, timeout=1)
                return
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the HTTP server never answered"
                time.sleep(0.1)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(15)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Server]]:
    """One loopback server without a token, one on every interface with a token."""
    home = tmp_path_factory.mktemp("http")
    started = {
        "loopback": Server(home / "a"),
        "team": Server(
            home / "b", "--host", "0.0.0.0", "--allowed-host", "memory.test", token=TOKEN
        ),
    }
    try:
        for server in started.values():
            server.wait_ready()
        yield started
    finally:
        for server in started.values():
            server.stop()


def post(url: str, **headers: str) -> httpx.Response:
    return httpx.post(url, json=INIT, headers={**MCP_HEADERS, **headers}, timeout=30)


def test_binding_beyond_loopback_without_a_good_token_is_refused() -> None:
    """0.0.0.0 without a token, or with a short one, exits 1 with the fix; nothing listens."""
    result = CliRunner().invoke(cli, ["serve", "--transport", "http", "--host", "0.0.0.0"])
    assert result.exit_code == 1 and "MTL_MCP_TOKEN" in result.stderr
    result = CliRunner().invoke(
        cli, ["serve", "--transport", "http", "--host", "192.0.2.1", "--token", "short"]
    )
    assert result.exit_code == 1 and "at least 16" in result.stderr


def test_every_request_without_the_right_bearer_token_gets_401(
    servers: dict[str, Server],
) -> None:
    """Missing, wrong, truncated or non-bearer credentials: 401 with WWW-Authenticate."""
    url = servers["team"].url
    for headers in (
        {},
        {"Authorization": "Bearer wrong-token-0123456789"},
        {"Authorization": f"Bearer {TOKEN[:-1]}"},
        {"Authorization": f"Bearer {TOKEN}x"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": TOKEN},
    ):
        response = post(url, **headers)
        assert response.status_code == 401, headers
        assert response.headers["www-authenticate"].startswith("Bearer")
    assert httpx.get(url, timeout=10).status_code == 401
    assert post(url, Authorization=f"bearer {TOKEN}").status_code == 200


async def _record_and_recall(client: Client) -> None:
    tools = {t.name for t in (await client.list_tools()).tools}
    assert "recall_insights" in tools
    recorded = await client.call_tool(
        "record_session",
        {
            "summary": "Fixed a flaky date test.",
            "insights": [
                lesson(
                    "Pin the clock in date-dependent tests",
                    "Tests that read the current time fail at midnight; inject a fixed clock.",
                )
            ],
        },
    )
    assert recorded.structured_content and recorded.structured_content["stored"] == 1
    recalled = await client.call_tool(
        "recall_insights", {"plan": "Make the date test deterministic by controlling time."}
    )
    assert recalled.structured_content
    first = recalled.structured_content["results"][0]
    assert first["id"] == recorded.structured_content["results"][0]["id"]


@pytest.mark.anyio
async def test_an_mcp_client_with_the_token_records_and_recalls(
    servers: dict[str, Server],
) -> None:
    """The SDK's streamable HTTP client, sending the bearer header, uses every tool."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        Client(streamable_http_client(servers["team"].url, http_client=http)) as client,
    ):
        await _record_and_recall(client)


@pytest.mark.anyio
async def test_a_loopback_server_needs_no_token(servers: dict[str, Server]) -> None:
    """Bound to 127.0.0.1 without a token, a local client connects as over stdio."""
    async with Client(servers["loopback"].url) as client:
        await _record_and_recall(client)


def test_dns_rebinding_hosts_and_foreign_origins_are_refused(servers: dict[str, Server]) -> None:
    """A Host or Origin not on the allow-list is refused, token or not; local ones pass."""
    loopback, team = servers["loopback"], servers["team"]
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    assert post(loopback.url, Host=f"evil.example:{loopback.port}").status_code == 421
    assert post(loopback.url, Origin="http://evil.example").status_code == 403
    assert post(loopback.url, Origin=f"http://localhost:{loopback.port}").status_code == 200
    assert post(team.url, Host=f"evil.example:{team.port}", **bearer).status_code == 421
    assert post(team.url, Host=f"memory.test:{team.port}", **bearer).status_code == 200
    assert post(team.url, Origin="https://memory.test", **bearer).status_code == 200
    assert post(team.url, Origin="http://evil.example", **bearer).status_code == 403
