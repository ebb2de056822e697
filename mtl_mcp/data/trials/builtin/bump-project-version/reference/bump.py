"""bump: raise the version in pyproject.toml.

    python bump.py major|minor|patch [--file pyproject.toml]

Only [project].version changes; every other byte of the file (comments, layout, line
endings, other tables' `version` keys) stays as it was.
"""

import argparse
import re
import sys
from pathlib import Path

VERSION = re.compile(r'^(version\s*=\s*)"(\d+)\.(\d+)\.(\d+)"')
TABLE = re.compile(r"^\s*\[\s*([^\]]+?)\s*\]")


def bumped(version: tuple[int, int, int], part: str) -> tuple[int, int, int]:
    major, minor, patch = version
    if part == "major":
        return (major + 1, 0, 0)
    if part == "minor":
        return (major, minor + 1, 0)
    return (major, minor, patch + 1)


def bump_text(text: str, part: str) -> str:
    """`text` with the version of its [project] table bumped, every other byte kept."""
    lines = text.splitlines(keepends=True)
    table = None
    for i, line in enumerate(lines):
        header = TABLE.match(line)
        if header:
            table = header.group(1)
            continue
        match = VERSION.match(line)
        if table == "project" and match:
            new = bumped(tuple(int(g) for g in match.groups()[1:]), part)
            lines[i] = match.group(1) + '"%d.%d.%d"' % new + line[match.end() :]
            return "".join(lines)
    raise ValueError("no version in the [project] table")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="bump")
    parser.add_argument("part", choices=["major", "minor", "patch"])
    parser.add_argument("--file", default="pyproject.toml")
    args = parser.parse_args(argv)
    path = Path(args.file)
    # newline="": keep the file's own line endings (CRLF stays CRLF)
    with open(path, encoding="utf-8", newline="") as f:
        text = f.read()
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(bump_text(text, args.part))
    return 0


if __name__ == "__main__":
    sys.exit(main())
