"""The store: real LanceDB in a temp dir, the real embedding model."""

from __future__ import annotations

import json
import multiprocessing
import threading
import time
from pathlib import Path

import pytest

from mtl_mcp import Memory
from mtl_mcp.config import Settings, load_settings
from mtl_mcp.errors import EmbeddingError, InputError, NotFoundError, StoreError
from mtl_mcp.index.embedder import Embedder, Vector, get_embedder
from mtl_mcp.memory.ingest import insight_id
from mtl_mcp.schemas import InsightDraft, Provenance
from mtl_mcp.storage.schema import META_TABLE, TABLE
from tests.conftest import distinct_lessons, lesson

TOPICS = [
    ("Read the error message in full", "The last line of a traceback names the real cause."),
    ("Check the interface before calling it", "Read a function's signature and docstring first."),
    ("Make one change at a time", "Several simultaneous edits hide which one fixed the issue."),
    ("Back up a file before rewriting it", "A blind overwrite loses content nobody can recover."),
    ("Prefer small reversible steps", "Commit working states so a bad step can be undone."),
]


def test_near_duplicate_merges_and_unions_tags_and_projects(store: Memory) -> None:
    """A paraphrase above the threshold merges: support +1, tags and projects unioned."""
    [first] = store.record(
        [
            lesson(
                "Run the failing test first",
                "Reproduce the failure before editing any code.",
                tags=["tests"],
            )
        ],
        Provenance(project="acme/api"),
    )
    [second] = store.record(
        [
            lesson(
                "Run the failing test first",
                "Reproduce the failure before you edit any code.",
                tags=["debugging"],
            )
        ],
        Provenance(project="zeta/cli"),
    )
    assert (first.status, second.status) == ("stored", "merged")
    assert second.id == first.id
    merged = store.get(first.id)
    assert merged.support == 2
    assert merged.tags == ["tests", "debugging"]
    assert merged.projects == ["acme/api", "zeta/cli"]


def test_distinct_lessons_are_not_merged(store: Memory) -> None:
    """Different lessons stay separate rows."""
    results = store.record([lesson(title, content) for title, content in TOPICS])
    assert [r.status for r in results] == ["stored"] * len(TOPICS)
    assert store.stats()["total"] == len(TOPICS)


def test_dedup_threshold_is_configurable(settings: Settings, tmp_path: Path) -> None:
    """With the threshold at 1.0 only identical text merges."""
    strict = Memory(load_settings(tmp_path / "strict", dedup_threshold=1.0))
    a = lesson("Run the failing test first", "Reproduce the failure before editing any code.")
    b = lesson("Run the failing test first", "Reproduce the failure before you edit any code.")
    assert [r.status for r in strict.record([a, b])] == ["stored", "stored"]
    assert strict.record([a])[0].status == "merged"


def test_field_limits_are_enforced_with_reasons(store: Memory) -> None:
    """Empty titles, 20 KB content and unknown categories are rejected with the reason."""
    results = store.record(
        [
            lesson("", "Some content that is long enough to count as a lesson."),
            lesson("Huge content", "x " * 10_000),
            lesson("Bad category", "A lesson with a category outside the list.", category="magic"),
        ]
    )
    assert [r.status for r in results] == ["rejected"] * 3
    assert "title" in results[0].reasons[0]
    assert "content" in results[1].reasons[0] and "1000" in results[1].reasons[0]
    assert "category" in results[2].reasons[0]


def test_rating_retires_a_repeatedly_harmful_insight(store: Memory) -> None:
    """Three harmful ratings (and no helpful ones) retire an insight; it is no longer recalled."""
    [stored] = store.record([lesson(*TOPICS[0])])
    for _ in range(3):
        rated = store.rate(stored.id, helpful=False)
    assert rated.status == "retired"
    assert store.recall("read the whole traceback before changing code", k=5) == []


