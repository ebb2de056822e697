"""The relevance gate, fitted: the shipped fit on the evaluation set's dev split, and
`mtl-mcp tune gate` on a user's own session verdicts (what the gate is: `index.gate`).

The shipped fit (`fit_shipped`, run by `python bench/relevance_floor.py --fit`):

1. Every dev query's top 3 (leave-one-domain-out, the default method) is a labelled example:
   the gate's signals of the hit, and whether the hit is one of the query's relevant items.
2. A logistic regression on standardised signals, its weights (not its intercept) held back
   by an L2 penalty; the penalty is the one of L2_GRID with the lowest out-of-fold log loss
   when each dev domain in turn is left out of the fit (12 folds of 3 queries).
3. The threshold is the lowest of THRESHOLDS whose out-of-fold dev notes reach
   TARGET_PRECISION while at least half of the plans get a note (else the most precise
   threshold that keeps half the plans), each plan's notes chosen as the hook chooses them
   (at most `index.gate.UNASKED_PER_PLAN`, the most probable). The test split is scored
   once, with what dev chose.

Everything is deterministic (Newton steps from zero, no sampling): the same store and model
give the same constants, so the fit can be rerun whenever the embedding runtime changes.

Tuning (`tune`): recalls the judge rated `helped` or `misled` are labelled examples of the
user's own. The gate is refitted with an L2 penalty toward the current fit (the prior). The
user's sessions fall in FOLDS folds (by a hash of their ids); each fold is scored by a refit
on the others, so every verdict is predicted by a fit that never saw its session: that
chooses the prior's strength and gives the refit's held-out figures, beside the current
fit's on the same verdicts. `TuneReport.better` says whether the refit earns its place.
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from mtl_mcp.errors import InputError
from mtl_mcp.index.gate import SIGNALS, Gate, unasked_positions
from mtl_mcp.memory import Memory
from mtl_mcp.quality.evaluation import EvalQuery, EvalStore

TARGET_PRECISION = 0.75
MIN_COVERAGE = 0.5  # plans that get a note
THRESHOLDS = tuple(round(0.05 * n, 2) for n in range(1, 20))  # 0.05 .. 0.95
L2_GRID = (0.1, 0.3, 1.0, 3.0, 10.0)
MIN_JUDGED = 50  # judged recalls `tune gate` needs
PRIOR_GRID = (3.0, 10.0, 30.0, 100.0)  # how strongly a refit is held to the current fit
FOLDS = 3  # of the user's sessions, for the refit's held-out figures
# How far the refit must predict held-out sessions better (log loss, in standard errors of
# the per-session gain) to earn its place: a smaller gain is what fitting a judge's noise
# gives (20 draws of a 10%-wrong judge on the dev split, which the shipped fit already fits:
# at most 1.1), and a refit that learns nothing still moves which notes pass.
MIN_GAIN_Z = 2.0

Matrix = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Labelled:
    """One hit of one query, labelled: the gate's signals, and whether it is relevant.
    `parts` keeps what the simple gates of the bench look at (similarity, ranks)."""

    query: str
    split: str
    domain: str
    rank: int
    signals: tuple[float, ...]
    relevant: bool
    parts: dict[str, Any] = field(default_factory=dict)


def labelled_hits(evalset: EvalStore, queries: Sequence[EvalQuery], k: int = 3) -> list[Labelled]:
    """Every query's top k, leave-one-domain-out, through `Memory.preview` (the ranking
    `recall` runs, with each hit's parts and gate signals)."""
    found = []
    for query in queries:
        relevant = {evalset.store_ids[r] for r in query.relevant if r in evalset.store_ids}
        preview = evalset.memory.preview(query.plan, k=k, exclude_domains=[query.domain])
        for rank, part in enumerate(preview.parts, 1):
            found.append(
                Labelled(
                    query=query.id,
                    split=query.split or "",
                    domain=query.domain,
                    rank=rank,
                    signals=tuple(part.signals[name] for name in SIGNALS),
                    relevant=part.id in relevant,
                    parts=part.model_dump(),
                )
            )
    return found


def _design(hits: Sequence[Labelled]) -> tuple[Matrix, Matrix]:
    width = len(hits[0].signals) if hits else len(SIGNALS)  # the bench tries other signals
    x = np.array([h.signals for h in hits], dtype=np.float64).reshape(len(hits), width)
    y = np.array([h.relevant for h in hits], dtype=np.float64)
    return x, y


