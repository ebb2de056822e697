"""Starting, resuming and reporting trials: what the CLI and the dashboard call.

spec, suite = plan_trial(settings, adapter, suite="builtin", arms=[...], runs=3, ...)
files = TrialFiles(settings.home, spec.id); files.create(spec)   # once the user agreed
runner = Runner(files, suite, adapter, settings, say=print)
runner.prepare(); runner.run(estimate)
report = trial_report(settings, files.id)
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path
from typing import Any

from mtl_mcp.config import Settings
from mtl_mcp.errors import InputError
from mtl_mcp.trials.clients import ClientAdapter
from mtl_mcp.trials.plan import Estimate, choose_tasks, estimate_from, order_tasks
from mtl_mcp.trials.records import (
    RunRecord,
    TrialFiles,
    TrialSpec,
    latest_trial,
    list_trials,
    new_trial_id,
    remove_tree,
)
from mtl_mcp.trials.report import build_report
from mtl_mcp.trials.suite import Suite, load_suite
from mtl_mcp.version import __version__


def preflight(adapter: ClientAdapter) -> str:
    """Check, as a trial's session would run it (a throwaway home reusing the login), that
    the client is installed and logged in; its version. InputError names the fix."""
    scratch = Path(tempfile.mkdtemp(prefix="mtl-trial-"))
    try:
        env = adapter.environment(scratch, scratch)
        adapter.prepare_home(scratch, scratch, env)
        version = adapter.version(scratch, env)
        adapter.check_login(scratch, env)
        return version
    finally:
        remove_tree(scratch)


def plan_trial(
    settings: Settings,
    adapter: ClientAdapter,
    *,
    suite: str | Path,
    arms: list[str],
    runs: int,
    tasks: int | None = None,
    max_tokens: int | None = None,
    protocol: str = "standard",
    model: str | None = None,
    seed: int | None = None,
    client_version: str = "",
) -> tuple[TrialSpec, Suite]:
    """Plan a new trial: its spec and suite. Nothing is written until `TrialFiles.create`
    (after the user agreed to the plan)."""
    if runs < 1:
        raise InputError(f"--runs {runs}: run each task at least once")
    if max_tokens is not None and max_tokens < 1:
        raise InputError(f"--max-tokens {max_tokens}: give a positive number of tokens")
    if protocol not in ("standard", "transfer"):
        raise InputError(f"unknown protocol {protocol!r}: the only other protocol is 'transfer'")
    loaded = load_suite(suite)
    if not loaded.tasks:
        raise InputError(f"the suite at {loaded.path} has no task: see `mtl-mcp trial check`")
    seed = random.SystemRandom().randrange(2**31) if seed is None else seed
    chosen = order_tasks(choose_tasks(loaded, tasks), seed, protocol)
    spec = TrialSpec(
        id=new_trial_id(settings.home),
        client=adapter.name,
        client_version=client_version,
        model=model,
        suite=loaded.name,
        suite_path=str(loaded.path),
        protocol=protocol,  # type: ignore[arg-type]  # checked above
        arms=arms,
        runs=runs,
        tasks=[t.id for t in chosen],
        domains={t.id: t.domain for t in chosen},
        seed=seed,
        max_tokens=max_tokens,
        mtl_mcp=__version__,
    )
    return spec, loaded


def open_trial(settings: Settings, trial_id: str) -> tuple[TrialFiles, Suite]:
    files = TrialFiles(settings.home, trial_id)
    spec = files.spec()
    if spec.status == "complete":
        raise InputError(f"trial {trial_id} is complete: see `mtl-mcp trial report {trial_id}`")
    return files, load_suite(spec.suite_path if spec.suite != "builtin" else "builtin")


def prior_estimate(settings: Settings, client: str, model: str | None) -> Estimate:
    """Tokens and time a session of `client` took in this user's earlier trials (with the
    same model), if any: the plan's estimate before anything runs."""
    runs: list[RunRecord] = []
    source = None
    for spec in list_trials(settings.home):
        if spec.client == client and spec.model == model:
            found = TrialFiles(settings.home, spec.id).runs()
            if found:
                runs += found
                source = source or f"from trial {spec.id}"
    return estimate_from(runs, source or "")


def trial_report(settings: Settings, trial_id: str | None = None) -> dict[str, Any]:
    """The report of a trial (the latest if no id): as saved when it completed, else as it
    stands now."""
    files = TrialFiles(settings.home, trial_id or latest_trial(settings.home))
    spec = files.spec()
    if spec.status == "complete" and (saved := files.saved_report()) is not None:
        return saved
    return build_report(spec, files.runs())


def finish_report(files: TrialFiles) -> dict[str, Any]:
    """Build the report now; a complete trial's is saved with it."""
    spec = files.spec()
    report = build_report(spec, files.runs())
    if spec.status == "complete":
        files.save_report(report)
    return report


def trial_summaries(settings: Settings) -> list[dict[str, Any]]:
    """One line per trial, newest first: for `trial list` and the dashboard."""
    rows = []
    for spec in list_trials(settings.home):
        runs = TrialFiles(settings.home, spec.id).runs()
        report = build_report(spec, runs)
        comparison = report["comparisons"].get("memory_vs_none")
        rows.append(
            {
                "id": spec.id,
                "created_at": spec.created_at.isoformat(),
                "client": spec.client,
                "suite": spec.suite,
                "protocol": spec.protocol,
                "arms": spec.arms,
                "status": spec.status,
                "sessions": report["sessions"],
                "pass_rates": {a: row["pass_rate"] for a, row in report["arms"].items()},
                "memory_vs_none_p": comparison["p"] if comparison else None,
                "harms": len(report["harms"]),
            }
        )
    return rows


__all__ = [
    "TrialSpec",
    "finish_report",
    "open_trial",
    "plan_trial",
    "preflight",
    "prior_estimate",
    "trial_report",
    "trial_summaries",
]