def test_helpful_ratings_raise_ranking(store: Memory) -> None:
    """Between two equally similar insights, the helpful one ranks first."""
    a, b = store.record([lesson(*TOPICS[2]), lesson(*TOPICS[4])])
    plan = "I will make small, separate changes and commit each working state."
    before = {h.id: h.score for h in store.recall(plan, k=2)}
    store.rate(b.id, helpful=True)
    after = {h.id: h.score for h in store.recall(plan, k=2)}
    assert after[b.id] > before[b.id] and after[a.id] == before[a.id]


def test_own_recall_count_flush_patches_the_snapshot(store: Memory) -> None:
    """Flushing recall counts derives the in-memory snapshot instead of reloading it; a
    reader of the one before keeps its view."""
    [stored] = store.record([lesson(*TOPICS[0])])
    store.recall("read the traceback to the end", k=1)
    snapshot = store.table.snapshot()
    store.flush()
    patched = store.table.snapshot()
    assert patched.lineage is snapshot.lineage and patched is not snapshot  # not reloaded
    assert snapshot.records([0])[0]["recall_count"] == 0
    assert store.get(stored.id).recall_count == 1
    other = Memory(store.settings)  # another process's write still forces a reload
    other.rate(stored.id, helpful=True)
    reloaded = store.table.snapshot()
    assert reloaded.lineage is not snapshot.lineage and store.get(stored.id).helpful == 1


def test_own_inserts_are_appended_to_the_snapshot_and_found_at_once(store: Memory) -> None:
    """A record by this process extends its snapshot (no reload): the new insight
    is recalled first at once (its keyword score comes from the index's statistics until
    the index, rebuilt in the background, holds it)."""
    [first] = store.record([lesson(*TOPICS[0])])
    snapshot = store.table.snapshot()
    store.recall("read the traceback to the end", k=1)  # builds the keyword index
    [second] = store.record([lesson(*TOPICS[1])])
    extended = store.table.snapshot()
    assert extended.lineage is snapshot.lineage and len(extended) == 2
    assert len(snapshot) == 1  # a recall holding the one before keeps a consistent view
    assert [h.id for h in store.recall(TOPICS[1][1], k=2)] == [second.id, first.id]
    deadline = time.monotonic() + 30  # the keyword index is rebuilt in the background
    while store.recall(TOPICS[1][1], k=1, method="bm25")[0].id != second.id:
        assert time.monotonic() < deadline, "the keyword index never caught up"
        time.sleep(0.05)
    assert store.recall(TOPICS[1][1], k=1)[0].id == second.id
    other = Memory(store.settings)  # another process's insert still forces a reload
    other.record([lesson(*TOPICS[2])])
    assert store.table.snapshot() is not snapshot and len(store.table.snapshot()) == 3


def test_forget_and_missing_ids(store: Memory) -> None:
    """forget deletes; unknown ids raise NotFoundError naming the id."""
    [stored] = store.record([lesson(*TOPICS[1])])
    store.forget(stored.id)
    with pytest.raises(NotFoundError, match=stored.id):
        store.get(stored.id)


def test_recall_validates_arguments(store: Memory) -> None:
    """Blank plans, k out of range and this-project without a project are input errors."""
    with pytest.raises(InputError, match="plan"):
        store.recall("  ")
    with pytest.raises(InputError, match="1 to 20"):
        store.recall("a plan", k=0)
    with pytest.raises(InputError, match="project"):
        store.recall("a plan", scope="this-project")


def test_list_filters_sorts_and_pages(store: Memory) -> None:
    """list filters by polarity and category, sorts by support, and reports the total."""
    store.record(
        [
            lesson(*TOPICS[0], polarity="failure", category="exploration"),
            lesson(*TOPICS[1], category="api-compliance"),
        ]
    )
    store.record([lesson(*TOPICS[1], category="api-compliance")])  # same text: no new row
    failures, total = store.list(polarity="failure")
    assert total == 1 and failures[0].category == "exploration"
    by_support, total = store.list(sort="support", limit=1)
    assert total == 2 and len(by_support) == 1
    ranked, _ = store.list(query="read the signature of a function before using it")
    assert ranked[0].title == TOPICS[1][0]


