"""Consolidation: paraphrases merged into the best wording with everything they carried,
superseded lessons and unused ones retired, contradictions flagged and never merged, every
run undone exactly; on the real model and LanceDB, with a simulated clock."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mtl_mcp import Memory
from mtl_mcp.config import load_settings
from mtl_mcp.errors import InputError
from mtl_mcp.quality.evaluation import load_pool, shipped_set
from mtl_mcp.schemas import InsightDraft, Provenance, RecallOrigin, VerdictEntry


def draft(title: str, description: str, content: str) -> dict[str, Any]:
    return {"title": title, "description": description, "content": content}


# Three sessions' wordings of one lesson: cosine 0.83-0.86 with the default model, below
# write-time dedup (0.92): three rows until a pass merges them.
WORDINGS = [
    draft(
        "Reproduce a failure with a test before fixing it",
        "When a bug report describes wrong behaviour.",
        "Write a test that shows the reported failure and watch it fail before touching the "
        "code. The failing test proves the report is understood, and later proves the fix.",
    ),
    draft(
        "Write a failing test for a reported bug first",
        "Applies when someone reports that the code misbehaves.",
        "Before changing any code, capture the reported behaviour in an automated test and "
        "see it fail. It shows the problem is understood, and the same test confirms the "
        "repair.",
    ),
    draft(
        "Capture a reported bug in a failing test before the fix",
        "Useful when a user says a feature gives the wrong result.",
        "A fix made without reproducing the report first fixed the wrong thing. Turn the "
        "report into a test, see it fail, then change the code until it passes.",
    ),
]
# Two lessons as close as paraphrases (cosine 0.84), each right in its own scope.
SCOPED = [
    draft(
        "Retry idempotent requests automatically on timeout",
        "When a client calls a service that sometimes times out under load.",
        "Retry reads and other idempotent requests automatically, with backoff and a limit on "
        "attempts. A timeout on such a request is usually transient, and a retry costs "
        "nothing when the first attempt did get through.",
    ),
    draft(
        "Never retry non-idempotent requests automatically",
        "When a client sends payments, orders or other requests with side effects.",
        "An automatic retry of a payment request that had in fact succeeded charged the "
        "customer twice. Never retry a request with side effects blindly: make it idempotent "
        "with a key first, or surface the timeout to the caller.",
    ),
]
# An old flag and the lesson that says it changed: cosine 0.94, above write-time dedup.
OLD_FLAG = draft(
    "Install CI dependencies with `yarn install --frozen-lockfile`",
    "When a continuous-integration job installs the JavaScript dependencies.",
    "Run `yarn install --frozen-lockfile` in CI so the job fails when the lock file is out "
    "of date and leaves it untouched.",
)
NEW_FLAG = draft(
    "Use `yarn install --immutable` in CI instead of `--frozen-lockfile`",
    "When a continuous-integration job installs the JavaScript dependencies.",
    "In CI, install with `yarn install --immutable`: the `--frozen-lockfile` flag was "
    "deprecated and no longer stops the lock file from being rewritten.",
)
PLAN = (
    "A user reports a wrong total on the invoice page. First reproduce the report with a "
    "failing test, then fix the calculation and rerun the suite."
)
START = datetime(2025, 3, 3, 9, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now

    def days(self, count: float) -> None:
        self.now += timedelta(days=count)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def memory(tmp_path: Path, clock: Clock) -> Iterator[Memory]:
    opened = Memory(load_settings(tmp_path / "home", retire_unused_days=90), clock=clock)
    yield opened
    opened.close()


def other_lessons(count: int, offset: int = 0) -> list[dict[str, Any]]:
    """Lessons of the shipped evaluation pool: distinct (no two above cosine 0.66), unlike
    the tests' templated `distinct_lessons`, which differ in one word and sit up to 0.89."""
    pool = load_pool(shipped_set()[0])[offset : offset + count]
    return [item.draft.model_dump(exclude_none=True) for item in pool]


def record(memory: Memory, drafts: list[dict[str, Any]], project: str, session: str) -> list[str]:
    results = memory.record(drafts, Provenance(project=project, session_id=session))
    assert all(r.status == "stored" for r in results), [r.status for r in results]
    return [r.id for r in results if r.id]


