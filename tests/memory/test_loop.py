"""The closed loop inside `Memory`: recalls recorded with their origin, what a session was
given, verdicts with their plans, and feedback that leaves misleading lessons out."""

from __future__ import annotations

import pytest

from mtl_mcp import Memory
from mtl_mcp.index.gate import unasked
from mtl_mcp.index.methods import plan_vector
from mtl_mcp.schemas import RecallOrigin, VerdictEntry
from tests.conftest import distinct_lessons, lesson

DATES = "Reproduce the date bug with a test that pins the clock, then fix the range and rerun."
SHELL = "Quote every variable in the deploy shell script, then run shellcheck on it."
SQL = "Add an index for the slow report query and compare the query plans before and after."
UPLOAD = "Stream large file uploads to disk instead of reading them into memory at once."

WRONG = lesson(
    "Trust a green run after a clock change",
    "When a date-dependent test passes once after the clock was pinned, the fix is proven; "
    "skip the rest of the suite to save time.",
)


def test_a_recall_with_an_origin_is_recorded_and_makes_the_sessions_given(store: Memory) -> None:
    """Recalls for a session are in the ledger (after a flush) with the trigger and plan;
    what the session was given lists each insight once, with the latest plan."""
    store.record(distinct_lessons(30, offset=40))
    origin = RecallOrigin(session_id="s1", client="claude-code", trigger="tool")
    first = store.recall(DATES, origin=origin)
    hook = RecallOrigin(session_id="s1", trigger="hook")
    second = store.recall_for_session(SHELL, hook, min_p=0.0)  # its note, gate or not
    assert second is not None and not {h.id for h in first} & {h.id for h in second}
    assert store.loop.shown("s1") == {h.id for h in first + second}  # before any flush
    store.flush()
    [report] = store.sessions()
    assert [(r.trigger, r.plan) for r in report.recalls] == [("tool", DATES), ("hook", SHELL)]
    given = store.given_insights("s1")
    assert [g.id for g in given] == [h.id for h in first + second]
    assert {g.plan for g in given} == {DATES, SHELL}
    assert store.stats()["loop"]["recalls_by_trigger"] == {"tool": 1, "hook": 1}


def test_a_lesson_that_misled_a_plan_is_left_out_of_plans_like_it_only(store: Memory) -> None:
    """A misled verdict for a dates plan keeps the lesson out of a similar plan's recall,
    not out of a plan of another kind."""
    [wrong] = store.record([WRONG])
    store.record(distinct_lessons(20, offset=40))
    assert wrong.id in {h.id for h in store.recall(DATES, k=5)}
    store.record_verdicts(
        [
            VerdictEntry(
                session_id="s1",
                insight=str(wrong.id),
                verdict="misled",
                mode="false-confidence",
                plan=DATES,
            )
        ]
    )
    similar = "Pin the clock in the failing date test, fix the month range, then rerun."
    assert wrong.id not in {h.id for h in store.recall(similar, k=5)}
    feedback = store.loop.feedback(store.embedder.name, store.embedder.dim)
    assert feedback is not None
    assert str(wrong.id) in feedback.suppressed(plan_vector(store.embedder, similar, split=True))
    # A plan of another kind (cosine ~0 with the dates plan) does not leave it out.
    assert feedback.suppressed(plan_vector(store.embedder, UPLOAD, split=True)) == {}
    history = store.history(str(wrong.id))
    assert [(v.verdict, v.mode, v.plan) for v in history.verdicts] == [
        ("misled", "false-confidence", DATES)
    ]


def test_a_lesson_that_keeps_misleading_is_retired_with_the_reason_and_can_come_back(
    store: Memory,
) -> None:
    """Misled in three sessions with plans of three kinds: retired, the reason in its notes;
    `reinstate` brings it back and the old verdicts no longer count."""
    [wrong] = store.record([WRONG])
    store.record(distinct_lessons(10, offset=60))
    entries = [
        VerdictEntry(
            session_id=f"s{n}",
            insight=str(wrong.id),
            verdict="misled",
            mode="misapplied",
            plan=plan,
        )
        for n, plan in enumerate((DATES, SHELL, SQL))
    ]
    store.record_verdicts(entries)
    retired = store.get(str(wrong.id))
    assert retired.status == "retired"
    assert any(n.startswith("retired by session verdicts: misled 3 of 3") for n in retired.notes)
    assert wrong.id not in {h.id for h in store.recall(UPLOAD, k=20)}
    back = store.reinstate(str(wrong.id))
    assert back.status == "active" and back.notes[-1] == "reinstated by hand"
    assert wrong.id in {h.id for h in store.recall(WRONG["title"], k=3)}  # type: ignore[operator]


def test_purging_an_insight_removes_its_ledger_rows(store: Memory) -> None:
    [gone, kept] = store.record(distinct_lessons(2, offset=40))
    origin = RecallOrigin(session_id="s1", trigger="tool")
    store.recall("Isolate the flaky tests in a minimal reproduction.", origin=origin)
    store.record_verdicts([VerdictEntry(session_id="s1", insight=str(gone.id), verdict="helped")])
    store.flush()
    store.purge({str(gone.id)})
    assert store.history(str(gone.id)).verdicts == [] and store.history(str(gone.id)).recalls == []
    assert str(gone.id).encode() not in store.loop.ledger.path.read_bytes()
    assert [h.id for h in store.loop.ledger.recalls()[0].hits] == [kept.id]


