"""The command-line front door. Data goes to stdout (click.echo), progress and errors to stderr."""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import click
from pydantic import BaseModel, ValidationError

from mtl_mcp import __version__
from mtl_mcp.config import Settings, load_settings
from mtl_mcp.errors import MtlError
from mtl_mcp.models import CATEGORIES, Insight, InsightDraft, Provenance, RecordResult
from mtl_mcp.project import ProjectRef, current_project, resolve_project
from mtl_mcp.render import insight_markdown, recall_text

# Before numpy loads: a multi-threaded BLAS matrix-vector product contends with the
# embedding model's spinning threads on two cores and doubled recall latency (16 -> 9 ms).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

F = TypeVar("F", bound=Callable[..., Any])
IMPORT_BATCH = 256
IMPORT_LINE_MAX = 1 << 20  # an exported insight is a few KB; longer lines are skipped unread


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


def open_store() -> Any:
    from mtl_mcp.store import InsightStore

    store = InsightStore(settings())
    click.get_current_context().call_on_close(store.close)
    return store


def echo_json(value: Any) -> None:
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    click.echo(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def cli_project(explicit: str | None) -> ProjectRef:
    """The named project, else Claude Code's project dir, else the working directory's."""
    return current_project(explicit) or resolve_project(Path.cwd())


@click.group(cls=TranslatingGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mtl-mcp")
def cli() -> None:
    """mtl-mcp: a memory of abstract lessons from past coding sessions, for MCP clients."""


@cli.command()
@common
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio for local clients; http for a shared server.",
)
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address for --transport http."
)
@click.option("--port", default=8765, show_default=True, help="Port for --transport http.")
@click.option(
    "--token",
    envvar="MTL_MCP_TOKEN",
    show_envvar=True,
    help="Bearer token every HTTP request must send; required off loopback. Prefer the "
    "variable: other users can see command lines.",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    help="A name clients reach the HTTP server by (repeatable), e.g. memory.example.lan:8765.",
)
def serve(
    transport: str, host: str, port: int, token: str | None, allowed_hosts: tuple[str, ...]
) -> None:
    """Run the MCP server (stdio by default). Logs go to stderr."""
    from mtl_mcp.server import serve as run

    if transport == "http":
        from mtl_mcp.http_transport import check_exposure

        check_exposure(host, token)
        guard = "bearer token required" if token else "loopback only, no token"
        click.echo(f"serving MCP at http://{host}:{port}/mcp ({guard})", err=True)
    run(
        settings(),
        "http" if transport == "http" else "stdio",
        host=host,
        port=port,
        token=token,
        allowed_hosts=allowed_hosts,
    )


@cli.command()
@common
@click.argument("plan")
@click.option(
    "-k", default=3, show_default=True, type=click.IntRange(1, 20), help="How many insights."
)
@click.option(
    "--scope",
    type=click.Choice(["all", "other-projects", "this-project"]),
    default="all",
    show_default=True,
)
@click.option("--project", help="Project path or id (default: the current directory's).")
@click.option("--domain", "domains", multiple=True, help="Only these domains (repeatable).")
@json_option
def recall(
    plan: str, k: int, scope: Any, project: str | None, domains: tuple[str, ...], as_json: bool
) -> None:
    """Recall the insights most relevant to PLAN (a 3-4 sentence plan of the task)."""
    ref = cli_project(project)
    hits = open_store().recall(plan, k=k, scope=scope, project=ref.id, domains=list(domains))
    if as_json:
        echo_json(
            {"plan": plan, "project": ref.id, "results": [h.model_dump(mode="json") for h in hits]}
        )
    else:
        click.echo(recall_text(hits))


@cli.command()
@common
@click.option("--title", required=True, help="Short imperative title of the lesson.")
@click.option("--description", required=True, help="One sentence: when it applies.")
@click.option("--content", required=True, help="The lesson in 1-3 sentences.")
@click.option(
    "--polarity", type=click.Choice(["success", "failure"]), help="Default: inferred."
)
@click.option("--category", type=click.Choice(CATEGORIES), help="Default: inferred.")
@click.option("--domain", help="Domain slug, e.g. web-backend.")
@click.option("--tag", "tags", multiple=True, help="A keyword (repeatable).")
@click.option("--language", "languages", multiple=True, help="A language (repeatable).")
@click.option("--project", help="Project path or id (default: the current directory's).")
@json_option
def add(project: str | None, as_json: bool, **fields: Any) -> None:
    """Add one insight (linted and deduplicated like record_session)."""
    ref = cli_project(project)
    fields = {k: list(v) if isinstance(v, tuple) else v for k, v in fields.items()}
    [result] = open_store().record(
        [fields], Provenance(project=ref.id, client="cli"), project_name=ref.name
    )
    if as_json:
        echo_json(result)
        return
    _echo_result(result)
    if result.status == "rejected":
        raise SystemExit(1)