def test_export_import_round_trip(store: Memory, tmp_path: Path) -> None:
    """Exported insights import into a fresh store with the same ids and counters."""
    [stored] = store.record([lesson(*TOPICS[3])], Provenance(project="acme/api"))
    store.rate(stored.id, helpful=True)
    exported = list(store.export())
    fresh = Memory(load_settings(tmp_path / "fresh"))
    fresh.import_insights(exported)
    fresh.import_insights(exported)  # a rerun changes nothing
    [copy] = fresh.export()
    assert copy.id == stored.id and copy.helpful == 1 and copy.projects == ["acme/api"]
    assert fresh.stats()["total"] == 1


def test_store_built_with_another_model_refuses_queries(settings: Settings) -> None:
    """A store whose recorded model differs from the configured one says to reindex."""
    store = Memory(settings)
    store.record([lesson(*TOPICS[0])])
    store.table.set_meta({"embed_model": "BAAI/bge-small-en-v1.5"})
    reopened = Memory(settings)
    with pytest.raises(EmbeddingError, match="mtl-mcp reindex"):
        reopened.recall("read the traceback")
    assert reopened.list()[1] == 1  # reading without embeddings still works
    assert reopened.reindex() == 1
    assert reopened.recall("read the whole traceback")[0].title == TOPICS[0][0]


def test_newer_schema_fails_with_upgrade_advice(settings: Settings) -> None:
    """A store written by a newer mtl-mcp is refused with what to run."""
    Memory(settings).record([lesson(*TOPICS[0])])
    Memory(settings).table.set_meta({"schema_version": "99"})
    with pytest.raises(StoreError, match="pip install -U mtl-mcp"):
        Memory(settings).stats()


def test_older_store_is_migrated_by_adding_columns(settings: Settings) -> None:
    """A store missing a newer column gains it (null-filled) and its rows still read."""
    import lancedb

    store = Memory(settings)
    store.record([lesson(*TOPICS[0])])
    store.close()
    db = lancedb.connect(settings.store_uri)
    db.open_table(TABLE).drop_columns(["notes"])
    meta = db.open_table(META_TABLE)
    meta.update(where="key = 'schema_version'", values={"value": "0"})
    reopened = Memory(settings)
    [insight] = reopened.list()[0]
    assert insight.notes == [] and reopened.meta["schema_version"] == "1"
    assert "notes" in db.open_table(TABLE).schema.names


def test_many_small_writes_trigger_compaction(store: Memory) -> None:
    """After dozens of single-insight writes the table is compacted into few fragments."""
    for draft in distinct_lessons(60):
        store.record([draft])
    table = store.table.open()
    assert table.count_rows() == 60
    assert table.stats()["fragment_stats"]["num_fragments"] < 20


def _writer(home: str, offset: int, count: int) -> None:
    memory = Memory(load_settings(Path(home), starter=False))
    for draft in distinct_lessons(count, offset):
        memory.record([draft])
    memory.close()


