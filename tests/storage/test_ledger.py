"""The recall ledger: owner-only, bounded, shared by processes, and purged without trace."""

from __future__ import annotations

import multiprocessing
import re
import sqlite3
import threading
from pathlib import Path

import numpy as np
import pytest

import mtl_mcp.storage.ledger as ledger_module
from mtl_mcp.schemas import LedgerHit, RecallEntry, VerdictEntry
from mtl_mcp.storage.ledger import Ledger

SECRET_PLAN = "Rotate the key " + "sk-live-" + "4f9a2c71e0b3" + " and retry the deploy."


def recall(session: str, *ids: str, plan: str = "Reproduce first, then fix.") -> RecallEntry:
    hits = [LedgerHit(id=i, score=0.5) for i in ids]
    return RecallEntry(
        session_id=session, client="claude-code", trigger="hook", plan=plan, hits=hits
    )


def test_the_ledger_is_owner_only_and_answers_by_session_and_by_insight(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "home" / "ledger.sqlite")
    ledger.add_recalls([recall("s1", "ins_a", "ins_b"), recall("s2", "ins_b")])
    assert oct(ledger.path.stat().st_mode & 0o777) == "0o600"
    assert [[h.id for h in r.hits] for r in ledger.recalls(session_id="s1")] == [["ins_a", "ins_b"]]
    assert [r.session_id for r in ledger.recalls(insight="ins_b")] == ["s2", "s1"]
    assert ledger.sessions() == ["s2", "s1"]
    vector = (np.ones(384) / np.sqrt(384)).astype(np.float32)
    ledger.add_verdicts(
        [VerdictEntry(session_id="s1", insight="ins_a", verdict="misled", mode="misapplied")],
        [vector],
        "mtl-mcp/all-MiniLM-L6-v2-int8",
    )
    [(entry, stored)] = ledger.verdict_vectors("mtl-mcp/all-MiniLM-L6-v2-int8", 384)
    assert (entry.verdict, entry.mode) == ("misled", "misapplied")
    assert stored is not None and np.array_equal(stored, vector)
    assert ledger.figures()["verdicts"] == {"misled:misapplied": 1}


def test_old_rows_are_pruned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Beyond KEEP_RECALLS the oldest recalls go, with their hits."""
    monkeypatch.setattr(ledger_module, "KEEP_RECALLS", 5)
    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.add_recalls([recall(f"s{n}", f"ins_{n}") for n in range(12)])
    assert len(ledger.recalls()) == 5
    assert ledger.recalls(insight="ins_0") == []
    assert ledger.sessions(limit=100) == [f"s{n}" for n in range(11, 6, -1)]


def test_forget_and_scrub_leave_no_trace_in_the_file(tmp_path: Path) -> None:
    """Forgetting ids removes their rows; a scrub removes recalls whose plan matches; in
    both cases neither the id nor the text is left anywhere in the file."""
    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.add_recalls(
        [recall("s1", "ins_gone", "ins_kept"), recall("s2", "ins_x", plan=SECRET_PLAN)]
    )
    ledger.add_verdicts([VerdictEntry(session_id="s1", insight="ins_gone", verdict="helped")])
    assert ledger.forget({"ins_gone"}) == 2
    assert [[h.id for h in r.hits] for r in ledger.recalls(session_id="s1")] == [["ins_kept"]]
    assert b"ins_gone" not in ledger.path.read_bytes()
    assert ledger.scrub(re.compile(re.escape("4f9a2c71e0b3"))) == 1
    assert ledger.recalls(session_id="s2") == []
    assert b"4f9a2c71e0b3" not in ledger.path.read_bytes()


def test_forget_keeps_the_recalls_that_were_never_about_those_insights(
    tmp_path: Path,
) -> None:
    """A recall that found nothing (an empty project, say) is no one insight's row: forgetting
    an insight leaves it, and the loop's figures of other sessions, as they were."""
    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.add_recalls([recall("s-empty"), recall("s-gone", "ins_gone"), recall("s-x", "ins_x")])
    before = ledger.figures()
    ledger.forget({"ins_gone"})
    assert ledger.sessions() == ["s-x", "s-empty"]
    assert ledger.figures()["sessions"] == before["sessions"] - 1


def _writer(path: str, worker: int) -> None:
    ledger = Ledger(Path(path))
    for n in range(25):
        ledger.add_recalls([recall(f"w{worker}", f"ins_{worker}_{n}")])