def _echo_result(result: RecordResult) -> None:
    where = f" {result.id}" if result.id else ""
    click.echo(f"{result.status}{where}: {result.title or ''}".rstrip(": "))
    for reason in result.reasons:
        click.echo(f"  rejected: {reason}", err=True)
    for warning in result.warnings:
        click.echo(f"  warning: {warning}", err=True)


def _read_import(path: Path) -> Iterator[tuple[int, Insight | InsightDraft | str]]:
    """(line number, parsed item or the reason it is unusable) for each non-blank line."""
    with path.open("rb") as handle:
        number = 0
        while raw := handle.readline(IMPORT_LINE_MAX + 1):
            number += 1
            if len(raw) > IMPORT_LINE_MAX and not raw.endswith(b"\n"):
                while (rest := handle.readline(IMPORT_LINE_MAX)) and not rest.endswith(b"\n"):
                    pass  # drain the rest of the line a chunk at a time
                yield number, f"longer than {IMPORT_LINE_MAX >> 20} MB: not an insight"
                continue
            line = raw.decode("utf-8", errors="replace").strip()
            if not line:
                continue
            try:
                data = json.loads(line)
                if not isinstance(data, dict):
                    raise ValueError("not a JSON object")
                model = Insight if "id" in data else InsightDraft
                yield number, model.model_validate(data)
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3]
                )
                yield number, problems
            except ValueError as exc:
                yield number, f"not a JSON object ({exc})"
            except RecursionError:
                yield number, "JSON nested too deeply to be an insight"


@cli.command(name="import")
@common
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@json_option
def import_(file: Path, as_json: bool) -> None:
    """Import insights from a JSONL file (one per line; `export` writes this format).

    Bad lines are skipped and reported by line number; good lines still land.
    """
    from rich.progress import Progress

    store = open_store()
    totals = {"stored": 0, "merged": 0, "rejected": 0, "skipped": 0}
    problems: list[dict[str, Any]] = []
    batch: list[tuple[int, Insight | InsightDraft]] = []

    def flush() -> None:
        results = store.import_insights([item for _, item in batch])
        for (number, _), result in zip(batch, results, strict=True):
            totals[result.status] += 1
            if result.reasons:
                problems.append({"line": number, "problem": "; ".join(result.reasons)})
        progress.advance(task, len(batch))
        batch.clear()

    with file.open("rb") as counted:  # in chunks: one huge line must not be held whole
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: counted.read(1 << 20), b""))
    with Progress(
        console=stderr_console(), transient=True, disable=not sys.stderr.isatty()
    ) as progress:
        task = progress.add_task("importing", total=lines)
        for number, item in _read_import(file):
            if isinstance(item, str):
                totals["skipped"] += 1
                problems.append({"line": number, "problem": item})
                progress.advance(task)
                continue
            batch.append((number, item))
            if len(batch) >= IMPORT_BATCH:
                flush()
        if batch:
            flush()
    if as_json:
        echo_json({**totals, "problems": problems})
        return
    for problem in problems:
        click.echo(f"{file}:{problem['line']}: {problem['problem']}", err=True)
    click.echo(", ".join(f"{n} {status}" for status, n in totals.items()))


def stderr_console() -> Any:
    from rich.console import Console

    return Console(stderr=True)


@cli.command()
@common
@click.argument("file", required=False, type=click.Path(dir_okay=False, path_type=Path))
def export(file: Path | None) -> None:
    """Export every insight as JSONL to FILE (default: stdout)."""
    from mtl_mcp.store import dump_jsonl

    lines = dump_jsonl(open_store().export())
    if file is None:
        for line in lines:
            click.echo(line)
        return
    with file.open("w", encoding="utf-8") as handle:
        count = sum(handle.write(line + "\n") > 0 for line in lines)
    click.echo(f"exported {count} insights to {file}", err=True)


@cli.command(name="list")
@common
@click.option("--query", help="Rank by similarity to this text.")
@click.option("--domain")
@click.option("--project", help="Only insights from this project id.")
@click.option("--polarity", type=click.Choice(["success", "failure"]))
@click.option("--category", type=click.Choice(CATEGORIES))
@click.option(
    "--sort",
    type=click.Choice(["recent", "support", "helpful"]),
    default="recent",
    show_default=True,
)
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 1000))
@click.option("--offset", default=0, show_default=True, type=click.IntRange(0))
@click.option("--retired", is_flag=True, help="Include retired insights.")
@json_option
def list_(as_json: bool, retired: bool, **filters: Any) -> None:
    """List stored insights, newest first."""
    items, total = open_store().list(include_retired=retired, **filters)
    if as_json:
        echo_json(
            {
                "total": total,
                "offset": filters["offset"],
                "limit": filters["limit"],
                "items": [i.model_dump(mode="json") for i in items],
            }
        )
        return
    for item in items:
        flag = "" if item.status == "active" else f" ({item.status})"
        click.echo(f"{item.id}  [{item.polarity}/{item.category}] {item.title}{flag}")
    click.echo(f"{len(items)} of {total}", err=True)


