"""Curating by hand (the dashboard's needs): edit, retire, the browse filters, the preview."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import get_args

import pytest

from mtl_mcp import Memory
from mtl_mcp.errors import InputError
from mtl_mcp.schemas import Category, Polarity, Provenance, RecallOrigin, VerdictEntry
from tests.conftest import LEAKED, distinct_lessons, lesson

PLAN = "Write a failing test for the flaky tests, then fix their cause and rerun the suite."


@pytest.fixture
def filled(store: Memory) -> Memory:
    store.record(distinct_lessons(30), Provenance(project="p1", session_id="s1"))
    return store


def test_an_edit_keeps_the_id_support_and_ratings_and_is_embedded_again(filled: Memory) -> None:
    """The edited text is what recall matches now; the lesson's history stays with it."""
    target = filled.list(limit=1)[0][0]
    filled.rate(target.id, helpful=True)
    result = filled.revise(
        target.id,
        {
            "title": "Check the clock source before trusting timestamps",
            "content": "Before comparing timestamps across machines, check which clock "
            "produced each one and whether they are synchronised.",
        },
    )
    assert result.status == "stored" and result.id == target.id
    edited = filled.get(target.id)
    assert edited.title.startswith("Check the clock source")
    assert edited.helpful == 1 and edited.support == target.support
    assert edited.notes[-1] == "edited by hand"
    hits = filled.recall("Compare timestamps from two machines after checking their clocks.")
    assert hits[0].id == target.id
    assert len(filled.list(limit=100)[0]) == 30


def test_an_edit_the_lint_rejects_changes_nothing_and_says_why(filled: Memory) -> None:
    target = filled.list(limit=1)[0][0]
    result = filled.revise(target.id, {"content": f"Export AWS_ACCESS_KEY_ID={LEAKED} first."})
    assert result.status == "rejected" and result.reasons
    assert LEAKED not in " ".join(result.reasons)
    assert filled.get(target.id).content == target.content


def test_an_edit_into_another_insights_lesson_is_rejected(filled: Memory) -> None:
    first, second = filled.list(limit=2)[0]
    copy = {name: getattr(second, name) for name in ("title", "description", "content")}
    result = filled.revise(first.id, copy)
    assert result.status == "rejected"
    assert second.id in result.reasons[0]


def test_an_edit_that_clears_polarity_or_category_has_them_inferred_as_add_does(
    filled: Memory,
) -> None:
    """`add` infers a polarity or category left out; an edit that clears one (the dashboard
    sends null) must too, not store a null the schema refuses: that made the insight, and
    every list holding it, fail to load from then on."""
    target = filled.list(limit=1)[0][0]

    result = filled.revise(target.id, {"polarity": None, "category": None})

    assert result.status == "stored", result.reasons
    edited = filled.get(target.id)
    assert edited.polarity in get_args(Polarity) and edited.category in get_args(Category)
    assert len(filled.list(limit=100)[0]) == 30


def test_an_edit_of_an_unknown_field_is_refused(filled: Memory) -> None:
    target = filled.list(limit=1)[0][0]
    with pytest.raises(InputError, match="support"):
        filled.revise(target.id, {"support": 9})


def test_retire_by_hand_leaves_it_out_until_reinstated(filled: Memory) -> None:
    hit = filled.recall(PLAN, k=1)[0]
    retired = filled.retire(hit.id, "too vague")
    assert retired.status == "retired" and retired.notes[-1] == "retired by hand: too vague"
    assert hit.id not in {h.id for h in filled.recall(PLAN, k=5)}
    filled.reinstate(hit.id)
    assert filled.recall(PLAN, k=1)[0].id == hit.id


def test_browse_filters_by_words_rating_and_source(filled: Memory) -> None:
    items, total = filled.list(text="FLAKY verify", limit=50)
    assert total == 1 and "flaky" in items[0].title.lower()
    assert filled.list(text="flaky", limit=50)[1] == 10
    rated = filled.list(text="flaky", limit=1)[0][0]
    filled.rate(rated.id, helpful=False)
    assert [i.id for i in filled.list(rating="harmful")[0]] == [rated.id]
    assert filled.list(rating="unrated", limit=100)[1] == 29
    filled.retire(rated.id)
    assert [i.id for i in filled.list(rating="retired")[0]] == [rated.id]
    assert filled.list(source="team")[1] == 0
    assert filled.list(source="personal", limit=100)[1] == 29
    assert filled.list(sort="oldest", limit=1)[0][0].created_at <= datetime.now(UTC)


def test_the_preview_gives_recalls_hits_with_their_parts_and_counts_nothing(
    filled: Memory,
) -> None:
    preview = filled.preview(PLAN, k=3)
    assert [h.id for h in preview.hits] == [h.id for h in filled.recall(PLAN, k=3)]
    assert [p.id for p in preview.parts] == [h.id for h in preview.hits]
    first = preview.parts[0]
    assert first.dense_rank is not None and first.keyword_rank is not None
    expected = 1 / (60 + first.dense_rank) + 1 / (60 + first.keyword_rank)
    assert first.fused == pytest.approx(expected, abs=1e-6)
    fused = [p.fused for p in preview.parts]
    assert fused == sorted(fused, reverse=True)
    filled.flush()
    counted = filled.get(preview.hits[1].id).recall_count  # the one recall above, not the preview
    assert counted == 1


def test_the_preview_names_what_feedback_left_out_for_the_plan(filled: Memory) -> None:
    misled = filled.recall(PLAN, k=1)[0]
    origin = RecallOrigin(session_id="judged", trigger="tool")
    filled.recall(PLAN, k=1, origin=origin)
    filled.flush()
    filled.record_verdicts(
        [
            VerdictEntry(
                session_id=f"judged-{n}",
                insight=misled.id,
                verdict="misled",
                mode="misapplied",
                plan=PLAN,
            )
            for n in range(2)
        ]
    )
    preview = filled.preview(PLAN, k=3)
    assert misled.id not in [h.id for h in preview.hits]
    assert [o.id for o in preview.left_out] == [misled.id]
    assert "misled" in preview.left_out[0].reason


def test_editing_a_lesson_keeps_it_out_of_another_projects_lint(store: Memory) -> None:
    """An edit is linted like `add`: a path in the text is refused."""
    store.record([lesson("Keep scripts idempotent", "Rerunning a script must be safe.")])
    target = store.list()[0][0]
    result = store.revise(target.id, {"content": "Run /home/alice/work/app/deploy.sh twice."})
    assert result.status == "rejected"
