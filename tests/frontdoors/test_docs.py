"""The README documents every command, tool and setting (sqlite-utils style)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import click
import pytest
from mcp.client import Client

from mtl_mcp.cli import cli
from mtl_mcp.config import Settings
from mtl_mcp.server.app import build_server

README = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")


def visible_commands(group: click.Group, prefix: str = "") -> list[str]:
    names = []
    for name, command in group.commands.items():
        if command.hidden:
            continue
        names.append(f"{prefix}{name}")
        if isinstance(command, click.Group):
            names += visible_commands(command, f"{prefix}{name} ")
    return names


@pytest.mark.parametrize("command", visible_commands(cli))
def test_every_command_is_in_the_readme(command: str) -> None:
    """Each visible CLI command appears in the README as `mtl-mcp <command>`."""
    first = command.split()[0]
    assert re.search(rf"mtl-mcp {re.escape(first)}\b", README), command


@pytest.mark.anyio
async def test_every_tool_is_documented(settings: Settings) -> None:
    """Each MCP tool has a description and a row in the README's tool table."""
    async with Client(build_server(settings)) as client:
        tools = (await client.list_tools()).tools
    for tool in tools:
        assert tool.description, tool.name
        assert f"`{tool.name}`" in README


def test_every_setting_is_documented() -> None:
    """Each setting's environment variable appears in the configuration table."""
    for spec in dataclasses.fields(Settings):
        if "env" in spec.metadata:
            assert f"`{spec.metadata['env']}`" in README, spec.name