def test_the_wordings_of_a_lesson_are_paraphrases_that_write_time_dedup_misses(
    memory: Memory,
) -> None:
    """The premise of the tests below, checked on the real model."""
    vectors = memory.embedder.embed_documents(
        [InsightDraft.model_validate(d).embedding_text() for d in WORDINGS]
    )
    sims = (vectors @ vectors.T)[np.triu_indices(3, 1)]
    assert (sims >= 0.80).all() and (sims < 0.92).all(), sims


def test_paraphrases_merge_into_the_best_with_support_ratings_projects_and_verdicts(
    memory: Memory, clock: Clock
) -> None:
    ids = [
        record(memory, [wording], f"project-{n}", f"s{n}")[0] for n, wording in enumerate(WORDINGS)
    ]
    others = record(memory, other_lessons(20), "project-x", "s9")
    memory.rate(ids[1], helpful=True)
    memory.rate(ids[2], helpful=False)
    hook = RecallOrigin(session_id="s10", trigger="hook")
    given = memory.recall_for_session(PLAN, hook, min_p=0.0)  # the gate opened: a use
    assert given is not None and {h.id for h in given} & set(ids)
    memory.record_verdicts(
        [
            VerdictEntry(session_id="s10", insight=h.id, verdict="helped", plan=PLAN, at=clock())
            for h in given
        ]
    )
    memory.flush()

    run = memory.consolidate()

    assert len(run.merged) == 1 and not run.superseded and not run.retired
    kept, members = run.merged[0]
    assert sorted([kept, *members]) == sorted(ids)
    best = memory.get(kept)
    assert best.status == "active"
    assert best.support == 3 and best.helpful == 1 and best.harmful == 1
    assert set(best.projects) == {"project-0", "project-1", "project-2"}
    assert f"consolidation {run.run}" in best.notes[-1]
    for member in members:
        gone = memory.get(member)
        assert gone.status == "retired" and f"merged into {kept}" in gone.notes[-1]
    # The verdicts and recalls of the members now belong to the kept one.
    history = memory.history(kept)
    assert {v.insight for v in history.verdicts} == {kept}
    assert len(history.verdicts) == sum(h.id in ids for h in given)
    assert not memory.history(members[0]).verdicts
    hits = memory.recall(PLAN, k=3)
    assert [h.id for h in hits].count(kept) == 1
    assert not {h.id for h in hits} & set(members)
    assert all(memory.get(i).status == "active" for i in others)
    # The next pass finds nothing more to do.
    assert not memory.consolidate().changes


def test_undo_puts_every_row_and_ledger_row_back_and_keeps_what_came_since(
    memory: Memory, clock: Clock
) -> None:
    ids = [record(memory, [w], f"p{n}", f"s{n}")[0] for n, w in enumerate(WORDINGS)]
    memory.recall_for_session(PLAN, RecallOrigin(session_id="s5", trigger="hook"), min_p=0.0)
    memory.record_verdicts(
        [VerdictEntry(session_id="s5", insight=i, verdict="helped", plan=PLAN) for i in ids]
    )
    memory.rate(ids[1], helpful=True)
    memory.rate(ids[2], helpful=False)
    memory.flush()
    before = {i: memory.get(i) for i in ids}
    run = memory.consolidate()
    kept, _ = run.merged[0]
    assert memory.get(kept).helpful == 1 and memory.get(kept).harmful == 1
    memory.rate(kept, helpful=True)  # after the run: it stays after the undo

    undone = memory.undo_consolidation(run.run)

    assert undone.undone_at is not None
    for insight in ids:
        now = memory.get(insight)
        assert now.status == "active"
        assert now.support == before[insight].support
        assert now.projects == before[insight].projects
        assert (now.recall_count, now.tags, now.session_id, now.client) == (
            before[insight].recall_count,
            before[insight].tags,
            before[insight].session_id,
            before[insight].client,
        )
        if insight != kept:
            assert (now.helpful, now.harmful) == (before[insight].helpful, before[insight].harmful)
        assert not any(run.run in note for note in now.notes)
        assert {v.insight for v in memory.history(insight).verdicts} == {insight}
    assert memory.get(kept).helpful == before[kept].helpful + 1
    with pytest.raises(InputError, match="undone already"):
        memory.undo_consolidation(run.run)
    assert memory.consolidation_run(run.run).undone_at is not None