def test_a_damaged_ledger_leaves_recall_working_and_feedback_back_once_it_is_remade(
    store: Memory,
) -> None:
    """The ledger holds only history: while its file is not SQLite, recall and the
    plan-triggered recall still answer (without a note twice in this process) and their
    recalls wait; once it is deleted, they are written and verdicts count again."""
    [wrong] = store.record([WRONG])
    store.record(distinct_lessons(20, offset=40))
    store.loop.ledger.path.write_bytes(b"not a database at all" * 200)
    assert wrong.id in {h.id for h in store.recall(DATES, k=5)}
    origin = RecallOrigin(session_id="s1", trigger="hook")
    first = store.recall_for_session(DATES, origin, min_p=0.0)
    again = store.recall_for_session(DATES, origin, min_p=0.0)
    assert first and again and not {h.id for h in first} & {h.id for h in again}
    store.flush()  # the ledger cannot take them: they wait
    store.loop.ledger.path.unlink()
    store.flush()
    assert [h.id for r in store.loop.ledger.recalls(session_id="s1") for h in r.hits] == [
        h.id for h in again + first
    ]
    misled = VerdictEntry(session_id="s1", insight=str(wrong.id), verdict="misled", plan=DATES)
    store.record_verdicts([misled])
    assert wrong.id not in {h.id for h in store.recall(DATES, k=5)}


def test_a_purge_reaches_the_recalls_not_yet_written(store: Memory) -> None:
    """A recall noted but not yet flushed holds its plan: a purge removes it there too, and
    the next flush (the service's, two seconds later) writes nothing of it back."""
    from mtl_mcp.operations.purge import literal_pattern, purge_pattern

    store.record(distinct_lessons(3, offset=40))
    secret = "sk-live-" + "7d2e9a14c3b8f056"
    origin = RecallOrigin(session_id="s-secret", client="claude-code", trigger="hook")
    store.recall(f"Rotate the key {secret} then rerun the flaky tests.", origin=origin)
    store.recall("Isolate the flaky tests in a minimal reproduction.", origin=origin)
    report = purge_pattern(store, literal_pattern("7d2e9a14c3b8f056"))
    store.flush()
    assert report.ledger_rows == 1
    assert b"7d2e9a14c3b8f056" not in store.loop.ledger.path.read_bytes()
    [session] = store.sessions()
    assert [r.plan for r in session.recalls] == [
        "Isolate the flaky tests in a minimal reproduction."
    ]


def test_forgetting_what_a_waiting_recall_gave_drops_its_plan_as_the_ledger_does(
    store: Memory,
) -> None:
    """A recall that gave only the purged insight goes, written or not (its plan matched
    it); one that gave others keeps them."""
    [gone, _] = store.record(distinct_lessons(2, offset=40))
    only = RecallOrigin(session_id="s-only", trigger="tool")
    store.recall(str(lesson_title(store, str(gone.id))), k=1, origin=only)
    hits = store.loop.session_recalls("s-only")[0].hits
    assert [h.id for h in hits] == [gone.id]
    store.purge({str(gone.id)})
    store.flush()
    assert store.loop.session_recalls("s-only") == []
    ledger = store.loop.ledger.path
    assert not ledger.exists() or str(gone.id).encode() not in ledger.read_bytes()


def lesson_title(store: Memory, insight_id: str) -> str:
    return store.get(insight_id).title


def test_a_recall_its_hook_gave_up_on_goes_out_at_the_next_try_unless_shown_since(
    store: Memory,
) -> None:
    """Past the hook's deadline a session's recall is not recorded but kept: the session's
    next try with the same plan gets those very notes (even with a better one stored
    meanwhile), once; if one of them was shown to the session since, it recalls afresh."""
    store.record(distinct_lessons(30, offset=40))
    hook = RecallOrigin(session_id="s1", trigger="hook")
    assert store.recall_for_session(DATES, hook, min_p=0.0, on_time=lambda: False) is None
    late = store.recall(DATES, k=3)
    store.flush()
    assert store.loop.ledger.recalls(session_id="s1") == []  # no model saw it
    [better] = store.record([lesson(DATES.split(",")[0], DATES)])
    assert store.recall(DATES, k=1)[0].id == better.id
    kept = store.recall_for_session(DATES, hook, min_p=0.0)
    assert kept is not None and [h.id for h in kept] == [h.id for h in unasked(late, 0.0)]
    assert better.id not in {h.id for h in kept}
    after = store.recall_for_session(DATES, hook, min_p=0.0)  # kept once: the next best now
    assert after is not None and not {h.id for h in after} & {h.id for h in kept}

    other = RecallOrigin(session_id="s2", trigger="hook")
    assert store.recall_for_session(SHELL, other, min_p=0.0, on_time=lambda: False) is None
    [first, *_] = store.recall(SHELL, k=3)
    store.recall(SHELL, k=1, origin=RecallOrigin(session_id="s2"))  # the model asked itself
    again = store.recall_for_session(SHELL, other, min_p=0.0)
    assert again is not None and first.id not in {h.id for h in again}


@pytest.mark.parametrize("how", ["purged", "retired"])
def test_a_kept_late_recall_never_brings_back_an_insight_gone_since(
    how: str, store: Memory
) -> None:
    """A recall kept for a session's next try (its hook gave up) does not outlive a purge
    or a retirement of one of its notes: the next try recalls afresh."""
    store.record(distinct_lessons(30, offset=40))
    hook = RecallOrigin(session_id="s1", trigger="hook")
    assert store.recall_for_session(DATES, hook, min_p=0.0, on_time=lambda: False) is None
    gone = store.recall(DATES, k=3)[0].id
    if how == "purged":
        store.purge([gone])
    else:
        store.retire(gone, "wrong")
    kept = store.recall_for_session(DATES, hook, min_p=0.0)
    assert kept and gone not in {h.id for h in kept}
    store.flush()
    ledger = store.loop.ledger.path
    assert how == "retired" or gone.encode() not in ledger.read_bytes()
