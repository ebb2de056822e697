"""CLI commands over the insights themselves: recall, add, import, export, list, show, rate,
forget, stats, seed, reindex."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from mtl_mcp.cli.app import (
    cli_project,
    common,
    confirm_destructive,
    echo_json,
    json_option,
    open_memory,
    progress,
    quick_memory,
    settings,
    stop_the_service,
)
from mtl_mcp.config import fewer_malloc_arenas
from mtl_mcp.schemas import CATEGORIES, Provenance, RecordResult
from mtl_mcp.text.frames import neutral
from mtl_mcp.text.render import history_text, insight_markdown, recall_text

PROBLEMS_SHOWN = 20  # of an import's bad lines on stderr; --json has every one


@click.command()
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
    memory = quick_memory(start=True)
    project_id = ref.id if ref else None
    hits = memory.recall(plan, k=k, scope=scope, project=project_id, domains=list(domains))
    notice = memory.team_notice()
    if as_json:
        echo_json(
            {
                "plan": plan,
                "project": project_id,
                "results": [h.model_dump(mode="json") for h in hits],
                "notice": notice,
            }
        )
    else:
        click.echo(recall_text(hits))
        if notice:
            click.echo(notice, err=True)


@click.command()
@common
@click.option("--title", required=True, help="Short imperative title of the lesson.")
@click.option("--description", required=True, help="One sentence: when it applies.")
@click.option("--content", required=True, help="The lesson in 1-3 sentences.")
@click.option("--polarity", type=click.Choice(["success", "failure"]), help="Default: inferred.")
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
    [result] = quick_memory(start=True).record(
        [fields],
        Provenance(project=ref.id if ref else None, client="cli"),
        project_name=ref.name if ref else None,
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


@click.command(name="import")
@common
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@json_option
def import_(file: Path, as_json: bool) -> None:
    """Import insights from a JSONL file (one per line; `export` writes this format).

    Bad lines are skipped and reported by line number; good lines still land.
    """
    from mtl_mcp.memory.jsonl import count_lines

    fewer_malloc_arenas()
    memory = open_memory()
    with progress("importing", count_lines(file)) as advance:
        report = memory.import_file(file, advance)
    if as_json:
        echo_json(report)
    else:
        for problem in report.problems[:PROBLEMS_SHOWN]:
            click.echo(f"{file}:{problem.line}: {problem.problem}", err=True)
        if len(report.problems) > PROBLEMS_SHOWN:
            more = len(report.problems) - PROBLEMS_SHOWN
            click.echo(f"{file}: {more} more problems (--json lists them all)", err=True)
        totals = report.model_dump(exclude={"problems"})
        click.echo(", ".join(f"{n} {status}" for status, n in totals.items()))
    if not report.stored + report.merged:  # a script must see that nothing landed
        why = "every item in it was skipped or rejected" if report.problems else "it is empty"
        raise click.ClickException(f"nothing was imported from {file}: {why}")


@click.command()
@common
@click.argument("file", required=False, type=click.Path(dir_okay=False, path_type=Path))
def export(file: Path | None) -> None:
    """Export every insight as JSONL to FILE (default: stdout)."""
    from mtl_mcp.memory.jsonl import dump_jsonl

    lines = dump_jsonl(open_memory().export())
    if file is None:
        for line in lines:
            click.echo(line)
        return
    with file.open("w", encoding="utf-8") as handle:
        count = sum(handle.write(line + "\n") > 0 for line in lines)
    click.echo(f"exported {count} insights to {file}", err=True)


@click.command(name="list")
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
    items, total = quick_memory().list(include_retired=retired, **filters)
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
        click.echo(neutral(f"{item.id}  [{item.polarity}/{item.category}] {item.title}{flag}"))
    click.echo(f"{len(items)} of {total}", err=True)


@click.command()
@common
@click.argument("insight_id")
@json_option
def show(insight_id: str, as_json: bool) -> None:
    """Show one insight, with its feedback: the judge's verdicts and the plans it was
    recalled for."""
    memory = quick_memory()
    insight = memory.get(insight_id)
    history = memory.history(insight_id)
    if as_json:
        echo_json({**insight.model_dump(mode="json"), "history": history.model_dump(mode="json")})
    else:
        click.echo(insight_markdown(insight) + "\n" + history_text(history))


@click.command()
@common
@click.argument("insight_id")
@click.option("--helpful/--harmful", required=True, help="Did it help or mislead?")
@click.option("--note", help="Why, briefly.")
@json_option
def rate(insight_id: str, helpful: bool, note: str | None, as_json: bool) -> None:
    """Rate a recalled insight; repeatedly harmful insights are retired."""
    insight = quick_memory().rate(insight_id, helpful, note)
    if as_json:
        echo_json(insight)
    else:
        click.echo(
            f"{insight.id}: {insight.helpful} helpful / {insight.harmful} harmful, {insight.status}"
        )


@click.command()
@common
@click.argument("insight_id")
@json_option
def reinstate(insight_id: str, as_json: bool) -> None:
    """Bring back an insight retired by ratings or by session verdicts: it is recalled
    again, and the verdicts given before now no longer count against it."""
    insight = quick_memory().reinstate(insight_id)
    if as_json:
        echo_json(insight)
    else:
        click.echo(neutral(f"{insight.id}: {insight.status}: {insight.title}"))


@click.command()
@common
@click.argument("insight_id")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation (needed off a terminal).")
@click.option(
    "--purge",
    is_flag=True,
    help="Also erase its text from older versions, backups, logs and caches (for secrets).",
)
@json_option
def forget(insight_id: str, yes: bool, purge: bool, as_json: bool) -> None:
    """Delete one insight (--purge: leave no trace of it on disk)."""
    if purge:
        _forget_for_good(insight_id, yes, as_json)
        return
    memory = quick_memory()
    target = memory.get(insight_id)
    confirm_destructive(yes, f"forget deletes {target.id} '{target.title}'")
    gone = memory.forget(insight_id)
    if as_json:
        echo_json({"id": gone.id, "title": gone.title, "forgotten": True})
    else:
        click.echo(neutral(f"forgot {gone.id}: {gone.title}"))


def _forget_for_good(insight_id: str, yes: bool, as_json: bool) -> None:
    from mtl_mcp.cli.safety import echo_purge
    from mtl_mcp.operations.purge import insight_to_purge, purge_insight

    memory = open_memory()
    target = insight_to_purge(memory, insight_id)
    confirm_destructive(
        yes, f"forget --purge deletes {target.id} '{target.title}' and every trace of it"
    )
    stop_the_service()  # the purge rewrites every file of the table
    echo_purge(purge_insight(memory, target), as_json)


@click.command()
@common
@click.option(
    "--abstraction",
    is_flag=True,
    help="Also how abstract the memory is: Davies-Bouldin index, LISI, specificity.",
)
@json_option
def stats(abstraction: bool, as_json: bool) -> None:
    """Counts by domain, category, polarity and project."""
    from mtl_mcp.learning.answers import answer_summary

    numbers = quick_memory().stats()
    if answers := answer_summary(settings().home):  # the learning layer's, beside the memory's
        numbers["answers"] = answers
    if abstraction:
        from mtl_mcp.quality.abstraction import memory_abstraction

        numbers["abstraction"] = memory_abstraction(open_memory()).model_dump(mode="json")
    if as_json:
        echo_json(numbers)
        return
    click.echo(f"{numbers['total']} active insights ({numbers['retired']} retired)")
    for key in ("by_category", "by_polarity", "by_domain", "by_project"):
        counts = sorted(numbers[key].items(), key=lambda kv: -kv[1])
        click.echo(f"{key.removeprefix('by_')}: " + ", ".join(f"{k} {v}" for k, v in counts))
    click.echo(f"model: {numbers['embed_model']}  store: {numbers['store_uri']}")
    loop = numbers["loop"]
    share = loop["plan_recall_share"]
    click.echo(
        "recalls: "
        + (", ".join(f"{t} {n}" for t, n in sorted(loop["recalls_by_trigger"].items())) or "none")
        + f"; {loop['sessions_with_plan_recall']} of {loop['sessions']} sessions got a recall "
        "for their plan" + (f" ({share:.0%})" if share is not None else "")
    )
    verdicts = ", ".join(f"{k} {v}" for k, v in sorted(loop["verdicts"].items()))
    click.echo(f"verdicts: {verdicts or 'none yet'}")
    if team := numbers.get("team"):
        state = {True: "reachable", False: "unreachable", None: "not reached yet"}
        click.echo(
            f"team pool {team['uri']}: {team['total']} active insights, "
            f"{state[team['reachable']]}, {team['outbox']} waiting in the outbox"
        )
        if team["error"]:
            click.echo(f"  {team['error']}", err=True)
    for backend, row in numbers.get("answers", {}).items():
        click.echo(
            f"{backend} answers: {row['answers']:g} ({row['valid']:g} valid, {row['recovered']:g} "
            f"mended, {row['repaired']:g} after a repair round, {row['rejected']:g} rejected: "
            f"{row['reject_rate']:.0%})"
        )
    if abstraction:
        from mtl_mcp.cli.quality import echo_abstraction

        echo_abstraction(numbers["abstraction"])


@click.command()
@common
def seed() -> None:
    """Add the starter pack of insights (again); existing ones are left as they are."""
    results = open_memory().seed()
    stored = sum(r.status == "stored" for r in results)
    click.echo(f"{stored} starter insights added, {len(results) - stored} already present")


@click.command()
@common
def reindex() -> None:
    """Re-embed every insight with the configured embedding model, and the plans of the
    session verdicts (what feedback compares a plan with)."""
    stop_the_service()  # it rewrites every row, and the service may hold another model
    memory = open_memory()
    with progress("re-embedding", None) as advance:
        count = memory.reindex(advance)
    click.echo(f"re-embedded {count} insights with {memory.embedder.name}")


COMMANDS = [
    recall,
    add,
    import_,
    export,
    list_,
    show,
    rate,
    reinstate,
    forget,
    stats,
    seed,
    reindex,
]