@cli.command()
@common
@click.argument("insight_id")
@json_option
def show(insight_id: str, as_json: bool) -> None:
    """Show one insight."""
    insight = open_store().get(insight_id)
    if as_json:
        echo_json(insight)
    else:
        click.echo(insight_markdown(insight))


@cli.command()
@common
@click.argument("insight_id")
@click.option("--helpful/--harmful", required=True, help="Did it help or mislead?")
@click.option("--note", help="Why, briefly.")
@json_option
def rate(insight_id: str, helpful: bool, note: str | None, as_json: bool) -> None:
    """Rate a recalled insight; repeatedly harmful insights are retired."""
    insight = open_store().rate(insight_id, helpful, note)
    if as_json:
        echo_json(insight)
    else:
        click.echo(
            f"{insight.id}: {insight.helpful} helpful / {insight.harmful} harmful, {insight.status}"
        )


@cli.command()
@common
@click.argument("insight_id")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option(
    "--purge",
    is_flag=True,
    help="Also erase its text from older versions, backups, logs and caches (for secrets).",
)
@json_option
def forget(insight_id: str, yes: bool, purge: bool, as_json: bool) -> None:
    """Delete one insight (--purge: leave no trace of it on disk)."""
    from mtl_mcp.purge import insight_to_purge, purge_insight

    store = open_store()
    target = insight_to_purge(store, insight_id) if purge else store.get(insight_id)
    if not yes and sys.stdin.isatty():
        click.confirm(f"Forget {target.id} '{target.title}'?", abort=True)
    if purge:
        from mtl_mcp.cli_safety import echo_purge

        echo_purge(purge_insight(store, target), as_json)
        return
    gone = store.forget(insight_id)
    if as_json:
        echo_json({"id": gone.id, "title": gone.title, "forgotten": True})
    else:
        click.echo(f"forgot {gone.id}: {gone.title}")


@cli.command()
@common
@click.option(
    "--abstraction",
    is_flag=True,
    help="Also how abstract the memory is: Davies-Bouldin index, LISI, specificity.",
)
@json_option
def stats(abstraction: bool, as_json: bool) -> None:
    """Counts by domain, category, polarity and project."""
    store = open_store()
    numbers = store.stats()
    if abstraction:
        from mtl_mcp.abstraction import store_abstraction

        numbers["abstraction"] = store_abstraction(store).model_dump(mode="json")
    if as_json:
        echo_json(numbers)
        return
    click.echo(f"{numbers['total']} active insights ({numbers['retired']} retired)")
    for key in ("by_category", "by_polarity", "by_domain", "by_project"):
        counts = sorted(numbers[key].items(), key=lambda kv: -kv[1])
        click.echo(f"{key.removeprefix('by_')}: " + ", ".join(f"{k} {v}" for k, v in counts))
    click.echo(f"model: {numbers['embed_model']}  store: {numbers['store_uri']}")
    if abstraction:
        from mtl_mcp.cli_quality import echo_abstraction

        echo_abstraction(numbers["abstraction"])


@cli.command()
@common
def seed() -> None:
    """Add the starter pack of insights (again); existing ones are left as they are."""
    results = open_store().seed()
    stored = sum(r.status == "stored" for r in results)
    click.echo(f"{stored} starter insights added, {len(results) - stored} already present")


@cli.command()
@common
def reindex() -> None:
    """Re-embed every insight with the configured embedding model."""
    from rich.progress import Progress

    store = open_store()
    with Progress(
        console=stderr_console(), transient=True, disable=not sys.stderr.isatty()
    ) as progress:
        task = progress.add_task("re-embedding", total=None)
        count = store.reindex(lambda n: progress.advance(task, n))
    click.echo(f"re-embedded {count} insights with {store.embedder.name}")


@cli.command()
@common
@json_option
def doctor(as_json: bool) -> None:
    """Check the data dir, model, store and API key; say how to fix each problem."""
    from mtl_mcp.doctor import run_checks

    checks = run_checks(settings())
    if as_json:
        echo_json([c.model_dump() for c in checks])
    else:
        for check in checks:
            click.echo(f"[{'ok' if check.ok else '!!'}] {check.name}: {check.detail}")
            if check.fix:
                click.echo(f"     fix: {check.fix}")
    if any(not c.ok and c.required for c in checks):
        raise SystemExit(1)


def _register_session_commands() -> None:
    # Imported late: cli_sessions builds on the helpers defined above.
    from mtl_mcp.cli_quality import COMMANDS as QUALITY
    from mtl_mcp.cli_safety import COMMANDS as SAFETY
    from mtl_mcp.cli_sessions import COMMANDS

    for command in [*COMMANDS, *SAFETY, *QUALITY]:
        cli.add_command(command)


_register_session_commands()
