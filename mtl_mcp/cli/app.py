"""The CLI's group and the helpers every command shares.

A command opens `Memory` (or the one library object it needs), calls one method, prints the
result: data to stdout (click.echo), progress and errors to stderr. Errors are translated
once, here: every MtlError becomes one `Error: ...` line and exit code 1.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
from pydantic import BaseModel

from mtl_mcp.config import Settings, load_settings
from mtl_mcp.errors import MtlError
from mtl_mcp.project import ProjectRef, window_project
from mtl_mcp.version import __version__

if TYPE_CHECKING:
    from rich.console import Console

    from mtl_mcp.memory import Memory
    from mtl_mcp.server.calls import ServiceMemory

# Before numpy loads: a multi-threaded BLAS matrix-vector product contends with the
# embedding model's spinning threads on two cores and doubled recall latency (16 -> 9 ms).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

F = TypeVar("F", bound=Callable[..., Any])


class TranslatingGroup(click.Group):
    """Turns every MtlError into one `Error: ...` line on stderr and exit code 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except MtlError as exc:
            raise click.ClickException(str(exc)) from exc


def common(fn: F) -> F:
    """`--home` and `-v` on every command."""

    @click.option(
        "--home",
        type=click.Path(file_okay=False, path_type=Path),
        help="Data directory (default: $MTL_MCP_HOME, else the platform's user data dir).",
    )
    @click.option("-v", "--verbose", count=True, help="More logging on stderr (-vv for debug).")
    @functools.wraps(fn)
    def wrapper(*args: Any, home: Path | None, verbose: int, **kwargs: Any) -> Any:
        level = (logging.WARNING, logging.INFO, logging.DEBUG)[min(verbose, 2)]
        logging.basicConfig(
            stream=sys.stderr, level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
        click.get_current_context().obj = load_settings(home)
        return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")


def settings() -> Settings:
    value: Settings = click.get_current_context().obj
    return value


def open_memory() -> Memory:
    """The memory for this command, in this process, closed (counters flushed) at its end.

    A change to the insights rewrites the general session-start context.
    """
    from mtl_mcp.memory import Memory
    from mtl_mcp.operations.context import refresh_general_context

    memory = Memory(settings(), on_change=refresh_general_context)
    click.get_current_context().call_on_close(memory.close)
    return memory


def quick_memory(start: bool = False) -> Memory | ServiceMemory:
    """For a query or a small write: the warm memory of the running service configured like
    this process, if there is one (no model load, and its dedup stays exact), else this
    process's own. A service with other settings is never used. `start`, for the commands
    that need the model (recall, add): start the service if none runs, as a window does,
    so that the next command finds it warm (unless MTL_MCP_SERVICE=off). Not for a store
    on object storage: a service sees other processes' writes there only at its next
    refresh, so `import` then `list` would not list what was just imported."""
    from mtl_mcp.server.calls import ServiceMemory

    config = settings()
    if config.service:
        start = start and config.local_store is not None
        warm = ServiceMemory.started(config) if start else ServiceMemory.running(config)
        if warm is not None:
            return warm
    return open_memory()


def stop_the_service() -> None:
    """Stop every running service of the data directory (whatever settings each serves)
    before rewriting the store under it; windows restart them."""
    from mtl_mcp.operations.service import stop_services

    if stopped := stop_services(settings().home):
        what = "service" if len(stopped) == 1 else f"{len(stopped)} services"
        click.echo(f"stopped the running mtl-mcp {what} (windows restart them)", err=True)


def confirm_destructive(yes: bool, deed: str) -> None:
    """Ask before a command deletes or replaces data (`deed` says what it would do, e.g.
    "forget deletes ins_1 'Title'"). Off a terminal (a script, a pipe, </dev/null) nobody
    can answer, and no answer is not a yes: refuse, unless --yes was given. Call it before
    anything changes, the running service included."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise click.UsageError(
            f"{deed}, and stdin is not a terminal to confirm it: nothing was changed; "
            "pass --yes to go ahead"
        )
    click.confirm(f"{deed}. Go ahead?", abort=True)


def echo_json(value: Any) -> None:
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    click.echo(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def cli_project(explicit: str | None) -> ProjectRef | None:
    """The project a command is about, as every door resolves it (`window_project`): the
    named one, else Claude Code's project dir, else the working directory's."""
    return window_project(explicit, os.environ.get("CLAUDE_PROJECT_DIR"), cwd=str(Path.cwd()))


@click.group(cls=TranslatingGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mtl-mcp")
def cli() -> None:
    """mtl-mcp: a memory of abstract lessons from past coding sessions, for MCP clients."""


def stderr_console() -> Console:
    from rich.console import Console

    return Console(stderr=True)


@contextlib.contextmanager
def progress(description: str, total: int | None) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr, shown only at a terminal; yields `advance(steps)`."""
    from rich.progress import Progress

    with Progress(console=stderr_console(), transient=True, disable=not sys.stderr.isatty()) as bar:
        task = bar.add_task(description, total=total)
        yield lambda steps: bar.advance(task, steps)
