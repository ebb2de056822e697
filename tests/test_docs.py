"""The docs (README.md and docs/*.md) cover every command, tool and setting, every relative
link in them resolves, and their figures are those in bench-results/ (sqlite-utils style)."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
from mcp.client import Client

from mtl_mcp.cli import cli
from mtl_mcp.config import HOME_ENV, Settings
from mtl_mcp.server.app import build_server
from tests.npm_clients import CLIENTS

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
REFERENCE = ROOT / "docs" / "reference.md"
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def text(page: Path) -> str:
    return page.read_text(encoding="utf-8")


def all_docs() -> str:
    return "\n".join(text(page) for page in PAGES)


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
def test_every_command_is_in_the_docs(command: str) -> None:
    """Each visible CLI command, subcommands included, appears as `mtl-mcp <command>`."""
    documented = re.search(rf"mtl-mcp {re.escape(command)}(?![\w-])", all_docs()) is not None
    assert documented, (
        f"`mtl-mcp {command}` is in no page: add a row for it to the CLI table in docs/reference.md"
    )


@pytest.mark.anyio
async def test_every_tool_is_documented(settings: Settings) -> None:
    """Each MCP tool has a description and a row in the reference's tool table."""
    async with Client(build_server(settings)) as client:
        tools = (await client.list_tools()).tools
    rows = [line for line in text(REFERENCE).splitlines() if line.startswith("| `")]
    for tool in tools:
        assert tool.description, f"the tool {tool.name} has no description"
        assert any(row.startswith(f"| `{tool.name}` |") for row in rows), (
            f"the tool {tool.name} is not documented: add a row to the MCP tools table in "
            "docs/reference.md"
        )


def setting_spellings(spec: dataclasses.Field[object]) -> list[str]:
    """How a user writes a setting: its environment variable and its config.toml key."""
    if spec.name == "home":
        return [f"`{HOME_ENV}`"]  # config.toml lives in it, so it has no key there
    if spec.name == "storage":
        return ["`[storage]`"]  # a table of the config file, passed to LanceDB
    return [f"`{spec.metadata['env']}`", f"`{spec.name}`"]


@pytest.mark.parametrize("spec", dataclasses.fields(Settings), ids=lambda spec: spec.name)
def test_every_setting_is_documented(spec: dataclasses.Field[object]) -> None:
    """Each setting has a row of the configuration table naming how it is spelt."""
    spellings = setting_spellings(spec)
    rows = [line for line in text(REFERENCE).splitlines() if line.startswith("| ")]
    assert any(all(spelling in row for spelling in spellings) for row in rows), (
        f"the setting {spec.name} has no row naming {' and '.join(spellings)}: add one to the "
        "configuration table in docs/reference.md"
    )


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    words = re.sub(r"[^\w\- ]", "", re.sub(r"[`*]", "", heading).strip().lower())
    return words.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of a page's headings; a repeated heading's get -1, -2, ... as on GitHub."""
    found: set[str] = set()
    counts: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6} (.+)$", FENCE.sub("", text(page)), re.M):
        base = slug(heading)
        repeat = counts.get(base, 0)
        counts[base] = repeat + 1
        found.add(base if repeat == 0 else f"{base}-{repeat}")
    return found


def relative_links(page: Path) -> list[str]:
    prose = CODE.sub("", FENCE.sub("", text(page)))
    return [t for t in LINK.findall(prose) if not re.match(r"[a-z]+:", t)]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    """Each relative link names a file of the repository, and its #anchor a heading there."""
    broken = []
    for link in relative_links(page):
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            broken.append(f"{link} (no file {target.relative_to(ROOT)})")
        elif anchor and target.suffix == ".md" and anchor not in anchors(target):
            broken.append(f"{link} (no heading #{anchor} in {target.relative_to(ROOT)})")
    where = page.relative_to(ROOT)
    assert not broken, f"{where} links to what is not there: " + "; ".join(broken)


def test_the_figures_are_those_in_bench_results() -> None:
    """Every figure between markers is what bench/figures.py writes from bench-results/."""
    check = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "figures.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode == 0, check.stderr


def test_the_client_versions_named_are_the_pinned_ones() -> None:
    """A client version the docs say a test ran ("real binary 2.1.332") is one pinned in
    tests/npm_clients.py, so bumping a pin leaves no stale claim."""
    pinned = {client.version for client in CLIENTS.values()}
    claims = re.findall(r"real (?:binary|[A-Z][\w ]*?) (\d+\.\d+\.\d+)", all_docs())
    assert claims, "the docs name no client version verified by a test"
    stale = sorted(set(claims) - pinned)
    assert not stale, (
        f"the docs say tests ran client versions {', '.join(stale)}, but tests/npm_clients.py "
        f"pins {', '.join(sorted(pinned))}: update the README's client table and docs/clients.md"
    )