def test_a_later_run_over_the_same_insights_must_be_undone_first(
    memory: Memory, clock: Clock
) -> None:
    record(memory, WORDINGS[:2], "p", "s1")
    first = memory.consolidate()
    clock.days(1)
    record(memory, WORDINGS[2:], "p", "s2")
    second = memory.consolidate()
    assert len(second.merged) == 1  # the third wording joins the lesson, not a new cluster
    assert second.merged[0][0] in {first.merged[0][0], *second.merged[0][1]}
    with pytest.raises(InputError, match=f"undo {second.run} first"):
        memory.undo_consolidation(first.run)
    memory.undo_consolidation(second.run)
    memory.undo_consolidation(first.run)
    assert len(memory.list(limit=10)[0]) == 3


def test_a_dry_run_changes_nothing_and_saves_no_run(memory: Memory) -> None:
    record(memory, WORDINGS, "p", "s1")
    run = memory.consolidate(dry_run=True)
    assert run.dry_run and len(run.merged) == 1
    assert len(memory.list(limit=10)[0]) == 3
    assert memory.consolidation_runs() == []


def test_lessons_that_disagree_are_flagged_once_and_never_merged(memory: Memory) -> None:
    ids = record(memory, SCOPED, "p", "s1")
    vectors = memory.embedder.embed_documents(
        [InsightDraft.model_validate(d).embedding_text() for d in SCOPED]
    )
    assert float(vectors[0] @ vectors[1]) >= 0.8  # as close as paraphrases are

    run = memory.consolidate()

    assert not run.merged and [set(pair) for pair in run.conflicts] == [set(ids)]
    [change] = run.changes
    assert "non-idempotent" in change.why and "timeout" in change.why
    assert all(memory.get(i).status == "active" for i in ids)
    assert [c.id for c in memory.open_conflicts()] == [change.id]
    assert not memory.consolidate().conflicts  # flagged once
    memory.retire(ids[0], "wrong here")
    assert memory.open_conflicts() == []


def test_a_lesson_whose_flag_changed_is_kept_apart_at_write_time_and_superseded(
    memory: Memory, clock: Clock
) -> None:
    [old] = record(memory, [OLD_FLAG], "p", "s1")
    clock.days(30)
    [new] = record(memory, [NEW_FLAG], "p", "s2")  # 0.94 apart: no write-time merge
    assert new != old

    run = memory.consolidate()

    assert run.superseded == [(old, new)] and not run.merged
    assert memory.get(old).status == "retired" and memory.get(new).status == "active"
    assert "--frozen-lockfile" in run.changes[0].why
    memory.undo_consolidation(run.run)
    assert memory.get(old).status == "active"


def test_a_lesson_unused_for_the_set_days_is_retired_but_a_used_one_and_the_starter_stay(
    tmp_path: Path, clock: Clock
) -> None:
    memory = Memory(
        load_settings(tmp_path / "home", retire_unused_days=90, starter=True), clock=clock
    )
    starter = len(memory.list(limit=100)[0])
    assert starter > 0
    # Two lessons of the pool that paraphrase no starter lesson (one at 40 merged into one).
    [used, unused] = record(memory, other_lessons(2, offset=80), "p", "s1")
    clock.days(60)
    hits = memory.recall_for_session(
        str(memory.get(used).content), RecallOrigin(session_id="s2", trigger="hook"), k=1
    )
    assert hits and hits[0].id == used
    memory.flush()
    clock.days(40)  # 100 days after both were learnt, 40 after `used` was recalled

    run = memory.consolidate()

    # The starter pack, 100 days old and never used either, is exempt.
    assert run.retired == [unused]
    assert "90 days" in run.changes[-1].why
    assert memory.get(used).status == "active"
    memory.close()


def test_a_recall_without_an_origin_or_at_session_start_is_no_use(
    memory: Memory, clock: Clock
) -> None:
    """A measurement, a CLI lookup or the session-start context reaches no plan."""
    [insight] = record(memory, other_lessons(1), "p", "s1")
    memory.recall(str(memory.get(insight).content))
    memory.note_shown(RecallOrigin(session_id="s2", trigger="session-start"), [insight])
    memory.flush()
    clock.days(91)
    assert memory.consolidate().retired == [insight]


def test_two_processes_never_consolidate_one_memory_at_once(memory: Memory) -> None:
    from mtl_mcp.errors import StoreBusy
    from mtl_mcp.memory.consolidation import LOCK_FILE
    from mtl_mcp.storage.locks import try_exclusive

    record(memory, WORDINGS, "p", "s1")
    with try_exclusive(memory.settings.home / LOCK_FILE) as mine:
        assert mine
        with pytest.raises(StoreBusy, match="another consolidation"):
            memory.consolidate()
    assert memory.consolidate().merged


