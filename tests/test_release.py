"""A release says what it is: its version, and the changelog's newest entry for it."""

from __future__ import annotations

import re
from pathlib import Path

from mtl_mcp import __version__

ROOT = Path(__file__).resolve().parent.parent


def test_the_changelogs_newest_entry_is_this_version() -> None:
    """pip upgrades, and `mtl-mcp --version` tells releases apart, only if each release
    has a version of its own: the changelog's top entry must be the package's version."""
    headings = re.findall(r"^## (\d+\.\d+\.\d+)\b", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert headings, "CHANGELOG.md has no '## X.Y.Z' entry"
    assert headings[0] == __version__, (
        f"CHANGELOG.md's newest entry is {headings[0]} but mtl_mcp/version.py says "
        f"{__version__}: add an entry for this release, or bump the version"
    )
    numbers = [tuple(int(part) for part in h.split(".")) for h in headings]
    assert numbers == sorted(numbers, reverse=True), "entries go newest first"
