"""Feedback from session verdicts: the arithmetic on real plan vectors, and the simulation."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from mtl_mcp.cli import cli
from mtl_mcp.config import load_settings
from mtl_mcp.index.embedder import Vector, get_embedder
from mtl_mcp.index.methods import plan_vector
from mtl_mcp.memory.feedback import FULL, FeedbackIndex, Verdict
from mtl_mcp.quality.evaluation import load_pool, load_queries, shipped_set
from mtl_mcp.quality.feedback_eval import FeedbackResult, load_planted, shipped_planted

# Two plans of one kind (reproduce a reported bug, fix it at its source)...
BUG = (
    "Reproduce the reported bug with a failing test for the exact input. Trace the wrong "
    "value back to where it is produced and fix it there. Run the whole test suite."
)
BUG_AGAIN = (
    "Write a failing test that reproduces the reported wrong output first. Find where the "
    "bad value comes from and make a minimal fix at that point. Rerun the full test suite."
)
# ...and plans of other kinds.
FIRMWARE = (
    "Measure the board's current draw over a full sleep and wake cycle. Lower the sensor "
    "sampling rate and the radio duty cycle one at a time, measuring after each change."
)
MIGRATION = (
    "Add the new column as nullable and backfill it in small batches. Enforce the "
    "constraint only after the backfill, and rehearse the whole migration on a copy."
)
ONBOARDING = (
    "Draw the onboarding screens for a small tablet in landscape. Pick fonts and colours "
    "from the design system and ask the designer to review the mock-ups."
)


@pytest.fixture(scope="module")
def plans(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Vector]:
    embedder = get_embedder(load_settings(tmp_path_factory.mktemp("feedback-model")))
    texts = {
        "bug": BUG,
        "bug_again": BUG_AGAIN,
        "firmware": FIRMWARE,
        "migration": MIGRATION,
        "onboarding": ONBOARDING,
    }
    return {name: plan_vector(embedder, text, split=True) for name, text in texts.items()}


def cosine(a: Vector, b: Vector) -> float:
    return float(a @ b)


def misled(insight: str, plan: Vector, session: str, mode: str = "misapplied") -> Verdict:
    return Verdict(insight, "misled", plan, session, mode)  # type: ignore[arg-type]


def test_the_example_plans_are_as_alike_as_the_tests_assume(plans: dict[str, Vector]) -> None:
    """The arithmetic below depends on these similarities: same kind vs other kinds."""
    assert cosine(plans["bug"], plans["bug_again"]) >= FULL
    others = ("firmware", "migration", "onboarding")
    for a in ("bug", *others):
        for b in others:
            if a != b:
                assert cosine(plans[a], plans[b]) < FULL, (a, b)


def test_a_lesson_that_misled_a_similar_plan_is_left_out_with_the_reason(
    plans: dict[str, Vector],
) -> None:
    index = FeedbackIndex([misled("lesson", plans["bug"], "s1")])
    reasons = index.suppressed(plans["bug_again"])
    assert set(reasons) == {"lesson"}
    closeness = cosine(plans["bug"], plans["bug_again"])
    assert reasons["lesson"] == (
        f"misled 1 earlier plan (misapplied), the closest at similarity {closeness:.2f}"
    )
    assert index.keeps_misleading() == {}  # one misled session retires nothing


def test_a_misled_verdict_on_an_unrelated_plan_does_not_count(plans: dict[str, Vector]) -> None:
    """A migration plan says nothing about firmware or screen design (cosine < 0.1), and
    counts more for a plan the closer it is."""
    index = FeedbackIndex([misled("lesson", plans["migration"], "s1")])
    assert cosine(plans["migration"], plans["firmware"]) < 0.1
    assert index.suppressed(plans["firmware"]) == {}
    assert index.suppressed(plans["onboarding"]) == {}
    assert set(index.suppressed(plans["migration"])) == {"lesson"}
    masses = [index.masses(plans[p])["lesson"][0] for p in ("migration", "bug", "firmware")]
    assert masses[0] > masses[1] > masses[2]


def test_a_helped_verdict_on_a_plan_like_this_one_keeps_the_lesson(
    plans: dict[str, Vector],
) -> None:
    """A lesson that misled a migration but helped a bug fix stays for bug fixes only."""
    verdicts = [
        misled("lesson", plans["migration"], "s1"),
        Verdict("lesson", "helped", plans["bug_again"], "s2"),
    ]
    index = FeedbackIndex(verdicts)
    assert index.suppressed(plans["bug"]) == {}
    assert index.suppressed(plans["bug_again"]) == {}
    reasons = index.suppressed(plans["migration"])
    assert set(reasons) == {"lesson"}
    assert reasons["lesson"].endswith("; helped 1 related plan")
    misled_mass, helped_mass = index.masses(plans["migration"])["lesson"]
    assert misled_mass > helped_mass > 0


def test_not_used_verdicts_neither_protect_nor_condemn(plans: dict[str, Vector]) -> None:
    quiet = [Verdict("lesson", "not-used", plans["bug"], f"n{n}") for n in range(5)]
    assert FeedbackIndex(quiet).suppressed(plans["bug"]) == {}
    assert FeedbackIndex(quiet).ids == []  # never misled: not indexed, costs nothing
    index = FeedbackIndex([*quiet, misled("lesson", plans["bug"], "s1")])
    assert set(index.suppressed(plans["bug_again"])) == {"lesson"}


def test_a_lesson_that_keeps_misleading_different_plans_is_retired(
    plans: dict[str, Vector],
) -> None:
    kinds = ("bug", "firmware", "migration")
    verdicts = [misled("bad", plans[k], f"s{n}", "false-confidence") for n, k in enumerate(kinds)]
    verdicts.append(Verdict("good", "helped", plans["bug"], "s0"))
    retired = FeedbackIndex(verdicts).keeps_misleading()
    assert retired == {
        "bad": "misled 3 of 3 sessions, in 3 different kinds of plan (false-confidence); helped 0"
    }


def test_misleading_one_kind_of_plan_suppresses_but_does_not_retire(
    plans: dict[str, Vector],
) -> None:
    same_kind = [misled("narrow", plans[k], f"s{n}") for n, k in enumerate(("bug", "bug_again"))]
    index = FeedbackIndex(same_kind * 2)  # the same sessions twice: still two verdicts
    assert index.keeps_misleading() == {}
    assert "misled 2 earlier plans" in index.suppressed(plans["bug"])["narrow"]


def test_a_lesson_mostly_fine_is_not_retired_for_a_few_misled_sessions(
    plans: dict[str, Vector],
) -> None:
    """Misled in three kinds of plan, but in 3 of 7 sessions: a noisy judge, not a bad
    lesson; it may still be left out where it misled."""
    kinds = ("bug", "firmware", "migration")
    verdicts = [misled("hub", plans[k], f"m{n}") for n, k in enumerate(kinds)]
    verdicts += [Verdict("hub", "not-used", plans["onboarding"], f"n{n}") for n in range(4)]
    index = FeedbackIndex(verdicts)
    assert index.keeps_misleading() == {}
    assert "hub" in index.suppressed(plans["firmware"])


def test_a_later_verdict_of_the_same_session_replaces_the_earlier(
    plans: dict[str, Vector],
) -> None:
    verdicts = [
        misled("lesson", plans["bug"], "s1"),
        Verdict("lesson", "helped", plans["bug"], "s1"),
    ]
    assert FeedbackIndex(verdicts).suppressed(plans["bug"]) == {}


def test_no_verdicts_suppress_nothing(plans: dict[str, Vector]) -> None:
    index = FeedbackIndex([])
    assert index.suppressed(plans["bug"]) == {}
    assert index.keeps_misleading() == {}
    with pytest.raises(ValueError, match="floor < full"):
        FeedbackIndex([], floor=0.5, full=0.5)
    assert np.isclose(float(plans["bug"] @ plans["bug"]), 1.0, atol=1e-5)


def test_the_shipped_planted_set_passes_the_lint_and_names_real_queries() -> None:
    pool_path, queries_path = shipped_set()
    pool = load_pool(pool_path)
    planted = load_planted(shipped_planted(), pool, load_queries(queries_path, pool))
    assert 12 <= len(planted) <= 20
    assert {p.mode for p in planted} == {"domain-mismatch", "false-confidence", "misapplied"}
    assert any(p.helps for p in planted)  # best practices misapplied elsewhere


def _slice(tmp_path: Path) -> tuple[Path, Path, Path]:
    """Five shipped queries about fixing a reported bug (three dev, two test), the planted
    lesson that says to skip reproducing it, and the pool items those queries need plus
    other domains' lessons about the same habits, as competition."""
    pool_path, queries_path = shipped_set()
    wanted = {"q001", "q037", "q061", "q038", "q040"}
    queries = [
        json.loads(line)
        for line in queries_path.read_text().splitlines()
        if json.loads(line)["id"] in wanted
    ]
    needed = {r for q in queries for r in q["relevant"]}
    pool = [json.loads(line) for line in pool_path.read_text().splitlines()]
    keep = [p for n, p in enumerate(pool) if p["id"] in needed or n % 3 == 0]
    planted = [
        json.loads(line)
        for line in shipped_planted().read_text().splitlines()
        if json.loads(line)["id"] == "x02"
    ]
    planted[0]["targets"] = [t for t in planted[0]["targets"] if t in wanted]
    paths = []
    for name, rows in (("pool", keep), ("queries", queries), ("planted", planted)):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
        paths.append(path)
    return paths[0], paths[1], paths[2]