def condemn(memory: Memory, insight: str, how: str) -> None:
    """Retire `insight` as session verdicts, ratings or a person do."""
    if how == "verdicts":  # misled in three sessions, with plans of three kinds
        plans = [PLAN, "Quote every variable in the deploy script.", "Index the slow query."]
        memory.record_verdicts(
            [
                VerdictEntry(
                    session_id=f"v{n}", insight=insight, verdict="misled", mode="misapplied", plan=p
                )
                for n, p in enumerate(plans)
            ]
        )
    elif how == "ratings":
        for _ in range(memory.settings.retire_after_harmful):
            memory.rate(insight, helpful=False)
    else:
        memory.retire(insight, "this is wrong for us")
    assert memory.get(insight).status == "retired"


@pytest.mark.parametrize("how", ["verdicts", "ratings", "hand"])
def test_a_wording_of_a_lesson_retired_as_wrong_is_retired_with_it(
    memory: Memory, clock: Clock, how: str
) -> None:
    """A distiller that learns a condemned lesson again does not bring it back through a
    paraphrase; a lesson that advises the opposite stays, and undo brings the wording back."""
    [old] = record(memory, WORDINGS[:1], "p", "s1")
    [never] = record(memory, SCOPED[1:], "p", "s1")
    condemn(memory, old, how)
    condemn(memory, never, how)
    clock.days(20)
    [again, retry] = record(memory, [WORDINGS[1], SCOPED[0]], "q", "s2")

    run = memory.consolidate()

    assert run.retired == [again] and not run.merged
    [change] = [c for c in run.changes if c.kind == "retired"]
    assert f"a wording of {old}" in change.why and WORDINGS[0]["title"] in change.why
    assert {"verdicts": "session verdicts", "ratings": "ratings", "hand": "by hand"}[how] in (
        change.why
    )
    assert memory.get(again).status == "retired"
    assert memory.get(retry).status == "active"  # opposite advice: another lesson
    memory.undo_consolidation(run.run)
    assert memory.get(again).status == "active"


def test_a_wording_of_a_lesson_retired_as_unused_or_brought_back_is_a_new_use(
    memory: Memory, clock: Clock
) -> None:
    [unused, wrong] = record(memory, [WORDINGS[0], SCOPED[1]], "p", "s1")
    clock.days(91)
    assert set(memory.consolidate().retired) == {unused, wrong}
    memory.retire(wrong, "not for us")
    memory.reinstate(wrong)
    memory.retire(wrong, "not for us after all")
    memory.reinstate(wrong)
    [again] = record(memory, WORDINGS[1:2], "q", "s2")
    run = memory.consolidate()
    assert again not in run.retired and memory.get(again).status == "active"


def test_a_pass_never_blocks_a_recall_and_records_wait_only_for_its_commit(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From another thread, while a pass asks the model for a merge (no lock held) a recall
    and a record finish, and while it commits (the write lock held) a recall finishes. No
    timing: each probe waits for the other thread, which a lock held would stall."""
    import threading

    record(memory, WORDINGS, "p", "s1")
    finished: dict[str, bool] = {}
    new = other_lessons(1, offset=60)

    def from_another_thread(name: str, work: Any) -> None:
        done = threading.Event()
        threading.Thread(target=lambda: (work(), done.set()), daemon=True).start()
        finished[name] = done.wait(120)  # stalled behind a lock: the pass goes on after 120 s

    class Probe:
        name = "probe"

        def __call__(self, insights: Any) -> None:
            from_another_thread("recall while planning", lambda: memory.recall(PLAN, k=3))
            from_another_thread("record while planning", lambda: memory.record(new))

        def weigh(self, first: Any, second: Any) -> None:
            return None

    upsert = memory.table.upsert

    def committing(rows: Any) -> Any:
        from_another_thread("recall while committing", lambda: memory.recall(PLAN, k=3))
        return upsert(rows)

    monkeypatch.setattr(memory.table, "upsert", committing)
    run = memory.consolidate(merger=Probe())

    assert run.merged
    assert finished == {
        "recall while planning": True,
        "record while planning": True,
        "recall while committing": True,
    }
