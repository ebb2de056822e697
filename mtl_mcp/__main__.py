"""The `mtl-mcp` command. `mtl-mcp serve` over stdio (what every client window runs) goes
straight to the relay, which needs only the standard library, and `mtl-mcp hook tool-use`
(run after every tool call) straight to its lean hook; everything else is the click CLI."""

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


def _tool_use_hook(args: list[str]) -> tuple[bool, str | None]:
    """Whether `args` run the tool-use hook, and the --home given with it."""
    if args[:2] != ["hook", "tool-use"]:
        return False, None
    rest = args[2:]
    if rest[:1] == ["--home"] and len(rest) == 2:
        return True, rest[1]
    if len(rest) == 1 and rest[0].startswith("--home="):
        return True, rest[0].split("=", 1)[1]
    return not rest, None  # anything else (--help) goes to the CLI


def _run_tool_use_hook(home: str | None) -> int:
    """The tool-use hook: 0 whatever happens, and nothing on stdout but its answer."""
    try:
        from mtl_mcp.hooks.fast import named_home, read_stdin, served_already

        raw = read_stdin()
        folder = named_home(home)
        if folder is not None and served_already(folder, raw):
            return 0
        from mtl_mcp.hooks.tool_use import run

        return run(home, raw)
    except Exception as exc:  # a front door: nothing may escape into the user's session
        sys.stderr.write(f"mtl-mcp hook: {type(exc).__name__} (a bug: please report it)\n")
        return 0


def main() -> None:
    stdio, home, verbose = _stdio_serve(sys.argv[1:])
    if stdio:
        from mtl_mcp.server.window import main as serve_window

        sys.exit(serve_window(home, verbose))
    hook, home = _tool_use_hook(sys.argv[1:])
    if hook:  # after every tool call: no click, no CLI imports, and mostly nothing to do
        sys.exit(_run_tool_use_hook(home))
    from mtl_mcp.cli import main as cli

    cli()


if __name__ == "__main__":
    main()
