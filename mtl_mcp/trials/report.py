"""A trial's report: the JSON contract (`trial run --json`, `trial report --json`), and the
same as text for a terminal.

Pairing: a task's run r in one arm is paired with its run r in the other (the two ran in
the same rotation block, minutes apart, on the same fresh copy of the task). With more than
one run a task contributes several pairs, which are not independent of one another: the
report says so, and the per-task table shows each task's runs side by side.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mtl_mcp.trials.records import RunRecord, TrialSpec
from mtl_mcp.trials.stats import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    mcnemar,
    ratio_ci,
    wilson,
)

SIGNIFICANCE = 0.05
COMPARISONS = (("memory", "none"), ("memory", "placebo"), ("placebo", "none"))
PAIRING = (
    "per task and run: run r of a task in one arm against run r of the same task in the "
    "other (same rotation block); pairs of one task are not independent when runs > 1"
)
OVERHEAD_INTERVAL = (
    f"ratio of mean per-session figures, memory / none; 95% interval from a bootstrap over "
    f"tasks ({BOOTSTRAP_RESAMPLES} resamples, seed {BOOTSTRAP_SEED}, percentile method)"
)


def latest_runs(runs: Sequence[RunRecord]) -> dict[int, RunRecord]:
    """The last record of each slot (a slot run again on resume replaces its error)."""
    latest: dict[int, RunRecord] = {}
    for record in runs:
        latest[record.slot] = record
    return latest


def build_report(spec: TrialSpec, runs: Sequence[RunRecord]) -> dict[str, Any]:
    records = latest_runs(runs)
    scored = [r for r in records.values() if r.passed is not None]
    by_key = {(r.task, r.arm, r.run): r for r in scored}
    report: dict[str, Any] = {
        "id": spec.id,
        "client": spec.client,
        "client_version": spec.client_version,
        "model": spec.model,
        "suite": spec.suite,
        "protocol": spec.protocol,
        "status": spec.status,
        "stop_reason": spec.stop_reason,
        "created_at": spec.created_at.isoformat(),
        "seed": spec.seed,
        "sessions": {
            "planned": len(spec.tasks) * len(spec.arms) * spec.runs,
            "done": len(records),
            "scored": len(scored),
            "errors": sum(1 for r in records.values() if r.passed is None),
        },
        "arms": {arm: _arm(arm, spec, list(runs), scored) for arm in spec.arms},
        "comparisons": {},
        "pairing": PAIRING,
        "tasks": [],
        "no_room": [],
        "harms": [],
        "overhead": None,
        "memory": {
            "before": spec.memory_before,
            "after": spec.memory_after,
            "unchanged": spec.memory_after is None or spec.memory_before == spec.memory_after,
        },
    }
    for a, b in COMPARISONS:
        if a in spec.arms and b in spec.arms:
            report["comparisons"][f"{a}_vs_{b}"] = _compare(spec, by_key, a, b)
    for task in spec.tasks:
        results = {
            arm: [by_key[(task, arm, n)].passed if (task, arm, n) in by_key else None
                  for n in range(spec.runs)]
            for arm in spec.arms
        }  # fmt: skip
        recalled = {
            arm: _union(
                by_key[(task, arm, n)].recalled
                for n in range(spec.runs)
                if (task, arm, n) in by_key
            )
            for arm in spec.arms
            if arm != "none"
        }
        report["tasks"].append(
            {
                "id": task,
                "domain": spec.domains.get(task, ""),
                "results": results,
                "recalled": recalled,
            }
        )
        outcomes = [v for values in results.values() for v in values if v is not None]
        every_arm = all(any(v is not None for v in values) for values in results.values())
        if outcomes and every_arm and len(set(outcomes)) == 1:
            report["no_room"].append(
                {
                    "task": task,
                    "outcome": "passed in every arm" if outcomes[0] else "failed in every arm",
                }
            )
    if "memory" in spec.arms and "none" in spec.arms:
        report["harms"] = _harms(spec, by_key)
        report["overhead"] = _overhead(spec, by_key)
    report["caveats"] = _caveats(spec, report)
    return report


def _arm(
    arm: str, spec: TrialSpec, runs: list[RunRecord], scored: list[RunRecord]
) -> dict[str, Any]:
    mine = [r for r in scored if r.arm == arm]
    spent = [r for r in runs if r.arm == arm]  # every session spent tokens, scored or not
    passed = sum(1 for r in mine if r.passed)
    low, high = wilson(passed, len(mine))
    count = len(mine)
    return {
        "runs": count,
        "passed": passed,
        "pass_rate": round(passed / count, 4) if count else None,
        "wilson95": [round(low, 4), round(high, 4)],
        "tokens": sum(r.tokens for r in spent),
        "tokens_in": sum(r.tokens_in for r in spent),
        "tokens_out": sum(r.tokens_out for r in spent),
        "seconds": round(sum(r.seconds for r in spent), 1),
        "mean_tokens": round(sum(r.tokens for r in mine) / count, 1) if count else None,
        "mean_seconds": round(sum(r.seconds for r in mine) / count, 2) if count else None,
        "mean_turns": round(sum(r.turns for r in mine) / count, 2) if count else None,
        "mean_tool_calls": round(sum(r.tool_calls for r in mine) / count, 2) if count else None,
        "notes_shown_per_run": round(sum(len(r.recalled) for r in mine) / count, 2)
        if count
        else None,
        "errors": sum(1 for r in spent if r.passed is None),
        "timeouts": sum(1 for r in mine if r.timed_out),
        "notes_in_memory": _notes(spec, arm),
    }


def _notes(spec: TrialSpec, arm: str) -> int | None:
    counts = [n for key, n in spec.arm_notes.items() if key.split(".")[0] == arm]
    return sum(counts) if counts else None


def _compare(
    spec: TrialSpec, by_key: dict[tuple[str, str, int], RunRecord], a: str, b: str
) -> dict[str, Any]:
    pairs = [
        (bool(by_key[(t, a, n)].passed), bool(by_key[(t, b, n)].passed))
        for t in spec.tasks
        for n in range(spec.runs)
        if (t, a, n) in by_key and (t, b, n) in by_key
    ]
    test = mcnemar(pairs)
    return {
        "helped": test.helped,
        "hurt": test.hurt,
        "both_passed": test.both_passed,
        "both_failed": test.both_failed,
        "pairs": test.pairs,
        "p": round(test.p, 6),
        "significant": test.p < SIGNIFICANCE,
        "test": "exact McNemar (two-sided binomial on the discordant pairs)",
    }


def _harms(spec: TrialSpec, by_key: dict[tuple[str, str, int], RunRecord]) -> list[dict[str, Any]]:
    """Tasks memory failed in a run where none passed, with what that run was shown."""
    harms = []
    for task in spec.tasks:
        runs = [
            n
            for n in range(spec.runs)
            if (task, "memory", n) in by_key
            and (task, "none", n) in by_key
            and by_key[(task, "none", n)].passed
            and not by_key[(task, "memory", n)].passed
        ]
        if runs:
            insights = _union(by_key[(task, "memory", n)].recalled for n in runs)
            harms.append(
                {
                    "task": task,
                    "domain": spec.domains.get(task, ""),
                    "runs": runs,
                    "insights": insights,
                    "show": [f"mtl-mcp show {i}" for i in insights],
                }
            )
    return harms


def _overhead(spec: TrialSpec, by_key: dict[tuple[str, str, int], RunRecord]) -> dict[str, Any]:
    def figure(of: str) -> dict[str, Any]:
        pairs = []
        for task in spec.tasks:
            mine = [
                getattr(by_key[(task, "memory", n)], of)
                for n in range(spec.runs)
                if (task, "memory", n) in by_key
            ]
            base = [
                getattr(by_key[(task, "none", n)], of)
                for n in range(spec.runs)
                if (task, "none", n) in by_key
            ]
            pairs.append((mine, base))
        ratio = ratio_ci(pairs)
        return {
            "ratio": rounded(ratio.ratio),
            "low": rounded(ratio.low),
            "high": rounded(ratio.high),
            "tasks": ratio.groups,
        }

    return {"tokens": figure("tokens"), "seconds": figure("seconds"), "interval": OVERHEAD_INTERVAL}


def rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _union(groups: Any) -> list[str]:
    found: list[str] = []
    for group in groups:
        found += [i for i in group if i not in found]
    return found


def _caveats(spec: TrialSpec, report: dict[str, Any]) -> list[str]:
    notes = []
    sessions = report["sessions"]
    if sessions["scored"] < sessions["planned"]:
        notes.append(
            f"incomplete: {sessions['scored']} of {sessions['planned']} sessions scored; the "
            "comparisons use only the task-runs every compared arm finished"
        )
    if spec.runs > 1:
        notes.append("runs > 1: a task's pairs are not independent, so p is optimistic")
    comparison = report["comparisons"].get("memory_vs_none")
    if comparison and comparison["helped"] + comparison["hurt"] < 6:
        notes.append(
            "fewer than 6 tasks changed outcome between memory and none: no result of this "
            "size can reach p < 0.05 (more tasks, or runs, are needed to tell)"
        )
    if report["no_room"]:
        notes.append(
            f"{len(report['no_room'])} of {len(spec.tasks)} tasks passed or failed in every arm: "
            "they cannot show an effect either way"
        )
    memory = report["arms"].get("memory", {}).get("notes_shown_per_run")
    placebo = report["arms"].get("placebo", {}).get("notes_shown_per_run")
    if memory and placebo is not None and placebo < memory / 2:
        notes.append(
            f"the placebo's notes reached the model less often ({placebo} a session against "
            f"{memory}): unrelated notes rarely pass the relevance floor, so memory vs placebo "
            "also compares how much was shown"
        )
    if not report["memory"]["unchanged"]:
        notes.append(
            "your memory changed while the trial ran (the trial never writes it: another "
            "session or command did); the memory arm used the copy taken at the start"
        )
    return notes


def report_text(report: dict[str, Any]) -> list[str]:
    """The report for a terminal."""
    lines = [
        f"trial {report['id']}: {report['client']} {report['client_version']}".rstrip()
        + f", suite {report['suite']}, {report['status']}"
        + (f" ({report['stop_reason']})" if report["stop_reason"] else ""),
        f"sessions: {report['sessions']['scored']} scored of "
        f"{report['sessions']['planned']} planned"
        + (
            f", {report['sessions']['errors']} not scored (client errors)"
            if report["sessions"]["errors"]
            else ""
        ),
        "",
        f"{'arm':<9}{'passed':>10}{'rate':>7}  {'95% (Wilson)':<16}{'tokens':>10}{'time':>9}"
        "  notes shown/run",
    ]
    for arm, row in report["arms"].items():
        rate = "—" if row["pass_rate"] is None else f"{row['pass_rate']:.2f}"
        low, high = row["wilson95"]
        shown = (
            "—"
            if arm == "none" or row["notes_shown_per_run"] is None
            else f"{row['notes_shown_per_run']}"
        )
        lines.append(
            f"{arm:<9}{row['passed']:>5}/{row['runs']:<4}{rate:>7}  [{low:.2f}, {high:.2f}]    "
            f"{row['tokens']:>10}{row['seconds']:>8.0f}s  {shown}"
        )
    lines.append("")
    for name, row in report["comparisons"].items():
        verdict = "significant" if row["significant"] else "not significant"
        lines.append(
            f"{name.replace('_', ' ')}: helped {row['helped']}, hurt {row['hurt']} "
            f"(of {row['pairs']} pairs), exact McNemar p = {row['p']:.4g}, {verdict} at 0.05"
        )
    overhead = report.get("overhead")
    if overhead:
        for what in ("tokens", "seconds"):
            fig = overhead[what]
            if fig["ratio"] is not None:
                interval = (
                    "" if fig["low"] is None else f" (95% {fig['low']:.2f}-{fig['high']:.2f})"
                )
                lines.append(f"overhead, {what} memory/none: x{fig['ratio']:.2f}{interval}")
    if report["no_room"]:
        lines.append("")
        lines.append("no room to show an effect (same outcome in every arm):")
        lines += [f"  {row['task']}: {row['outcome']}" for row in report["no_room"]]
    if report["harms"]:
        lines.append("")
        lines.append("harms (memory failed where none passed), and what memory showed there:")
        for harm in report["harms"]:
            lines.append(f"  {harm['task']} (runs {', '.join(str(n + 1) for n in harm['runs'])}):")
            lines += [f"    {command}" for command in harm["show"]] or ["    (no note was shown)"]
    if report["caveats"]:
        lines.append("")
        lines += [f"note: {caveat}" for caveat in report["caveats"]]
    return lines
