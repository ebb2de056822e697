"""The plan of a trial: which tasks, in which order, each arm when, and what it will cost.

Arms are interleaved per task and rotated from one task to the next (a Latin square: ABC,
BCA, CAB, ...), so drift in the model or the machine over the trial reaches every arm
equally, and no arm always goes first. The task order is shuffled by the trial's seed; under
the transfer protocol the tasks of one domain run together (one memory per domain).
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from mtl_mcp.errors import InputError
from mtl_mcp.trials.records import RunRecord, TrialSpec
from mtl_mcp.trials.suite import Suite, Task

ARM_ORDER = ("none", "memory", "placebo")


@dataclass(frozen=True)
class Slot:
    """One session of the schedule."""

    index: int
    task: str
    arm: str
    run: int


def parse_arms(text: str) -> list[str]:
    arms = [a.strip() for a in text.split(",") if a.strip()]
    unknown = [a for a in arms if a not in ARM_ORDER]
    if unknown or not arms:
        raise InputError(
            f"unknown arm {unknown[0] if unknown else text!r}: choose from none, memory, placebo"
        )
    if len(set(arms)) != len(arms):
        raise InputError(f"--arms names an arm twice ({text}): list each once")
    if len(arms) < 2:
        raise InputError("a trial compares arms: give at least two, e.g. --arms none,memory")
    return [a for a in ARM_ORDER if a in arms]


def choose_tasks(suite: Suite, limit: int | None) -> list[Task]:
    """`limit` tasks spread over the domains (one of each domain in turn, by id), or all."""
    if limit is not None and limit < 1:
        raise InputError(f"--tasks {limit}: run at least one task")
    if limit is None or limit >= len(suite.tasks):
        return list(suite.tasks)
    by_domain: dict[str, list[Task]] = {}
    for task in suite.tasks:
        by_domain.setdefault(task.domain, []).append(task)
    chosen: list[Task] = []
    queues = [list(tasks) for _, tasks in sorted(by_domain.items())]
    while len(chosen) < limit:
        for queue in queues:
            if queue and len(chosen) < limit:
                chosen.append(queue.pop(0))
    return sorted(chosen, key=lambda t: t.id)


def order_tasks(tasks: Sequence[Task], seed: int, protocol: str) -> list[Task]:
    rng = random.Random(seed)
    ordered = list(tasks)
    rng.shuffle(ordered)
    if protocol == "transfer":
        domains = sorted({t.domain for t in ordered})
        rng.shuffle(domains)
        ordered.sort(key=lambda t: domains.index(t.domain))
    return ordered


def schedule(spec: TrialSpec) -> list[Slot]:
    """Every session of the trial, in the order it runs: run after run, task after task,
    the arms rotated one step from each task to the next."""
    arms = list(spec.arms)
    offset = random.Random(spec.seed).randrange(len(arms))
    slots: list[Slot] = []
    for run in range(spec.runs):
        for position, task in enumerate(spec.tasks):
            turn = (position + run + offset) % len(arms)
            for arm in arms[turn:] + arms[:turn]:
                slots.append(Slot(len(slots), task, arm, run))
    return slots


@dataclass(frozen=True)
class Estimate:
    """Tokens and seconds per session, and where that figure comes from."""

    tokens: float | None
    seconds: float | None
    source: str

    def total(self, sessions: int) -> tuple[float | None, float | None]:
        return (
            None if self.tokens is None else self.tokens * sessions,
            None if self.seconds is None else self.seconds * sessions,
        )


def estimate_from(runs: Sequence[RunRecord], source: str) -> Estimate:
    """The median session's tokens and wall time (plus the verifier) of finished runs."""
    done = [r for r in runs if r.passed is not None]
    if not done:
        return Estimate(None, None, "unknown until the first session: it calibrates the rest")
    tokens = statistics.median(r.tokens for r in done)
    seconds = statistics.median(r.seconds + r.verify_seconds for r in done)
    return Estimate(float(tokens), float(seconds), source)


def describe(spec: TrialSpec, estimate: Estimate, remaining: int) -> list[str]:
    """The plan, as `trial run` prints it before asking."""
    arms = ", ".join(spec.arms)
    lines = [
        f"trial {spec.id}: {spec.client}{' ' + spec.client_version if spec.client_version else ''}"
        f"{f', model {spec.model}' if spec.model else ''}, suite {spec.suite}"
        f"{', protocol transfer' if spec.protocol == 'transfer' else ''}",
        f"plan: {len(spec.tasks)} tasks x {len(spec.arms)} arms ({arms}) x {spec.runs} runs = "
        f"{len(spec.tasks) * len(spec.arms) * spec.runs} sessions"
        + (f", {remaining} still to run" if remaining != len(schedule(spec)) else ""),
    ]
    tokens, seconds = estimate.total(remaining)
    if tokens is None or seconds is None:
        lines.append(f"estimate: {estimate.source}")
    else:
        lines.append(
            f"estimate: ~{_tokens(tokens)} tokens and ~{_duration(seconds)} "
            f"({_tokens(estimate.tokens or 0)} tokens, {estimate.seconds or 0:.0f} s a session; "
            f"{estimate.source})"
        )
    if spec.max_tokens:
        lines.append(
            f"budget: stops before it would spend more than {_tokens(spec.max_tokens)} tokens"
        )
    return lines


def _tokens(count: float) -> str:
    if count >= 1_000_000:
        return f"{count / 1_000_000:.1f}M"
    if count >= 1000:
        return f"{count / 1000:.0f}k"
    return f"{count:.0f}"


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"
