"""checklinks: find links to missing files in Markdown docs.

    python checklinks.py FILE...

Prints each broken link as FILE:LINE: TARGET on stdout. Exit status: 0 when every link
resolves, 1 when any link is broken, 2 when a FILE cannot be read (with a message on
stderr).
"""

import re
import sys
from pathlib import Path

LINK = re.compile(r"\[[^\]]*\]\(([^)#\s]+)")


def broken_links(path: Path) -> list[tuple[int, str]]:
    """(line number, target) for each relative link in `path` to a file that is missing."""
    found = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        for target in LINK.findall(line):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (path.parent / target).exists():
                found.append((number, target))
    return found


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    broken = 0
    for name in argv:
        for number, target in broken_links(Path(name)):
            print(f"{name}:{number}: {target}")
            broken += 1
    return broken


if __name__ == "__main__":
    sys.exit(main())