def fit_logistic(
    x: Matrix, y: Matrix, l2: float, prior: Gate | None = None, source: str = "shipped"
) -> Gate:
    """A logistic regression by Newton's method. Without a prior: on standardised signals,
    the weights held toward 0 by `l2`, the intercept free. With one: on the signals as they
    are, every parameter held toward the prior's by `l2`."""
    if len(y) == 0:
        raise InputError("no labelled examples to fit the gate on")
    if prior is None:
        mean, spread = x.mean(axis=0), x.std(axis=0)
        spread[spread == 0] = 1.0
        design = (x - mean) / spread
        centre = np.zeros(x.shape[1] + 1)
        penalty = np.full(x.shape[1] + 1, l2)
        penalty[0] = 1e-6  # the intercept: only enough to keep a one-class fit finite
    else:
        mean, spread = np.zeros(x.shape[1]), np.ones(x.shape[1])
        design = x
        centre = np.array([prior.intercept, *prior.weights])
        penalty = np.full(x.shape[1] + 1, l2)
    augmented = np.hstack([np.ones((len(y), 1)), design])
    theta = centre.copy()
    for _ in range(100):
        chance = 1.0 / (1.0 + np.exp(-(augmented @ theta)))
        gradient = augmented.T @ (chance - y) + penalty * (theta - centre)
        hessian = (augmented * (chance * (1 - chance))[:, None]).T @ augmented + np.diag(penalty)
        step = np.linalg.solve(hessian, gradient)
        theta -= step
        if float(np.abs(step).max()) < 1e-10:
            break
    weights = theta[1:] / spread
    intercept = float(theta[0] - weights @ mean)
    return Gate(
        intercept=round(intercept, 6),
        weights=tuple(round(float(w), 6) for w in weights),
        source=source,
    )


def out_of_fold(hits: Sequence[Labelled], l2: float) -> Matrix:
    """Each hit's probability from a fit that did not see its query's domain."""
    x, y = _design(hits)
    domains = np.array([h.domain for h in hits])
    chances = np.zeros(len(hits))
    for domain in sorted(set(domains)):
        held = domains == domain
        gate = fit_logistic(x[~held], y[~held], l2)
        chances[held] = gate.probabilities(x[held])
    return chances


def log_loss(chances: Matrix, y: Matrix) -> float:
    clipped = np.clip(chances, 1e-9, 1 - 1e-9)
    return float(-np.mean(y * np.log(clipped) + (1 - y) * np.log(1 - clipped)))


def figures(hits: Sequence[Labelled], keep: Sequence[bool]) -> dict[str, float]:
    """What a gate that keeps `keep` (aligned with `hits`) shows: the precision of the
    notes kept, the share of plans that get one, and the share of relevant hits kept."""
    plans: dict[str, bool] = defaultdict(bool)
    kept = relevant_kept = relevant = 0
    for hit, chosen in zip(hits, keep, strict=True):
        plans[hit.query] |= bool(chosen)
        kept += bool(chosen)
        relevant_kept += bool(chosen) and hit.relevant
        relevant += hit.relevant
    return {
        "precision": round(relevant_kept / kept, 3) if kept else 0.0,
        "plans_with_a_note": round(sum(plans.values()) / len(plans), 3) if plans else 0.0,
        "notes": kept,
        "notes_per_plan": round(kept / len(plans), 2) if plans else 0.0,
        "relevant_kept": round(relevant_kept / relevant, 3) if relevant else 0.0,
    }


def gate_keeps(
    hits: Sequence[Labelled], chances: Matrix, min_p: float, per_plan: bool = True
) -> list[bool]:
    """Which hits the gate puts before a model unasked at `min_p`: as the hook does, at most
    UNASKED_PER_PLAN of each query's (`per_plan`), or every one that reaches it."""
    if not per_plan:
        return [bool(c >= min_p) for c in chances]
    keep = [False] * len(hits)
    by_query: dict[str, list[int]] = defaultdict(list)
    for n, hit in enumerate(hits):
        by_query[hit.query].append(n)
    for rows in by_query.values():
        rows.sort(key=lambda n: hits[n].rank)
        for at in unasked_positions([float(chances[n]) for n in rows], min_p):
            keep[rows[at]] = True
    return keep


def curve(
    hits: Sequence[Labelled], chances: Matrix, per_plan: bool = True
) -> list[dict[str, float]]:
    """The gate's figures at every threshold of THRESHOLDS."""
    return [
        {"min_p": t, **figures(hits, gate_keeps(hits, chances, t, per_plan))} for t in THRESHOLDS
    ]


def choose_threshold(points: Sequence[dict[str, float]]) -> float:
    """The lowest threshold whose notes reach TARGET_PRECISION with at least MIN_COVERAGE
    of the plans getting one; else the most precise one that keeps MIN_COVERAGE."""
    covered = [p for p in points if p["plans_with_a_note"] >= MIN_COVERAGE]
    if not covered:
        raise InputError("no threshold leaves a note for half of the plans")
    good = [p for p in covered if p["precision"] >= TARGET_PRECISION]
    if good:
        return min(p["min_p"] for p in good)
    return max(covered, key=lambda p: (p["precision"], -p["min_p"]))["min_p"]


