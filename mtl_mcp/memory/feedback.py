"""Session verdicts on recalled insights, turned into what recall should leave out.

At the end of a session the distillation judge says, for each insight the session was
given, whether it `helped`, was `not-used`, or `misled` (and how: the paper's three ways a
memory misleads). Each verdict keeps the plan the insight was recalled for, as its
embedding, because a lesson that misleads one kind of plan may be right for another.

Two uses, both explainable in one line:

- **suppressed(plan)**: leave an insight out of this recall when it misled plans related to
  this one more than it helped them. With w(c) a ramp from 0 at cosine `floor` to 1 at
  cosine `full`, the misled mass is M = sum of w(cos(plan, plan_j)) over the insight's
  misled verdicts j, and the helped mass H is the same over its helped verdicts; the
  insight is left out when M >= `suppress_at` and M > H. `not-used` verdicts count for
  neither side: a lesson that was not needed did no harm. So where a lesson has helped,
  helped verdicts on plans like this one keep it; elsewhere a misled verdict counts, the
  more the closer its plan.
- **keeps_misleading()**: retire an insight (reversibly, with the reason) that misled plans
  of `retire_kinds` or more different kinds, in more than half of the sessions it was given
  to: wrong wherever it lands, not a lesson that misfits one kind of task or that a judge
  blamed once. Two plans are of one kind when their cosine is at least `full`.

Plans of one kind score about 0.45-0.65 with the default model, a typical pair about 0.3.
The constants were chosen on the evaluation set's dev split (README, "Feedback from
session verdicts"): a wide ramp, so that one misled verdict counts for most plans, kept 19
of 27 misleading insights out of held-out dev plans where a narrow one (cosine 0.40-0.50)
kept 11, for up to two more good lessons pushed out over 36 plans with a judge wrong 10-30%
of the time; weighing every plan alike (no ramp) did no better, and then a helped verdict
keeps a lesson everywhere rather than where it helped. Recall pays one matrix product over
the plans of the insights that ever misled; insights that never misled cost nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from mtl_mcp.index.embedder import Vector
from mtl_mcp.schemas import MisledMode, VerdictKind

# Chosen on dev by two-fold cross-validation (bench/feedback.py); see the module docstring.
FLOOR = 0.05  # below this cosine (the least related ~5% of plan pairs) a verdict says nothing
FULL = 0.45  # at or above it plans are of one kind (~the top 10% of pairs): full weight
SUPPRESS_AT = 0.25  # misled mass that leaves an insight out: one verdict at cosine >= 0.15
RETIRE_KINDS = 3  # misled plans of this many different kinds (and most sessions) retire it


@dataclass(frozen=True)
class Verdict:
    """One judged use of an insight: what it did for the session's plan."""

    insight: str
    verdict: VerdictKind
    plan_vector: Vector  # unit norm: `mtl_mcp.index.methods.plan_vector(..., split=True)`
    session: str
    mode: MisledMode | None = None  # how it misled, for `misled` verdicts


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


