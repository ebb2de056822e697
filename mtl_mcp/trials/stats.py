"""The trial's statistics, on the standard library and numpy only (scipy checks them in the
tests, and is a development dependency only).

wilson       a pass rate's 95% Wilson score interval
mcnemar      the exact McNemar test: a two-sided binomial test on the discordant pairs
ratio_ci     a ratio of means (memory / none, tokens or time) with a bootstrap interval over
             tasks: paired resampling with a fixed seed, percentile method
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

Z95 = 1.959963984540054  # the standard normal's 97.5% quantile
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20_260_426  # fixed: the same runs always give the same interval


def wilson(passed: int, runs: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of `passed` successes in `runs` trials (95% by default);
    (0, 1) when there are no runs: nothing is known."""
    if runs <= 0:
        return 0.0, 1.0
    if not 0 <= passed <= runs:
        raise ValueError(f"passed={passed} is not between 0 and runs={runs}")
    rate = passed / runs
    z2 = z * z
    centre = (rate + z2 / (2 * runs)) / (1 + z2 / runs)
    half = z / (1 + z2 / runs) * math.sqrt(rate * (1 - rate) / runs + z2 / (4 * runs * runs))
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class McNemar:
    """Paired outcomes of arm A against arm B: `helped` pairs A passed and B failed,
    `hurt` the other way round; `p` the exact two-sided p-value (1.0 with no discordant
    pair: no evidence either way)."""

    helped: int
    hurt: int
    both_passed: int
    both_failed: int
    p: float

    @property
    def pairs(self) -> int:
        return self.helped + self.hurt + self.both_passed + self.both_failed


def binomial_two_sided(k: int, n: int) -> float:
    """The exact two-sided p-value of `k` successes in `n` fair coin flips: twice the
    smaller tail, at most 1 (for p = 1/2 this equals the minimum-likelihood method)."""
    if n == 0:
        return 1.0
    low = min(k, n - k)
    tail = sum(math.comb(n, i) for i in range(low + 1)) / 2**n
    return float(min(1.0, 2 * tail))


def mcnemar(pairs: Sequence[tuple[bool, bool]]) -> McNemar:
    """The exact McNemar test of (A passed, B passed) pairs."""
    helped = sum(1 for a, b in pairs if a and not b)
    hurt = sum(1 for a, b in pairs if b and not a)
    both_passed = sum(1 for a, b in pairs if a and b)
    both_failed = len(pairs) - helped - hurt - both_passed
    p = binomial_two_sided(helped, helped + hurt)
    return McNemar(helped, hurt, both_passed, both_failed, p)


@dataclass(frozen=True)
class Ratio:
    """A ratio of means with its 95% interval (None where it cannot be computed)."""

    ratio: float | None
    low: float | None
    high: float | None
    groups: int  # tasks that had runs in both arms


def ratio_ci(
    pairs: Sequence[tuple[Sequence[float], Sequence[float]]],
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> Ratio:
    """mean(A) / mean(B) over every run, with a bootstrap 95% interval that resamples the
    *tasks* (each pair is one task's A runs and B runs): runs of one task are not
    independent, tasks are. Percentile method, a fixed seed."""
    import numpy as np

    groups = [(list(a), list(b)) for a, b in pairs if a and b]
    if not groups:
        return Ratio(None, None, None, 0)
    sums = np.array([[sum(a), len(a), sum(b), len(b)] for a, b in groups], dtype=np.float64)

    def ratio_of(rows: np.ndarray) -> np.ndarray:
        mean_a = rows[..., 0].sum(axis=-1) / rows[..., 1].sum(axis=-1)
        mean_b = rows[..., 2].sum(axis=-1) / rows[..., 3].sum(axis=-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            result: np.ndarray = mean_a / mean_b
        return result

    point = float(ratio_of(sums))
    if not math.isfinite(point):
        return Ratio(None, None, None, len(groups))
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(groups), size=(resamples, len(groups)))
    draws = ratio_of(sums[picks])
    draws = draws[np.isfinite(draws)]
    if len(groups) < 2 or draws.size == 0:
        return Ratio(point, None, None, len(groups))
    low, high = np.percentile(draws, [2.5, 97.5])
    return Ratio(point, float(low), float(high), len(groups))