@dataclass(frozen=True)
class ShippedFit:
    """The fit `bench/relevance_floor.py --fit` ships, and how it was chosen."""

    gate: Gate
    l2: float
    min_p: float
    cross_validation: list[dict[str, float]]  # per L2 candidate: its out-of-fold log loss
    dev_curve: list[dict[str, float]]  # out-of-fold, at the chosen L2
    test_curve: list[dict[str, float]]  # the shipped gate on the test split
    # The same without the one-note rule: every note that reaches the threshold.
    dev_curve_every: list[dict[str, float]] = field(default_factory=list)
    test_curve_every: list[dict[str, float]] = field(default_factory=list)


def fit_shipped(hits: Sequence[Labelled]) -> ShippedFit:
    """Choose the penalty and the threshold on the dev hits, fit on all of dev, and score
    the test hits with the result."""
    dev = [h for h in hits if h.split == "dev"]
    test = [h for h in hits if h.split == "test"]
    _, y = _design(dev)
    scored = [(log_loss(out_of_fold(dev, l2), y), l2) for l2 in L2_GRID]
    l2 = min(scored)[1]
    dev_chances = out_of_fold(dev, l2)
    dev_curve = curve(dev, dev_chances)
    min_p = choose_threshold(dev_curve)
    x, y = _design(dev)
    gate = fit_logistic(x, y, l2)
    gate = Gate(
        gate.intercept,
        gate.weights,
        "shipped",
        f"the shipped evaluation set's dev split: {len(dev)} hits of {len({h.query for h in dev})}"
        f" plans, L2 {l2}",
    )
    tx, _ = _design(test)
    test_chances = gate.probabilities(tx)
    return ShippedFit(
        gate=gate,
        l2=l2,
        min_p=min_p,
        cross_validation=[{"l2": c, "log_loss": round(v, 4)} for v, c in scored],
        dev_curve=dev_curve,
        test_curve=curve(test, test_chances) if test else [],
        dev_curve_every=curve(dev, dev_chances, per_plan=False),
        test_curve_every=curve(test, test_chances, per_plan=False) if test else [],
    )


# -- tuning on a user's own verdicts ---------------------------------------------------------


@dataclass(frozen=True)
class Judged:
    """One judged recall of the user's: the hit's gate signals now, and the verdict."""

    session: str
    insight: str
    signals: tuple[float, ...]
    helped: bool


def judged_recalls(memory: Memory) -> list[Judged]:
    """The user's `helped` and `misled` verdicts that have a plan, the latest per session
    and insight, each with the gate's signals for its plan against the store as it is now
    (`not-used` says nothing about fit: a lesson can fit and not be needed)."""
    latest: dict[tuple[str, str], tuple[str, bool, npt.NDArray[np.float32]]] = {}
    # A verdict embedded by another model (before a reindex) comes without its vector.
    embedder = memory.embedder
    for entry, vector in memory.loop.ledger.verdict_vectors(embedder.name, embedder.dim):
        plan, rated = entry.plan, entry.verdict in ("helped", "misled")
        if rated and plan and vector is not None:
            latest[entry.insight, entry.session_id] = (plan, entry.verdict == "helped", vector)
    by_plan: dict[str, list[tuple[str, str, bool]]] = defaultdict(list)
    vectors: dict[str, npt.NDArray[np.float32]] = {}
    for (insight, session), (plan, helped, vector) in latest.items():
        by_plan[plan].append((session, insight, helped))
        vectors[plan] = vector
    found = []
    for plan, verdicts in by_plan.items():
        signals = memory.gate_signals(plan, [insight for _, insight, _ in verdicts], vectors[plan])
        found += [
            Judged(session, insight, tuple(signals[insight]), helped)
            for session, insight, helped in verdicts
            if insight in signals
        ]
    return found


def _fold(session: str) -> int:
    return int(hashlib.sha256(session.encode()).hexdigest()[:8], 16) % FOLDS


@dataclass(frozen=True)
class TuneReport:
    """What `tune gate` found: the current fit and the refit, and how each did on sessions
    it was not fitted on, at the user's threshold (the refit's figures are out-of-fold:
    each third of the sessions scored by a refit on the other two)."""

    judged: int
    sessions: int
    min_p: float
    before: Gate
    after: Gate | None  # None: too few judged recalls to tune on
    prior_l2: float | None  # the prior's strength cross-validation chose
    before_figures: dict[str, float]
    after_figures: dict[str, float]
    # The held-out log loss the refit gains over the current fit, in standard errors of its
    # per-session gain (each session's verdicts summed): how sure the gain is.
    gain_z: float | None = None

    @property
    def better(self) -> bool:
        """Whether the refit predicts the held-out verdicts better (log loss, by at least
        MIN_GAIN_Z standard errors) and its notes there are at least as precise, keeping at
        least half as many (precision first, but a gate that shows almost nothing is no
        gate)."""
        if self.after is None or self.gain_z is None:
            return False
        before, after = self.before_figures, self.after_figures
        return (
            self.gain_z >= MIN_GAIN_Z
            and after["precision"] >= before["precision"]
            and after["notes"] >= math.ceil(before["notes"] / 2)
        )