def test_processes_writing_at_once_lose_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "ledger.sqlite")
    Ledger(Path(path)).add_recalls([])
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_writer, args=(path, w)) for w in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    assert len(Ledger(Path(path)).recalls()) == 100


def test_a_damaged_ledger_is_our_error_with_the_fix(tmp_path: Path) -> None:
    """The fix it names works in a process that has used the ledger already (the
    service): deleted, the ledger is made again, owner-only, at the next write."""
    path = tmp_path / "ledger.sqlite"
    ledger = Ledger(path)
    ledger.add_recalls([recall("s0", "ins_a")])
    path.write_bytes(b"not a database at all" * 100)
    with pytest.raises(Exception, match="delete it"):
        ledger.add_recalls([recall("s1", "ins_a")])
    path.unlink()
    ledger.add_recalls([recall("s2", "ins_a")])
    assert ledger.sessions() == ["s2"] and oct(path.stat().st_mode & 0o777) == "0o600"


def _forgetter(path: str, worker: int, failures: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    ledger = Ledger(Path(path))
    for n in range(30):
        try:
            ledger.add_recalls([recall(f"f{worker}", f"ins_{worker}_{n}", f"ins_k_{n}")])
            ledger.add_verdicts(
                [
                    VerdictEntry(
                        session_id=f"f{worker}", insight=f"ins_{worker}_{n}", verdict="helped"
                    )
                ]
            )
            ledger.forget([f"ins_{worker}_{n}"])
            ledger.figures()
        except Exception as exc:  # what a user's command would have printed
            failures.put(f"worker {worker}, forget {n}: {exc}")


def test_forgets_by_several_writers_at_once_wait_for_the_lock_and_never_fail(
    tmp_path: Path,
) -> None:
    """Four processes recording, judging and forgetting at once (each forget vacuums the
    file): every command waits for the lock instead of failing with "database is locked"."""
    path = str(tmp_path / "ledger.sqlite")
    Ledger(Path(path)).add_recalls([recall("seed", "ins_seed")])
    context = multiprocessing.get_context("spawn")
    failures = context.Queue()
    workers = [context.Process(target=_forgetter, args=(path, w, failures)) for w in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(300)
        assert worker.exitcode == 0
    said = []
    while not failures.empty():
        said.append(failures.get())
    assert said == []
    left = {hit.id for entry in Ledger(Path(path)).recalls() for hit in entry.hits}
    assert left == {"ins_seed"} | {f"ins_k_{n}" for n in range(30)}


@pytest.mark.parametrize("holder", ["a writer", "a reader"])
def test_a_forget_waits_for_a_lock_held_past_sqlites_busy_timeout(
    holder: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process holds the ledger longer than SQLite waits by itself (BUSY_MS, made
    short here): a writer in its transaction, or a reader whose open read keeps a commit
    and the vacuum out. The forget waits for it, then does its work; it never fails with
    "database is locked"."""
    monkeypatch.setattr(ledger_module, "BUSY_MS", 100)
    path = tmp_path / "ledger.sqlite"
    ledger = Ledger(path)
    ledger.add_recalls([recall("s1", "ins_gone", "ins_kept")])
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE" if holder == "a writer" else "BEGIN")
    other.execute("SELECT COUNT(*) FROM recalls").fetchall()  # a reader's lock
    release = threading.Timer(1.0, other.commit)
    release.start()
    try:
        assert ledger.forget({"ins_gone"}) == 1
    finally:
        release.join()
        other.close()
    assert [[h.id for h in r.hits] for r in ledger.recalls()] == [["ins_kept"]]


def test_a_consolidation_move_and_its_undo_wait_for_the_lock_and_commit_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Moving a merged insight's ledger rows (and moving them back) is one write: it waits
    for another writer that holds the lock past BUSY_MS, as every ledger write does, and
    then moves every row."""
    monkeypatch.setattr(ledger_module, "BUSY_MS", 100)
    path = tmp_path / "ledger.sqlite"
    ledger = Ledger(path)
    ledger.add_recalls([recall("s1", "ins_a", "ins_b"), recall("s2", "ins_a")])
    for step in ("move", "move back"):
        other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")
        release = threading.Timer(1.0, other.commit)
        release.start()
        try:
            if step == "move":
                moved = ledger.move({"ins_a": "ins_kept"})
            else:
                ledger.move_back(moved)
        finally:
            release.join()
            other.close()
        ids = sorted(h.id for r in ledger.recalls() for h in r.hits)
        assert ids == (["ins_b", "ins_kept", "ins_kept"] if step == "move" else
                       ["ins_a", "ins_a", "ins_b"])  # fmt: skip
