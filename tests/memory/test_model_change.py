"""Session verdicts across a change of embedding model: `reindex` brings the ledger's plan
embeddings along, and verdicts of another model never break a recall.

The other model is the real default one with every vector written twice (768 dimensions,
the size of bge-base and the issue's model): offline, and a different space, which is all
the ledger has to cope with. It is chosen through `get_embedder`, as MTL_MCP_EMBED_MODEL
chooses a fastembed model (which would need the network here)."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from mtl_mcp import Memory
from mtl_mcp.config import Settings, load_settings
from mtl_mcp.index.embedder import Vector, get_embedder
from mtl_mcp.memory import core
from mtl_mcp.schemas import VerdictEntry
from mtl_mcp.storage.ledger import Ledger
from tests.conftest import distinct_lessons, lesson

OTHER_MODEL = "tests/minilm-twice-768"
DATES = "Reproduce the date bug with a test that pins the clock, then fix the range and rerun."
SIMILAR = "Pin the clock in the failing date test, fix the month range, then rerun."
WRONG = lesson(
    "Trust a green run after a clock change",
    "When a date-dependent test passes once after the clock was pinned, the fix is proven; "
    "skip the rest of the suite to save time.",
)


class TwiceEmbedder:
    """The default model's vectors, each written twice and renormalised: 768 dimensions."""

    def __init__(self, settings: Settings) -> None:
        self.base = get_embedder(settings)

    @property
    def name(self) -> str:
        return OTHER_MODEL

    @property
    def dim(self) -> int:
        return 2 * self.base.dim

    def embed_documents(self, texts: list[str]) -> Vector:
        rows = self.base.embed_documents(texts)
        return (np.hstack([rows, rows]) / np.sqrt(2)).astype(np.float32)

    def embed_query(self, text: str) -> Vector:
        return self.embed_documents([text])[0]


@pytest.fixture
def other_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """MTL_MCP_EMBED_MODEL=tests/minilm-twice-768 selects TwiceEmbedder."""
    chosen = core.get_embedder

    def choose(settings: Settings) -> object:
        if settings.embed_model == OTHER_MODEL:
            return TwiceEmbedder(settings.__class__(home=settings.home))
        return chosen(settings)

    monkeypatch.setattr(core, "get_embedder", choose)


def misled(store: Memory) -> str:
    """A store whose WRONG lesson misled a dates plan: its id."""
    [wrong] = store.record([WRONG])
    store.record(distinct_lessons(20, offset=40))
    store.record_verdicts(
        [
            VerdictEntry(
                session_id="s1", insight=str(wrong.id), verdict="misled", mode="misapplied",
                plan=DATES,
            )
        ]
    )  # fmt: skip
    assert wrong.id not in {h.id for h in store.recall(SIMILAR, k=5)}
    return str(wrong.id)


@pytest.mark.usefixtures("other_model")
def test_reindex_with_another_model_brings_the_verdicts_along(tmp_path: Path) -> None:
    """After a change of model and `reindex`, recall works (it failed with a ValueError,
    384 vs 768) and the misled verdict still keeps the lesson out of similar plans."""
    home = tmp_path / "home"
    before = Memory(load_settings(home))
    wrong = misled(before)
    before.close()
    after = Memory(load_settings(home, embed_model=OTHER_MODEL))
    after.reindex()
    assert after.embedder.dim == 768
    hits = after.recall(SIMILAR, k=5)
    assert hits and wrong not in {h.id for h in hits}
    assert after.loop.ledger.vector_models() == {OTHER_MODEL: 1}
    after.close()


@pytest.mark.usefixtures("other_model")
def test_verdicts_of_another_model_are_set_aside_until_reindex_embeds_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A ledger whose plans another model embedded (a reindex by 0.3 did not touch it):
    recall answers without their feedback, says so once in the log, and
    `reembed_verdicts` brings them back."""
    home = tmp_path / "home"
    before = Memory(load_settings(home))
    wrong = misled(before)
    before.close()
    with sqlite3.connect(home / "ledger.sqlite") as db:  # as 0.3 wrote it: no model named
        db.execute("UPDATE verdicts SET model = NULL")
    after = Memory(load_settings(home, embed_model=OTHER_MODEL))
    after.reindex()
    with sqlite3.connect(home / "ledger.sqlite") as db:  # undo what reindex did for them
        vector = before.embedder.embed_query(DATES).tobytes()
        db.execute("UPDATE verdicts SET model = NULL, vector = ?", (vector,))
    after.loop._feedback = None
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            assert wrong in {h.id for h in after.recall(SIMILAR, k=5)}
    said = [r for r in caplog.records if "embedded with another model" in r.getMessage()]
    assert len(said) == 1 and "mtl-mcp reindex" in said[0].getMessage()
    assert after.reembed_verdicts() == 1
    assert wrong not in {h.id for h in after.recall(SIMILAR, k=5)}
    after.close()


def test_a_damaged_plan_embedding_leaves_recall_working(store: Memory) -> None:
    """A vector blob that is no whole number of floats is read as none: recall answers."""
    wrong = misled(store)
    with sqlite3.connect(store.settings.home / "ledger.sqlite") as db:
        db.execute("UPDATE verdicts SET vector = x'0102030405'")
    store.loop._feedback = None
    assert wrong in {h.id for h in store.recall(SIMILAR, k=5)}


def test_a_ledger_of_0_3_gains_the_model_column_and_keeps_its_rows(tmp_path: Path) -> None:
    """A ledger made before verdicts named their model opens, keeps its verdicts and counts
    their embeddings as those of a model not named."""
    path = tmp_path / "ledger.sqlite"
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE verdicts (id INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT NOT NULL, "
            "session TEXT NOT NULL, insight TEXT NOT NULL, verdict TEXT NOT NULL, mode TEXT, "
            "reason TEXT, backend TEXT, plan TEXT, trigger TEXT, vector BLOB)"
        )
        vector = (np.ones(384) / np.sqrt(384)).astype(np.float32)
        db.execute(
            "INSERT INTO verdicts (at, session, insight, verdict, plan, vector) VALUES "
            "('2026-11-30T10:00:00+00:00', 's1', 'ins_a', 'misled', 'a plan', ?)",
            (vector.tobytes(),),
        )
    ledger = Ledger(path)
    assert [v.insight for v in ledger.verdicts()] == ["ins_a"]
    assert ledger.vector_models() == {None: 1}
    [(_, kept)] = ledger.verdict_vectors("any-model", 384)
    assert kept is not None and np.array_equal(kept, vector)
    [(_, other)] = ledger.verdict_vectors("any-model", 768)
    assert other is None
