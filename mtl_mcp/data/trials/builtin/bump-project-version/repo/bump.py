"""bump: raise the version in pyproject.toml.

    python bump.py major|minor|patch [--file pyproject.toml]

Only [project].version changes; every other byte of the file (comments, layout, line
endings, other tables' `version` keys) stays as it was.
"""

import argparse
import re
import sys
from pathlib import Path

VERSION = re.compile(r'^version = "(\d+)\.(\d+)\.(\d+)"', re.MULTILINE)


def bumped(version: tuple[int, int, int], part: str) -> tuple[int, int, int]:
    major, minor, patch = version
    if part == "major":
        return (major + 1, 0, 0)
    if part == "minor":
        return (major, minor + 1, 0)
    return (major, minor, patch + 1)


def bump_text(text: str, part: str) -> str:
    def replace(match):
        new = bumped(tuple(int(g) for g in match.groups()), part)
        return 'version = "%d.%d.%d"' % new

    return VERSION.sub(replace, text)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="bump")
    parser.add_argument("part", choices=["major", "minor", "patch"])
    parser.add_argument("--file", default="pyproject.toml")
    args = parser.parse_args(argv)
    path = Path(args.file)
    path.write_text(bump_text(path.read_text(encoding="utf-8"), args.part), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
