"""CLI commands for trials: `mtl-mcp trial run | report | list | check`.

A trial runs the user's own assistant on a task suite with and without their memory (and
with a placebo), and says with honest statistics whether the memory helped. The work is
in `mtl_mcp.trials`; these commands plan, ask, run and print.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from mtl_mcp.cli.app import common, echo_json, json_option, settings

DEFAULT_ARMS = "none,memory,placebo"


@click.group()
@common
def trial() -> None:
    """Does memory help your agent? Run the paper's experiment on your own assistant.

    `trial run` runs it, `trial report` shows a trial's report, `trial list` lists them,
    `trial check DIR` validates a task suite (docs/trials.md).
    """


def _ask(question: str, yes: bool) -> None:
    """Consent before spending tokens: off a terminal, only --yes is a yes."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise click.UsageError(
            f"{question} — stdin is not a terminal to confirm it: nothing was run; pass --yes "
            "to go ahead"
        )
    click.confirm(question, abort=True, err=True)


@trial.command(name="run")
@common
@click.option("--client", "client_name", help="The assistant to run: claude-code, codex, "
              "gemini-cli, opencode or copilot-cli.")  # fmt: skip
@click.option("--suite", default="builtin", show_default=True, help="`builtin` or a suite folder.")
@click.option("--arms", default=DEFAULT_ARMS, show_default=True, help="Arms to compare.")
@click.option(
    "--runs",
    default=3,
    show_default=True,
    type=click.IntRange(1, 50),
    help="Runs of each task in each arm.",
)
@click.option("--tasks", type=click.IntRange(1), help="Run only N tasks, spread over the domains.")
@click.option(
    "--max-tokens", type=click.IntRange(1), help="Stop before spending more tokens than this."
)
@click.option("--protocol", type=click.Choice(["standard", "transfer"]), default="standard",
              show_default=True, help="transfer: memory built from the suite's other domains, "
              "not yours.")  # fmt: skip
@click.option("--model", help="The model every arm's sessions use (default: the client's).")
@click.option(
    "--command", "client_command", help="How to start the client (a path or a command line)."
)
@click.option("--seed", type=int, help="The seed of the task order (default: random, recorded).")
@click.option("--resume", "resume_id", metavar="ID", help="Resume trial ID where it stopped.")
@click.option("--yes", is_flag=True, help="Do not ask before spending tokens.")
@json_option
def run_trial(
    client_name: str | None,
    suite: str,
    arms: str,
    runs: int,
    tasks: int | None,
    max_tokens: int | None,
    protocol: str,
    model: str | None,
    client_command: str | None,
    seed: int | None,
    resume_id: str | None,
    yes: bool,
    as_json: bool,
) -> None:
    """Run a trial: TASKS x ARMS x RUNS sessions of the client, each in a fresh copy of a
    task, then the task's hidden verifier; print the report.

    Arms: `none` (no memory), `memory` (yours, frozen: a read-only copy), `placebo` (as many
    unrelated notes). It prints the plan and its estimated cost first, and asks; off a
    terminal it needs --yes. Ctrl-C stops it cleanly: `--resume ID` goes on.
    """
    from mtl_mcp.trials.clients import client_adapter
    from mtl_mcp.trials.manage import open_trial, plan_trial, preflight, prior_estimate
    from mtl_mcp.trials.plan import describe, estimate_from, parse_arms
    from mtl_mcp.trials.records import TrialFiles

    config = settings()
    if resume_id:
        files, loaded = open_trial(config, resume_id)
        spec = files.spec()
        adapter = client_adapter(spec.client, client_command or _default_command(spec.client))
        preflight(adapter)
        if max_tokens is not None:
            spec.max_tokens = max_tokens
        estimate = estimate_from(files.runs(), "from this trial's sessions so far")
    else:
        if not client_name:
            raise click.UsageError(
                "name the assistant to run: --client claude-code (or --resume ID)"
            )
        adapter = client_adapter(client_name, client_command or _default_command(client_name))
        version = preflight(adapter)  # refused up front: missing, or not logged in
        spec, loaded = plan_trial(
            config, adapter, suite=suite, arms=parse_arms(arms), runs=runs, tasks=tasks,
            max_tokens=max_tokens, protocol=protocol, model=model, seed=seed,
            client_version=version,
        )  # fmt: skip
        files = TrialFiles(config.home, spec.id)
        estimate = prior_estimate(config, spec.client, spec.model)
    from mtl_mcp.trials.runner import Runner, TrialStopped

    remaining = len(Runner.slots_left(spec, files.runs()))
    for line in describe(spec, estimate, remaining):
        click.echo(line, err=True)
    _ask(f"Run {remaining} sessions of {adapter.label}?", yes)
    if resume_id:
        files.save(spec)
    else:
        files.create(spec)

    def calibrated(found: object) -> bool:
        for line in describe(files.spec(), found, remaining - 1):  # type: ignore[arg-type]
            click.echo(line, err=True)
        return yes or click.confirm("Go on?", default=True, err=True)

    runner = Runner(files, loaded, adapter, config, say=lambda line: click.echo(line, err=True))
    exit_code = 0
    try:
        runner.prepare()
        runner.run(estimate, calibrated if estimate.tokens is None else None)
    except KeyboardInterrupt:
        click.echo(f"\ninterrupted: resume with `mtl-mcp trial run --resume {spec.id}`", err=True)
        raise SystemExit(130) from None
    except TrialStopped as exc:
        click.echo(f"stopped: {exc}", err=True)
        exit_code = 0 if exc.budget else 1
    _print_report(files, as_json)
    if exit_code:
        raise SystemExit(exit_code)