def test_two_writer_processes_lose_nothing_and_duplicate_nothing(settings: Settings) -> None:
    """Two processes writing at once: every insight lands once, both see all of them."""
    reader = Memory(settings)
    reader.stats()  # create the table first, as a running server would have
    context = multiprocessing.get_context("spawn")
    procs = [context.Process(target=_writer, args=(str(settings.home), o, 15)) for o in (0, 15)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(120)
        assert proc.exitcode == 0
    ids = [i.id for i in reader.export()]
    assert len(ids) == len(set(ids)) == 30


def test_concurrent_inserts_of_one_insight_never_duplicate(settings: Settings) -> None:
    """merge_insert on the primary key: the same insight from two handles is one row."""
    a, b = Memory(settings), Memory(settings)
    a.stats()
    draft = lesson(*TOPICS[0])
    a.record([draft])
    b.record([draft])
    rows = a.table.open().to_arrow().column("id").to_pylist()
    assert rows == [insight_id(InsightDraft.model_validate(draft))]


def test_secrets_in_labels_are_rejected(store: Memory) -> None:
    """A token passed as a tag or a language is rejected before slugging can disguise it."""
    token = "ghp_" + "a1B2c3D4e5" * 3 + "abcdef"
    results = store.record(
        [lesson(*TOPICS[0], tags=[token]), lesson(*TOPICS[1], languages=[token])]
    )
    assert [r.status for r in results] == ["rejected", "rejected"]
    assert all("secret" in r.reasons[0] for r in results)
    assert token.lower().replace("_", "-") not in json.dumps(
        [i.model_dump(mode="json") for i in store.export()]
    )


def test_same_text_from_another_project_counts_as_support(store: Memory) -> None:
    """Identical text from a second project merges: support + 1 and the project joins."""
    [first] = store.record([lesson(*TOPICS[2])], Provenance(project="acme/api"))
    [again] = store.record([lesson(*TOPICS[2])], Provenance(project="acme/api"))
    [other] = store.record([lesson(*TOPICS[2])], Provenance(project="zeta/cli"))
    assert again.status == other.status == "merged" and other.id == first.id
    merged = store.get(first.id)
    assert merged.support == 2 and merged.projects == ["acme/api", "zeta/cli"]
    hits = store.recall("make one change at a time", k=1, scope="this-project", project="zeta/cli")
    assert [h.id for h in hits] == [first.id]


def test_reimport_reports_existing_rows_as_merged(store: Memory, tmp_path: Path) -> None:
    """Importing an export twice stores once and reports the second time as merged."""
    store.record([lesson(*TOPICS[3])])
    exported = list(store.export())
    fresh = Memory(load_settings(tmp_path / "again"))
    assert [r.status for r in fresh.import_insights(exported)] == ["stored"]
    assert [r.status for r in fresh.import_insights(exported)] == ["merged"]


def test_a_running_store_notices_another_process_changing_the_model(settings: Settings) -> None:
    """After another process records a different model, a long-lived handle refuses to mix."""
    running = Memory(settings)
    running.record([lesson(*TOPICS[0])])
    running.recall("read the error message", k=1)
    other = Memory(settings)
    other.table.set_meta({"embed_model": "BAAI/bge-small-en-v1.5"})
    other.rate(running.list()[0][0].id, helpful=True)  # a write moves the table version
    with pytest.raises(EmbeddingError, match="mtl-mcp reindex"):
        running.recall("read the error message", k=1)


class HeldEmbedder:
    """The real model, except that the "writer" thread's embedding waits to be let go."""

    def __init__(self, real: Embedder) -> None:
        self.real = real
        self.entered = threading.Event()
        self.release = threading.Event()

    @property
    def name(self) -> str:
        return self.real.name

    @property
    def dim(self) -> int:
        return self.real.dim

    def embed_documents(self, texts: list[str]) -> Vector:
        if threading.current_thread().name == "writer":
            self.entered.set()
            assert self.release.wait(60)
        return self.real.embed_documents(texts)

    def embed_query(self, text: str) -> Vector:
        return self.real.embed_query(text)


def test_a_recall_does_not_wait_for_a_record_in_progress(settings: Settings) -> None:
    """Reads go to the in-memory snapshot: while a record holds the write lock (held here in
    its embedding), recalls from another thread answer."""
    held = HeldEmbedder(get_embedder(settings))
    store = Memory(settings, embedder=held)
    store.record(distinct_lessons(5, offset=150))  # loads the model and the snapshot
    writer = threading.Thread(
        target=store.record, args=(distinct_lessons(3),), name="writer", daemon=True
    )
    writer.start()
    assert held.entered.wait(60)
    answered = [store.recall(f"plan {n}: reproduce, fix, verify") for n in range(3)]
    assert all(len(hits) == 3 for hits in answered)
    assert writer.is_alive()  # still holding the lock
    held.release.set()
    writer.join(60)
    assert store.stats()["total"] == 8
    store.close()


def test_recall_can_leave_out_insights_already_shown(store: Memory) -> None:
    """Excluded ids make room for the next best: k results still come back."""
    stored = store.record(distinct_lessons(6, offset=40))
    plan = "Isolate the flaky tests in a minimal reproduction."
    first = [h.id for h in store.recall(plan, k=3)]
    after = [h.id for h in store.recall(plan, k=3, exclude_ids=first)]
    assert len(after) == 3 and not set(first) & set(after)
    assert set(first) | set(after) == {r.id for r in stored}