def _judged_figures(chances: Matrix, helped: Matrix, min_p: float) -> dict[str, float]:
    keep = chances >= min_p
    kept = int(keep.sum())
    good = helped.astype(bool)
    return {
        "precision": round(float(good[keep].mean()), 3) if kept else 0.0,
        "notes": kept,
        "helped_kept": round(float(keep[good].mean()), 3) if good.any() else 0.0,
        "log_loss": round(log_loss(chances, helped), 4),
    }


def tune(
    memory: Memory, judged: Sequence[Judged] | None = None, min_p: float | None = None
) -> TuneReport:
    """Refit the gate on the user's judged recalls (`judged_recalls` unless given), with the
    current gate as the prior: the prior's strength (PRIOR_GRID) is the one whose refits
    predict held-out sessions best (FOLDS folds by session), and the refit is on every
    judged recall. Nothing is written (`GateFile.write` applies it)."""
    judged = judged_recalls(memory) if judged is None else list(judged)
    threshold = memory.settings.auto_recall_min_p if min_p is None else min_p
    before = memory.gate.current()
    x = np.array([j.signals for j in judged], dtype=np.float64).reshape(len(judged), -1)
    y = np.array([j.helped for j in judged], dtype=np.float64)
    folds = np.array([_fold(j.session) for j in judged])
    sessions = len({j.session for j in judged})
    report = TuneReport(
        judged=len(judged),
        sessions=sessions,
        min_p=threshold,
        before=before,
        after=None,
        prior_l2=None,
        before_figures=_judged_figures(before.probabilities(x), y, threshold) if judged else {},
        after_figures={},
    )
    if len(judged) < MIN_JUDGED or len(set(folds)) < 2:
        return report
    best: tuple[float, float, Matrix] | None = None
    for l2 in PRIOR_GRID:
        chances = np.zeros(len(judged))
        for fold in sorted(set(folds)):
            held = folds == fold
            refit = fit_logistic(x[~held], y[~held], l2, prior=before)
            chances[held] = refit.probabilities(x[held])
        loss = log_loss(chances, y)
        if best is None or loss < best[0]:
            best = (loss, l2, chances)
    assert best is not None
    _, l2, chances = best
    fit = fit_logistic(x, y, l2, prior=before)
    after = Gate(
        fit.intercept,
        fit.weights,
        "tuned",
        f"{len(judged)} judged recalls of {sessions} sessions, from the {before.source} fit"
        f" (L2 {l2} toward it)",
    )
    return replace(
        report,
        after=after,
        prior_l2=l2,
        after_figures=_judged_figures(chances, y, threshold),
        gain_z=_gain_z(before.probabilities(x), chances, y, [j.session for j in judged]),
    )


def _gain_z(before: Matrix, after: Matrix, y: Matrix, sessions: Sequence[str]) -> float:
    """The mean per-session gain in log loss of `after` over `before`, in standard errors
    (sessions, not verdicts, are the independent units: a session's verdicts share a plan)."""

    def losses(chances: Matrix) -> Matrix:
        clipped = np.clip(chances, 1e-9, 1 - 1e-9)
        found: Matrix = -(y * np.log(clipped) + (1 - y) * np.log(1 - clipped))
        return found

    per_session: dict[str, float] = defaultdict(float)
    for session, gain in zip(sessions, losses(before) - losses(after), strict=True):
        per_session[session] += float(gain)
    gains = np.array(list(per_session.values()))
    if len(gains) < 2:
        return 0.0
    spread = float(gains.std(ddof=1))
    mean = float(gains.mean())
    if spread == 0:
        return math.inf if mean > 0 else 0.0
    return round(mean / (spread / math.sqrt(len(gains))), 3)


__all__ = [
    "MIN_GAIN_Z",
    "MIN_JUDGED",
    "Judged",
    "Labelled",
    "ShippedFit",
    "TuneReport",
    "choose_threshold",
    "curve",
    "figures",
    "fit_logistic",
    "fit_shipped",
    "gate_keeps",
    "judged_recalls",
    "labelled_hits",
    "log_loss",
    "out_of_fold",
    "tune",
]