def test_the_simulation_keeps_a_planted_lesson_out_of_unseen_plans(tmp_path: Path) -> None:
    """`mtl-mcp eval --feedback --planted FILE` on a slice: the planted lesson misleads the
    dev sessions, reaches both test plans without feedback, and none with it."""
    pool, queries, planted = _slice(tmp_path)
    args = ["eval", "--feedback", "--pool", str(pool), "--queries", str(queries)]
    result = CliRunner().invoke(cli, [*args, "--planted", str(planted), "--json"])
    assert result.exit_code == 0, result.output
    outcome = FeedbackResult.model_validate_json(result.stdout)
    test = next(c for c in outcome.comparisons if c.scored == "test")
    assert outcome.planted == 1 and outcome.verdicts["misled"] >= 2
    assert test.off.planted_on_targets == 2
    assert test.on.planted_on_targets == 0
    assert test.on.precision_at_k >= test.off.precision_at_k
    assert outcome.retired or test.on.left_out >= 1


def test_feedback_options_go_together() -> None:
    result = CliRunner().invoke(cli, ["eval", "--noise", "0.1"])
    assert result.exit_code == 2 and "go with --feedback" in result.output
    result = CliRunner().invoke(cli, ["eval", "--feedback", "--compare"])
    assert result.exit_code == 2 and "drop --compare" in result.output
