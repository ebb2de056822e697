"""The relevance gate's fit: the shipped constants are what the fit on the dev split gives,
its probabilities are what recall reports, and tuning on a noisy judge's verdicts never
makes the notes shown on the test split less precise."""

from __future__ import annotations

import random
from collections.abc import Iterator

import numpy as np
import pytest

from mtl_mcp.config import load_settings
from mtl_mcp.index.gate import SIGNALS, Gate, shipped_gate
from mtl_mcp.quality.evaluation import EvalStore, load_pool, load_queries, shipped_set
from mtl_mcp.quality.evaluation import throwaway_store as eval_store
from mtl_mcp.quality.gate_fit import (
    Judged,
    Labelled,
    figures,
    fit_logistic,
    fit_shipped,
    gate_keeps,
    labelled_hits,
    tune,
)

pytestmark = pytest.mark.slow

NOISE = 0.1  # the share of verdicts the simulated judge gets wrong
SEEDS = 20


@pytest.fixture(scope="module")
def evaluated() -> Iterator[tuple[EvalStore, list[Labelled]]]:
    pool_path, queries_path = shipped_set()
    pool = load_pool(pool_path)
    with eval_store(pool) as evalset:
        yield evalset, labelled_hits(evalset, load_queries(queries_path, pool))


def test_the_shipped_gate_is_the_fit_on_the_dev_split(
    evaluated: tuple[EvalStore, list[Labelled]],
) -> None:
    """`bench/relevance_floor.py --fit` regenerates the constants: a fit now gives them
    (to within what a slightly different embedding runtime moves), and the default
    threshold is the one the dev split chose."""
    _, hits = evaluated
    fit = fit_shipped(hits)
    shipped = shipped_gate()
    assert fit.gate.intercept == pytest.approx(shipped.intercept, abs=0.05)
    assert fit.gate.weights == pytest.approx(shipped.weights, abs=0.05)
    assert fit.min_p == load_settings(evaluated[0].memory.settings.home).auto_recall_min_p
    dev = [h for h in hits if h.split == "dev"]
    assert len(dev) == 108 and {len(h.signals) for h in dev} == {len(SIGNALS)}


def test_recall_reports_the_gates_probability_of_its_signals(
    evaluated: tuple[EvalStore, list[Labelled]],
) -> None:
    """Each hit's p is the shipped gate's probability of the signals its parts show."""
    evalset, _ = evaluated
    preview = evalset.memory.preview("Reproduce the failing import on a small file first.")
    x = np.array([[part.signals[n] for n in SIGNALS] for part in preview.parts])
    assert [h.p for h in preview.hits] == pytest.approx(shipped_gate().probabilities(x), abs=1e-4)
    assert [h.p for h in preview.hits] == [part.p for part in preview.parts]


def test_a_refit_with_a_prior_stays_near_it_and_without_one_fits_the_data() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 2))
    y = (rng.random(400) < 1 / (1 + np.exp(-(x @ [2.0, -1.0] + 0.5)))).astype(float)
    free = fit_logistic(x, y, l2=1e-3)
    assert free.weights == pytest.approx((2.0, -1.0), abs=0.4)
    prior = Gate(intercept=-3.0, weights=(0.0, 0.0))
    held = fit_logistic(x, y, l2=1e6, prior=prior)
    assert held.intercept == pytest.approx(-3.0, abs=0.01)
    assert held.weights == pytest.approx((0.0, 0.0), abs=0.01)


def test_tuning_on_a_noisy_judges_dev_verdicts_never_makes_test_notes_less_precise(
    evaluated: tuple[EvalStore, list[Labelled]],
) -> None:
    """From the shipped fit, `tune` on the dev split's top 3 judged by a judge wrong 10% of
    the time (as session verdicts, each query a session), for 20 draws of the judge: the
    gate in effect afterwards (the refit when it earns its place, else the shipped fit)
    shows test notes (one a plan, as the hook shows them) at least as precise as the shipped
    fit's. The shipped fit was fitted on these very plans, so a refit can only learn the
    judge's noise: none earns its place, though refits that would have lowered test
    precision are among them (a gain in held-out log loss alone let 2 through, one of them
    down from 0.65 to 0.60). Tuning that does learn: `test_tune_gate.py`."""
    evalset, hits = evaluated
    dev = [h for h in hits if h.split == "dev"]
    test = [h for h in hits if h.split == "test"]
    x = np.array([h.signals for h in test])
    min_p = evalset.memory.settings.auto_recall_min_p

    def precision(gate: Gate) -> float:  # of the notes the hook would show: one a plan
        return figures(test, gate_keeps(test, gate.probabilities(x), min_p))["precision"]

    shipped = precision(shipped_gate())
    worse = 0
    for seed in range(SEEDS):
        judge = random.Random(seed)
        judged = [
            Judged(
                f"dev-{h.query}", h.parts["id"], h.signals, h.relevant != (judge.random() < NOISE)
            )
            for h in dev
        ]
        report = tune(evalset.memory, judged=judged)
        assert report.after is not None and report.judged == len(dev)
        in_effect = report.after if report.better else report.before
        assert precision(in_effect) >= shipped, (seed, report)
        assert report.gain_z is not None and not report.better, (seed, report)
        worse += precision(report.after) < shipped
    assert worse  # the draws include refits that would have hurt
