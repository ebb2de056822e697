"""One real stdio session with `mtl-mcp serve` as a subprocess."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from mcp import StdioServerParameters
from mcp.client import Client

from tests.conftest import lesson

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def test_stdio_session_speaks_only_protocol_on_stdout(tmp_path: Path) -> None:
    """Over stdio the server lists, records and recalls; every stdout line is JSON-RPC."""
    wire = tmp_path / "stdout.log"
    # A shell tee keeps a copy of everything the server writes to stdout.
    command = f"{sys.executable} -m mtl_mcp serve -v | tee {wire}"
    params = StdioServerParameters(
        command="/bin/sh",
        args=["-c", command],
        env={
            "MTL_MCP_HOME": str(tmp_path / "home"),
            "MTL_MCP_STARTER": "1",
            "PATH": os.environ["PATH"],
        },
    )
    async with Client(params) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert "recall_insights" in tools
        resources = {str(r.uri) for r in (await client.list_resources()).resources}
        assert {"insights://stats", "insights://recent"} <= resources
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
        assert recorded.structured_content["stored"] == 1
        recalled = await client.call_tool(
            "recall_insights",
            {"plan": "Make the date-dependent test deterministic by controlling time.", "k": 3},
        )
        first = recalled.structured_content["results"][0]
        assert first["id"] == recorded.structured_content["results"][0]["id"]
        assert "1. Pin the clock in date-dependent tests [" in recalled.content[0].text
        stats = json.loads((await client.read_resource("insights://stats")).contents[0].text)
        assert stats["by_project"]["starter"] >= 40  # the starter pack loaded on first run
    lines = [line for line in wire.read_text().splitlines() if line.strip()]
    assert lines, "the server wrote nothing to stdout"
    for line in lines:
        assert json.loads(line)["jsonrpc"] == "2.0"