class FeedbackIndex:
    """The verdicts of past sessions, indexed for recall.

    Only the insights with at least one `misled` verdict are indexed: their misled and
    helped plans are stacked into two matrices, so `suppressed` is two matrix-vector
    products and two bincounts, whatever the number of verdicts on other insights.
    A later verdict of the same session on the same insight replaces an earlier one.
    """

    def __init__(
        self,
        verdicts: Sequence[Verdict],
        *,
        floor: float = FLOOR,
        full: float = FULL,
        suppress_at: float = SUPPRESS_AT,
        retire_kinds: int = RETIRE_KINDS,
    ) -> None:
        if not -1.0 <= floor < full <= 1.0:
            raise ValueError(f"need -1 <= floor < full <= 1, got floor={floor}, full={full}")
        self.floor, self.full = floor, full
        self.suppress_at, self.retire_kinds = suppress_at, retire_kinds
        latest = {(v.insight, v.session): v for v in verdicts}
        misled_ids = sorted({v.insight for v in latest.values() if v.verdict == "misled"})
        self.ids = misled_ids
        position = {insight: n for n, insight in enumerate(misled_ids)}
        misled = [v for v in latest.values() if v.verdict == "misled"]
        helped = [v for v in latest.values() if v.verdict == "helped" and v.insight in position]
        self._misled_owner = np.array([position[v.insight] for v in misled], dtype=np.intp)
        self._misled_modes = [v.mode for v in misled]
        self._helped_owner = np.array([position[v.insight] for v in helped], dtype=np.intp)
        self._misled = _stack([v.plan_vector for v in misled])
        self._helped = _stack([v.plan_vector for v in helped])
        self._sessions = Counter(v.insight for v in latest.values() if v.insight in position)
        self._helped_total = Counter(v.insight for v in latest.values() if v.verdict == "helped")
        self._retired = self._retire()

    def _weights(self, plans: Vector, query: Vector) -> npt.NDArray[np.float64]:
        if not len(plans):
            return np.zeros(0)
        cosine = plans @ np.asarray(query, dtype=np.float32)
        ramp = (cosine.astype(np.float64) - self.floor) / (self.full - self.floor)
        return np.clip(ramp, 0.0, 1.0)

    def masses(self, query: Vector) -> dict[str, tuple[float, float]]:
        """(misled mass, helped mass) near the plan `query`, per insight that ever misled."""
        n = len(self.ids)
        misled = np.bincount(self._misled_owner, self._weights(self._misled, query), n)
        helped = np.bincount(self._helped_owner, self._weights(self._helped, query), n)
        return {i: (float(m), float(h)) for i, m, h in zip(self.ids, misled, helped, strict=True)}

    def suppressed(self, query: Vector) -> dict[str, str]:
        """Insights to leave out of a recall for the plan `query`, each with its reason."""
        if not self.ids:
            return {}
        n = len(self.ids)
        weights = self._weights(self._misled, query)
        misled = np.bincount(self._misled_owner, weights, n)
        helped = np.bincount(self._helped_owner, self._weights(self._helped, query), n)
        chosen = np.flatnonzero((misled >= self.suppress_at) & (misled > helped))
        reasons: dict[str, str] = {}
        for owner in chosen:
            near = np.flatnonzero((self._misled_owner == owner) & (weights > 0))
            closest = float(np.max(self._misled[near] @ np.asarray(query, dtype=np.float32)))
            modes = Counter(m for j in near if (m := self._misled_modes[j]) is not None)
            how = f" ({modes.most_common(1)[0][0]})" if modes else ""
            helped_near = int(
                np.count_nonzero(self._weights(self._helped[self._helped_owner == owner], query))
            )
            also = f"; helped {_plural(helped_near, 'related plan')}" if helped_near else ""
            reasons[self.ids[owner]] = (
                f"misled {_plural(len(near), 'earlier plan')}{how}, the closest at "
                f"similarity {closest:.2f}{also}"
            )
        return reasons

    def _retire(self) -> dict[str, str]:
        retired: dict[str, str] = {}
        for owner, insight in enumerate(self.ids):
            rows = np.flatnonzero(self._misled_owner == owner)
            kinds = _kinds(self._misled[rows], self.full)
            sessions = self._sessions[insight]
            if kinds < self.retire_kinds or 2 * len(rows) <= sessions:
                continue  # misled too few kinds of plan, or not most of the sessions it had
            modes = Counter(m for j in rows if (m := self._misled_modes[j]) is not None)
            how = f" ({modes.most_common(1)[0][0]})" if modes else ""
            retired[insight] = (
                f"misled {len(rows)} of {_plural(sessions, 'session')}, in {kinds} different "
                f"kinds of plan{how}; helped {self._helped_total[insight]}"
            )
        return retired

    def keeps_misleading(self) -> dict[str, str]:
        """Insights to retire for good (reversibly), each with its reason."""
        return dict(self._retired)


def _stack(vectors: Sequence[Vector]) -> Vector:
    if not vectors:
        return np.zeros((0, 0), dtype=np.float32)
    return np.vstack([np.asarray(v, dtype=np.float32) for v in vectors])


def _kinds(plans: Vector, same: float) -> int:
    """How many different kinds of plan: greedily, a plan starts a new kind unless its
    cosine with the first plan of an existing kind is at least `same`."""
    leaders: list[int] = []
    for n in range(len(plans)):
        if not leaders or float(np.max(plans[leaders] @ plans[n])) < same:
            leaders.append(n)
    return len(leaders)


__all__ = ["FeedbackIndex", "Verdict"]
