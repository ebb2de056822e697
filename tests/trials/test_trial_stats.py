"""The trial's statistics against scipy.stats' reference values (scipy: a dev dependency)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as reference

from mtl_mcp.trials.stats import binomial_two_sided, mcnemar, ratio_ci, wilson


@pytest.mark.parametrize(
    ("passed", "runs"), [(0, 1), (1, 1), (0, 10), (3, 10), (5, 10), (10, 10), (17, 30), (1, 200)]
)
def test_wilson_matches_scipy(passed: int, runs: int) -> None:
    """Wilson's 95% interval equals scipy's binomtest(...).proportion_ci(method='wilson')."""
    low, high = wilson(passed, runs)
    expected = reference.binomtest(passed, runs).proportion_ci(0.95, method="wilson")
    assert low == pytest.approx(expected.low, abs=1e-9)
    assert high == pytest.approx(expected.high, abs=1e-9)


def test_wilson_with_no_runs_knows_nothing() -> None:
    assert wilson(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson(4, 3)


@pytest.mark.parametrize(
    ("k", "n"), [(0, 0), (0, 1), (0, 6), (6, 6), (1, 7), (3, 7), (2, 20), (27, 34), (50, 100)]
)
def test_exact_binomial_matches_scipy(k: int, n: int) -> None:
    """The two-sided exact p of k of n fair flips equals scipy's binomtest (p = 1/2)."""
    expected = 1.0 if n == 0 else reference.binomtest(k, n, 0.5).pvalue
    assert binomial_two_sided(k, n) == pytest.approx(expected, rel=1e-12)


def test_mcnemar_counts_the_discordant_pairs_and_tests_them_exactly() -> None:
    """helped = A passed and B failed; hurt = the reverse; p is scipy's exact binomial test
    on those two counts (the concordant pairs carry no information)."""
    pairs = [(True, False)] * 7 + [(False, True)] * 1 + [(True, True)] * 9 + [(False, False)] * 3
    test = mcnemar(pairs)
    assert (test.helped, test.hurt, test.both_passed, test.both_failed) == (7, 1, 9, 3)
    assert test.pairs == 20
    assert test.p == pytest.approx(reference.binomtest(7, 8, 0.5).pvalue)
    # The paper's public A/B figure: 27 helped against 7 hurt, p = 0.0008.
    assert mcnemar([(True, False)] * 27 + [(False, True)] * 7).p == pytest.approx(0.0008, abs=5e-5)
    assert mcnemar([(True, True)] * 5).p == 1.0  # no discordant pair: no evidence


def test_six_one_sided_pairs_are_the_fewest_that_reach_five_percent() -> None:
    assert mcnemar([(True, False)] * 5).p > 0.05
    assert mcnemar([(True, False)] * 6).p < 0.05


def test_ratio_interval_agrees_with_scipy_bootstrap() -> None:
    """The ratio of means with its bootstrap over tasks matches scipy.stats.bootstrap
    (paired resampling of the tasks, percentile method) up to resampling noise."""
    rng = np.random.default_rng(7)
    tasks = 25
    base = rng.uniform(1000, 5000, size=tasks)
    with_memory = base * rng.uniform(1.05, 1.35, size=tasks)
    pairs = [([float(m)], [float(b)]) for m, b in zip(with_memory, base, strict=True)]
    ours = ratio_ci(pairs, resamples=4000)
    assert ours.ratio == pytest.approx(with_memory.mean() / base.mean())

    def ratio(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.mean(a, axis=axis) / np.mean(b, axis=axis)

    theirs = reference.bootstrap(
        (with_memory, base), ratio, paired=True, vectorized=True, n_resamples=4000,
        method="percentile", random_state=np.random.default_rng(1),
    ).confidence_interval  # fmt: skip
    assert ours.low == pytest.approx(theirs.low, abs=0.01)
    assert ours.high == pytest.approx(theirs.high, abs=0.01)
    assert ours.low < ours.ratio < ours.high


def test_ratio_resamples_tasks_not_runs_and_is_reproducible() -> None:
    """Several runs of a task move together: the interval resamples tasks whole, so it is
    wider than if runs were independent; the same runs always give the same interval."""
    pairs = [([100.0 * k, 100.0 * k], [90.0 * k, 90.0 * k]) for k in range(1, 9)]
    first, second = ratio_ci(pairs), ratio_ci(pairs)
    assert first == second
    assert first.ratio == pytest.approx(100 / 90)
    assert first.groups == 8
    assert ratio_ci([([], [1.0])]).ratio is None
    assert ratio_ci([([1.0], [0.0])]).ratio is None  # a zero baseline: no ratio
