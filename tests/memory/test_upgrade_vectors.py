"""A store the previous default runtime made is re-embedded with the current one while it is
in use: recall answers from the old vectors with the old runtime until every row has its new
vector, a stop loses nothing, rows written meanwhile come along, and so do the ledger's
verdicts. The real models: the previous runtime here is the packaged graph (this data
directory never had the 0.3 rewrite), as 0.3 ran it where it could not rewrite."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mtl_mcp import Memory
from mtl_mcp.config import DEFAULT_EMBED_MODEL, PREVIOUS_EMBED_MODEL, load_settings
from mtl_mcp.index.embedder import get_embedder
from mtl_mcp.schemas import VerdictEntry
from mtl_mcp.server.keeper import MemoryKeeper
from mtl_mcp.storage import reembed
from mtl_mcp.storage.schema import NEXT_VECTOR, PREVIOUS_VECTOR
from tests.conftest import distinct_lessons

PLAN = "Write a failing test for the flaky tests first. Then fix them and rerun the suite."


def older_store(home: Path, count: int = 12) -> list[str]:
    """A store made by the previous runtime, as 0.3 left it; its recall for PLAN (ids)."""
    older = Memory(load_settings(home, embed_model=PREVIOUS_EMBED_MODEL))
    older.record(distinct_lessons(count))
    hits = [h.id for h in older.recall(PLAN, k=5)]
    older.close()
    return hits


def test_recall_answers_from_the_old_vectors_until_the_swap_and_a_stop_loses_nothing(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    before = older_store(home)
    memory = Memory(load_settings(home))  # the configured model is the new default
    assert [h.id for h in memory.recall(PLAN, k=5)] == before
    assert memory.embedder.name == PREVIOUS_EMBED_MODEL
    assert memory.stats()["reembedding"] == {"model": DEFAULT_EMBED_MODEL, "done": 0, "total": 12}

    seen: list[tuple[int, int]] = []
    finished = memory.upgrade_vectors(
        progress=lambda done, total: seen.append((done, total)), stop=lambda: bool(seen), batch=5
    )
    assert not finished and seen == [(5, 12)]
    assert reembed.progress(memory.table) == (5, 12)
    assert [h.id for h in memory.recall(PLAN, k=5)] == before  # still the old runtime's
    [written] = memory.record(distinct_lessons(1, offset=100))  # lands with an old vector
    assert written.status == "stored"
    waiting = {row["id"] for row in reembed.pending(memory.table, 100)}
    done = next(r["id"] for r in memory.vectors().records if r["id"] not in waiting)
    edit = {"content": "Retry the flaky tests with a fixed seed before changing their code."}
    assert memory.revise(done, edit).status == "stored"
    assert done in {row["id"] for row in reembed.pending(memory.table, 100)}  # to be redone
    memory.close()

    resumed = Memory(load_settings(home))  # a later process goes on from there
    assert resumed.upgrade_vectors(batch=5)
    assert resumed.embedder.name == DEFAULT_EMBED_MODEL
    assert "reembedding" not in resumed.stats()
    assert resumed.stats()["embed_model"] == resumed.meta["embed_model"] == DEFAULT_EMBED_MODEL
    names = resumed.table.open().schema.names
    assert NEXT_VECTOR not in names and PREVIOUS_VECTOR not in names
    labelled = resumed.vectors()
    texts = [f"{r['title']}. {r['description']} {r['content']}" for r in labelled.records]
    expected = get_embedder(resumed.settings).embed_documents(texts)
    assert len(texts) == 13
    assert np.sum(labelled.vectors * expected, axis=1).min() > 0.99999

    fresh = Memory(load_settings(tmp_path / "fresh"))  # the same lessons, new from the start
    fresh.record(distinct_lessons(12))
    fresh.record(distinct_lessons(1, offset=100))
    fresh.revise(done, edit)
    assert [h.id for h in resumed.recall(PLAN, k=5)] == [h.id for h in fresh.recall(PLAN, k=5)]


def test_the_ledger_verdicts_come_along(tmp_path: Path) -> None:
    home = tmp_path / "home"
    older = Memory(load_settings(home, embed_model=PREVIOUS_EMBED_MODEL))
    [stored] = older.record(distinct_lessons(3))[:1]
    verdict = VerdictEntry(
        session_id="s1", insight=str(stored.id), verdict="misled", mode="misapplied", plan=PLAN
    )
    older.record_verdicts([verdict])
    older.close()
    memory = Memory(load_settings(home))
    assert memory.loop.ledger.vector_models() == {PREVIOUS_EMBED_MODEL: 1}
    assert memory.upgrade_vectors()
    assert memory.loop.ledger.vector_models() == {DEFAULT_EMBED_MODEL: 1}
    [(_, vector)] = memory.loop.ledger.verdict_vectors(DEFAULT_EMBED_MODEL, 384)
    assert vector is not None


def test_a_server_re_embeds_in_the_background_after_its_warm_up(tmp_path: Path) -> None:
    home = tmp_path / "home"
    older_store(home, count=4)
    keeper = MemoryKeeper(load_settings(home))
    keeper.start_warming()
    keeper._warmer.join(120)
    assert keeper.get().stats()["embed_model"] == DEFAULT_EMBED_MODEL
    keeper.get().close()
