"""The `mtl-mcp` command. `mtl-mcp serve` over stdio (what every client window runs) goes
straight to the relay, which needs only the standard library; everything else is the click
CLI."""

from __future__ import annotations

import sys


def _stdio_serve(args: list[str]) -> tuple[bool, str | None, int]:
    """Whether `args` ask for stdio serving, and the --home and -v given with it."""
    if not args or args[0] != "serve":
        return False, None, 0
    home: str | None = None
    verbose = 0
    rest = args[1:]
    while rest:
        word = rest.pop(0)
        if word == "--home" and rest:
            home = rest.pop(0)
        elif word.startswith("--home="):
            home = word.split("=", 1)[1]
        elif word in ("-v", "-vv", "--verbose"):
            verbose += 2 if word == "-vv" else 1
        elif word == "--transport" and rest and rest[0] == "stdio":
            rest.pop(0)
        elif word != "--transport=stdio":
            return False, None, 0  # HTTP, --help, or anything the CLI must parse
    return True, home, verbose


def main() -> None:
    stdio, home, verbose = _stdio_serve(sys.argv[1:])
    if stdio:
        from mtl_mcp.server.window import main as serve_window

        sys.exit(serve_window(home, verbose))
    from mtl_mcp.cli import main as cli

    cli()


if __name__ == "__main__":
    main()