def _default_command(client: str) -> str | None:
    """Claude Code and Codex: the command the user configured for mtl-mcp already."""
    config = settings()
    return {"claude-code": config.claude_command, "codex": config.codex_command}.get(client)


def _print_report(files: object, as_json: bool) -> None:
    from mtl_mcp.trials.manage import finish_report
    from mtl_mcp.trials.report import report_text

    report = finish_report(files)  # type: ignore[arg-type]
    if as_json:
        echo_json(report)
    else:
        for line in report_text(report):
            click.echo(line)


@trial.command()
@common
@click.argument("trial_id", metavar="[ID]", required=False)
@click.option("--html", "html_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the report as a self-contained HTML page.")  # fmt: skip
@json_option
def report(trial_id: str | None, html_file: Path | None, as_json: bool) -> None:
    """Show a trial's report (the latest trial's without ID)."""
    from mtl_mcp.trials.html import report_html
    from mtl_mcp.trials.manage import trial_report
    from mtl_mcp.trials.report import report_text

    found = trial_report(settings(), trial_id)
    if html_file is not None:
        try:
            html_file.write_text(report_html(found), encoding="utf-8")
        except OSError as exc:
            raise click.ClickException(f"cannot write {html_file}: {exc.strerror}") from None
        click.echo(f"wrote {html_file}", err=True)
    if as_json:
        echo_json(found)
    else:
        for line in report_text(found):
            click.echo(line)


@trial.command(name="list")
@common
@json_option
def list_trials(as_json: bool) -> None:
    """List the trials, newest first."""
    from mtl_mcp.trials.manage import trial_summaries

    rows = trial_summaries(settings())
    if as_json:
        echo_json(rows)
        return
    if not rows:
        click.echo("no trial yet: start one with `mtl-mcp trial run --client claude-code`")
    for row in rows:
        rates = ", ".join(
            f"{arm} {'—' if r is None else f'{r:.2f}'}" for arm, r in row["pass_rates"].items()
        )
        p = "" if row["memory_vs_none_p"] is None else f", p = {row['memory_vs_none_p']:.3g}"
        click.echo(
            f"{row['id']}  {row['client']:<12} {row['suite']:<10} {row['status']:<11} "
            f"{row['sessions']['scored']}/{row['sessions']['planned']} sessions: {rates}{p}"
        )


@trial.command()
@common
@click.argument("folder", metavar="DIR", type=click.Path(file_okay=False, path_type=Path))
def check(folder: Path) -> None:
    """Check a suite: each untouched repo fails its verifier, each reference passes, each
    tempting fix passes the visible tests and fails the verifier. One line per task."""
    from mtl_mcp.trials.suite import check_suite, load_suite

    results = check_suite(load_suite(folder))
    for result in results:
        if result.ok:
            click.echo(f"ok    {result.task_id}")
        else:
            click.echo(f"FAIL  {result.task_id}: {'; '.join(result.problems)}")
    bad = sum(1 for r in results if not r.ok)
    click.echo(f"{len(results) - bad} of {len(results)} tasks ok", err=True)
    if bad:
        raise SystemExit(1)


COMMANDS = [trial]
