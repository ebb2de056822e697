"""CLI commands about retrieval quality: eval (the harness), map (a picture of the memory)
and tune (fitting the relevance gate to your own verdicts).

Registered on the main group by `mtl_mcp.cli`; errors are translated by its group.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from mtl_mcp.cli.app import (
    common,
    confirm_destructive,
    echo_json,
    json_option,
    open_memory,
    settings,
)
from mtl_mcp.index.gate import SIGNALS
from mtl_mcp.index.methods import DEFAULT_METHOD, METHODS

if TYPE_CHECKING:
    from mtl_mcp.quality.evaluation import EvalResult
    from mtl_mcp.quality.feedback_eval import FeedbackResult
    from mtl_mcp.quality.gate_fit import TuneReport

FIGURES = ("precision_at_k", "hit_at_k", "mrr", "recall_at_10", "ndcg_at_10")


def _header(k: int) -> str:
    return f"{'P@' + str(k):>7} {'hit@' + str(k):>7} {'MRR':>7} {'R@10':>7} {'nDCG@10':>8}"


def _row(values: Any) -> str:
    return " ".join(
        f"{getattr(values, name):{8 if name == 'ndcg_at_10' else 7}.3f}" for name in FIGURES
    )


def _echo_results(results: list[EvalResult], per_domain: bool) -> None:
    first = results[0]
    protocol = "leave-one-domain-out" if first.leave_domain_out else "all domains"
    click.echo(
        f"{first.queries} queries ({first.split} split, query = {first.query_field}, "
        f"{protocol}, k={first.k}); pool: {first.pool.stored} stored, "
        f"{first.pool.merged} merged, {first.pool.rejected} rejected"
    )
    width = max(len("method"), *(len(r.method) for r in results))
    click.echo(f"{'method':<{width}} {_header(first.k)}")
    for result in results:
        click.echo(f"{result.method:<{width}} {_row(result)}")
    if per_domain:
        for result in results:
            click.echo(f"\nper domain, {result.method}:")
            width = max(len("domain"), *(len(d) for d in result.per_domain))
            click.echo(f"{'domain':<{width}} {'n':>3} {_header(first.k)}")
            for domain, figures in result.per_domain.items():
                click.echo(f"{domain:<{width}} {figures.queries:>3} {_row(figures)}")
    if first.skipped:
        click.echo(f"skipped (nothing relevant outside their domain): {first.skipped}", err=True)


def _echo_feedback(result: FeedbackResult) -> None:
    planted = f"{result.planted} planted bad insights" if result.planted else "no planted insights"
    noise = f", verdict noise {result.noise:.0%} over {result.seeds} draws" if result.noise else ""
    click.echo(
        f"sessions: the dev split's top {result.k}, judged from the labels; {planted}{noise}"
    )
    click.echo(f"verdicts: {', '.join(f'{n:g} {kind}' for kind, n in result.verdicts.items())}")
    head = f"{'recall':<18} {'P@' + str(result.k):>7} {'hit@' + str(result.k):>7}"
    click.echo(f"{head} {'misleading':>10} {'planted':>8} {'queries hit':>11} {'left out':>8}")
    for comparison in result.comparisons:
        for name, figures in (("off", comparison.off), ("on", comparison.on)):
            label = f"{comparison.scored}, feedback {name}"
            click.echo(
                f"{label:<18} {figures.precision_at_k:7.3f} {figures.hit_at_k:7.3f} "
                f"{figures.planted_on_targets:10g} {figures.planted_in_top_k:8g} "
                f"{figures.queries_with_planted:11.0%} {figures.left_out:8.2f}"
            )
    click.echo(
        "misleading: planted insights in the top k of a query they mislead; planted: all "
        "planted ones there (but where they help); left out: per query, by feedback"
    )
    for pool_id, reason in result.retired.items():
        click.echo(f"retired {pool_id}: {reason}")


def echo_abstraction(report: dict[str, Any]) -> None:
    """The `stats --abstraction` section, for people."""
    if report.get("note"):
        click.echo(f"abstraction: {report['note']}")
        return
    click.echo(
        f"abstraction over {report['insights']} insights in {report['domains']} domains "
        f"({report['unlabelled']} without a domain left out):"
    )
    click.echo(
        f"  Davies-Bouldin index {report['davies_bouldin']:.2f} (standard index: lower = "
        "domains more separable; paper: trajectories 6.50, insights 2.33)"
    )
    click.echo(
        f"  mean LISI {report['mean_lisi']:.2f} over {report['neighbours']} neighbours "
        "(higher = more mixed; paper: 1.70 / 4.47)"
    )
    click.echo(f"  mean specificity {report['mean_specificity']:.2f} (0 = mixed, 1 = own domain)")
    if report["most_specific"]:
        click.echo("  most domain-specific (candidates to rewrite more abstractly):")
        for item in report["most_specific"]:
            click.echo(
                f"    {item['specificity']:.2f} {item['id']} [{item['domain']}] {item['title']}"
            )


@click.command(name="eval")
@common
@click.option(
    "--pool",
    "pool_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Pool JSONL (default: the evaluation set shipped with mtl-mcp).",
)
@click.option(
    "--queries",
    "queries_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Queries JSONL (default: the shipped set).",
)
@click.option("-k", default=3, show_default=True, type=click.IntRange(1, 20), help="Cut-off.")
@click.option(
    "--query-field",
    type=click.Choice(["plan", "task"]),
    default="plan",
    show_default=True,
    help="Which text of a query to recall with.",
)
@click.option(
    "--no-leave-domain-out",
    is_flag=True,
    help="Keep the query's own domain in the pool (measures lookup, not transfer).",
)
@click.option(
    "--split",
    type=click.Choice(["dev", "test", "all"]),
    default="all",
    show_default=True,
    help="Which queries to score.",
)
@click.option(
    "--method",
    "methods",
    multiple=True,
    type=click.Choice(list(METHODS)),
    help=f"Recall method (repeatable; default {DEFAULT_METHOD}).",
)
@click.option("--compare", is_flag=True, help="Every method side by side.")
@click.option("--per-domain", is_flag=True, help="Also a table per domain.")
@click.option(
    "--feedback",
    is_flag=True,
    help="Simulate session verdicts on the dev split, then recall test (and dev) with them.",
)
@click.option(
    "--planted",
    "planted_path",
    is_flag=False,
    flag_value="shipped",
    default=None,
    metavar="[FILE]",
    help="With --feedback: add bad insights to the pool (default: the shipped planted set).",
)
@click.option(
    "--noise",
    default=0.0,
    show_default=True,
    type=click.FloatRange(0.0, 0.99),
    help="With --feedback: share of verdicts the simulated judge gets wrong.",
)
@click.option(
    "--seeds",
    default=10,
    show_default=True,
    type=click.IntRange(1, 100),
    help="With --feedback and --noise: noise draws to average over.",
)
@json_option
def eval_(
    pool_path: Path | None,
    queries_path: Path | None,
    k: int,
    query_field: Any,
    no_leave_domain_out: bool,
    split: Any,
    methods: tuple[str, ...],
    compare: bool,
    per_domain: bool,
    feedback: bool,
    planted_path: str | None,
    noise: float,
    seeds: int,
    as_json: bool,
) -> None:
    """Measure recall quality on an evaluation set, in a throwaway store.

    Never touches your data. Reports precision@k, hit@k, MRR, recall@10 and nDCG@10;
    with --feedback, what session verdicts do to later recalls instead.
    """
    from mtl_mcp.quality.evaluation import evaluate, shipped_set

    default_pool, default_queries = shipped_set()
    if feedback:
        if compare or methods or query_field != "plan" or split != "all":
            raise click.UsageError(
                "--feedback runs the default method on plans, with the dev split as the "
                "sessions: drop --compare, --method, --query-field and --split"
            )
        from mtl_mcp.quality.feedback_eval import evaluate_feedback, shipped_planted

        if planted_path == "shipped":
            planted = shipped_planted()
        elif planted_path is not None:
            planted = Path(planted_path)
            if not planted.is_file():
                raise click.BadParameter(f"{planted} is not a file", param_hint="--planted")
        else:
            planted = None
        click.echo("simulating feedback...", err=True)
        outcome = evaluate_feedback(
            pool_path or default_pool,
            queries_path or default_queries,
            planted,
            k=k,
            noise=noise,
            seeds=seeds if noise else 1,
            leave_domain_out=not no_leave_domain_out,
            embed_model=settings().embed_model,
        )
        if as_json:
            echo_json(outcome.model_dump(mode="json", exclude_none=True))
        else:
            _echo_feedback(outcome)
        return
    if planted_path is not None or noise:
        raise click.UsageError("--planted and --noise go with --feedback")
    chosen = list(METHODS) if compare else list(methods or [DEFAULT_METHOD])
    click.echo(f"evaluating {', '.join(chosen)}...", err=True)
    results = evaluate(
        pool_path or default_pool,
        queries_path or default_queries,
        methods=chosen,
        k=k,
        query_field=query_field,
        leave_domain_out=not no_leave_domain_out,
        split=split,
        embed_model=settings().embed_model,
    )
    if as_json:
        if len(results) == 1:
            echo_json(results[0].model_dump(mode="json", exclude_none=True))
        else:
            echo_json({r.method: r.model_dump(mode="json", exclude_none=True) for r in results})
        return
    _echo_results(results, per_domain or len(results) == 1)


@click.command(name="map")
@common
@click.option(
    "--out",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="FILE.html (self-contained) or FILE.png (needs `pip install 'mtl-mcp[map]'`).",
)
@click.option(
    "--color-by",
    type=click.Choice(["domain", "category"]),
    default="domain",
    show_default=True,
)
def map_(out: Path, color_by: Any) -> None:
    """Draw the memory in 2-D (PCA of the embeddings); hover a dot to read the insight."""
    from mtl_mcp.quality.memory_map import map_points, write_map

    points = map_points(open_memory())
    write_map(points, out, color_by)
    click.echo(f"wrote a map of {len(points)} insights to {out}", err=True)


@click.group()
def tune() -> None:
    """Fit parts of recall to your own sessions."""


@tune.command(name="gate")
@common
@click.option("--dry-run", is_flag=True, help="Report what a refit would do; write nothing.")
@click.option("--reset", is_flag=True, help="Go back to the fit shipped with mtl-mcp.")
@click.option("--yes", is_flag=True, help="Apply without asking (needed off a terminal).")
@json_option
def tune_gate(dry_run: bool, reset: bool, yes: bool, as_json: bool) -> None:
    """Refit the relevance gate on your sessions' verdicts ("helped" or "misled", at least
    50), the current fit as the prior; shows its precision on held-out sessions before and
    after, and applies it only if you say so."""
    from mtl_mcp.index.gate import GateFile
    from mtl_mcp.quality.gate_fit import MIN_GAIN_Z, MIN_JUDGED, tune

    config = settings()
    gate = GateFile(config.home)
    if reset:
        if not gate.path.exists():
            click.echo("the gate is the shipped fit already: nothing to reset", err=True)
            return
        confirm_destructive(yes, f"tune gate --reset deletes the tuned gate {gate.path}")
        gate.reset()
        click.echo("the relevance gate is the shipped fit again", err=True)
        return
    report = tune(open_memory())
    if as_json:
        echo_json({**asdict(report), "better": report.better})
    else:
        _echo_tuning(report)
    if report.after is None:
        raise click.ClickException(
            f"{report.judged} judged recalls with a plan; the gate is tuned on {MIN_JUDGED} or "
            "more, held-out sessions included: nothing changed (sessions judged by the "
            "distillation worker add them)"
        )
    if not report.better:
        click.echo(
            "the refit does not predict held-out sessions surely better than the current fit"
            f" (gain {report.gain_z} standard errors; it needs {MIN_GAIN_Z}), or is less "
            "precise there: nothing changed",
            err=True,  # stdout is the report (--json)
        )
        return
    if dry_run:
        click.echo("--dry-run: nothing written", err=True)
        return
    confirm_destructive(yes, f"tune gate writes the refitted gate to {gate.path}")
    gate.write(report.after)
    click.echo(f"wrote {gate.path}; `mtl-mcp tune gate --reset` goes back to the shipped fit")


def _echo_tuning(report: TuneReport) -> None:
    click.echo(
        f"{report.judged} judged recalls of {report.sessions} sessions; each third of the "
        f"sessions scored by a fit on the others; threshold p >= {report.min_p}"
    )
    click.echo(f"{'':6} {'precision':>9} {'notes':>6} {'helped kept':>12} {'log loss':>9}  fit")
    rows = [("now", report.before, report.before_figures)]
    if report.after is not None:
        rows.append(("refit", report.after, report.after_figures))
    for name, gate, figures in rows:
        if not figures:
            continue
        weights = ", ".join(f"{n} {w:.2f}" for n, w in zip(SIGNALS, gate.weights, strict=True))
        click.echo(
            f"{name:6} {figures['precision']:>9.3f} {figures['notes']:>6} "
            f"{figures['helped_kept']:>12.3f} {figures['log_loss']:>9.4f}  "
            f"intercept {gate.intercept:.2f}, {weights} ({gate.source})"
        )
    if report.gain_z is not None:
        click.echo(f"the refit's held-out gain in log loss: {report.gain_z} standard errors")


COMMANDS = [eval_, map_, tune]
