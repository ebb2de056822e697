"""One store as recall reads it: a table, its snapshot and keyword index, kept fresh.

A store in a local directory is re-checked on every read (a version check costs a file stat).
A store on object storage is refreshed in a background thread at most every
`refresh_seconds`: readers get the last loaded snapshot, with its keyword index already
built, at memory speed, and never wait on the network. When the object store cannot be
reached they keep that snapshot and `status()` says so, until a refresh succeeds.

Why a thread rather than short timeouts: measured against an S3 API server that accepts
connections and never answers, LanceDB's connect gave up after 20 s with a 3 s request
timeout and no retries, and after 62 s with a 10 s timeout and two retries; refused
connections cost 2-5 s. No setting bounds that to the few milliseconds a recall may spend.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from mtl_mcp.config import return_free_heap
from mtl_mcp.errors import MtlError
from mtl_mcp.index.bm25 import Bm25Index
from mtl_mcp.schemas import Source
from mtl_mcp.storage.snapshot import Snapshot
from mtl_mcp.storage.table import InsightTable

logger = logging.getLogger(__name__)

LOAD_WAIT_MAX = 120.0  # seconds a first load may take once the store has answered
THREAD_PREFIX = "mtl-refresh-"


def _covers(index: Bm25Index, built_for: Snapshot, snapshot: Snapshot) -> bool:
    """Whether an index built for one snapshot serves another: the same lineage (the other
    is this one with rows appended, or recall counts written), and no more rows indexed
    than it has."""
    return built_for.lineage is snapshot.lineage and index.size <= len(snapshot)


def refreshing() -> bool:
    """Whether a background refresh is still waiting on an object store in this process."""
    return any(t.name.startswith(THREAD_PREFIX) and t.is_alive() for t in threading.enumerate())


@dataclass(frozen=True)
class TierStatus:
    """How fresh a store's snapshot is, and why it is not fresher."""

    reachable: bool | None  # None: not tried yet
    loaded_at: datetime | None  # when the snapshot in use was last confirmed current
    error: str | None  # the last refresh's failure, if it failed
    empty: bool = False  # the store has no table yet (a team pool nobody shared to)


class Tier:
    """A table read through snapshots; see the module docstring for freshness."""

    def __init__(
        self, table: InsightTable, source: Source, refresh_seconds: float, create: bool = True
    ) -> None:
        self.table = table
        self.source = source
        self.refresh_seconds = refresh_seconds
        self._create = create  # False: reading never creates the table (a team pool)
        self._lock = threading.Lock()
        # The keyword index: (the snapshot, its generation when built, the index).
        self._keywords: tuple[Snapshot, int, Bm25Index] | None = None
        self._rebuilding = False
        self._refresher: threading.Thread | None = None
        self._answered = threading.Event()  # the running refresh heard from the store
        self._attempted = float("-inf")  # monotonic time the last refresh started
        self._confirmed: datetime | None = None
        self._reachable: bool | None = None
        self._error: str | None = None
        self._empty = False
        # Work a refresh does for each new snapshot it loads, so that no reader pays for it.
        self.prepare: Callable[[Snapshot], None] | None = None
        # The newest snapshot a refresh has prepared (keyword index built, `prepare` done):
        # readers keep it until the next one is ready.
        self._published: Snapshot | None = None
        self._preparing: Snapshot | None = None  # the one a background thread prepares now

    @property
    def remote(self) -> bool:
        return self.table.local is None

    def snapshot(self) -> Snapshot:
        """The snapshot to read now, loaded in this thread if there is none yet (its errors
        propagate). On object storage a refresh starts in the background when one is due."""
        snapshot = self.table.snapshot()
        if self.remote:
            with self._lock:
                if self._confirmed is None:  # the load just now confirmed it
                    self._attempted = time.monotonic()
                    self._succeeded()
            self.refresh_when_due()
        return snapshot

    def loaded(self, wait: float) -> Snapshot | None:
        """The snapshot to read: the last one loaded, never waiting on the network once a
        refresh has ended. Only before the first one ended (a new process) does a reader
        wait for what it brings: `wait` seconds for the store to answer, LOAD_WAIT_MAX once
        it did (a big pool takes seconds to load). None when nothing is loaded (`status()`
        says why) or the table does not exist yet. For stores that may be away: a team pool.
        """
        if not self.remote:
            return self.table.snapshot() if self._create or self.table.exists() else None
        self.refresh_when_due()
        snapshot = self._ready()
        if snapshot is None and wait > 0:
            with self._lock:
                # Once a refresh succeeded (finding a table or none) or failed, the next ones
                # (a pool created since, retries after an outage) go on behind the readers.
                first = self._reachable is None
                running, answered = self._refresher, self._answered
            if first and running is not None:
                running.join(wait)
                if running.is_alive() and answered.is_set():
                    running.join(LOAD_WAIT_MAX)
            snapshot = self._ready()
        return snapshot

    def _ready(self) -> Snapshot | None:
        """The newest loaded snapshot if it is prepared (or nothing older is), else the one
        prepared last: a snapshot this process loaded by writing (a share) is prepared in
        the background, not by the reader who finds it first."""
        current = self.table.loaded
        with self._lock:
            published, cached = self._published, self._keywords
            if current is None or published is None or current.lineage is published.lineage:
                return current  # the same snapshot, or one this process's write derived
            if cached is not None and _covers(cached[2], cached[0], current):
                return current
            started, self._preparing = self._preparing is current, current
        if not started:
            threading.Thread(
                target=self._prepare, args=(current,), name="mtl-prepare", daemon=True
            ).start()
        return published

    def adopt(self, snapshot: Snapshot) -> None:
        """A snapshot this process loaded after its own write: prepared here, in the
        writer's thread, so that its next read sees the write."""
        self._prepare(snapshot)

    def _prepare(self, snapshot: Snapshot) -> None:
        """Build what readers of `snapshot` need, then hand it to them."""
        self.keywords(snapshot)
        if self.prepare is not None:
            self.prepare(snapshot)
        with self._lock:
            if self._published is None or snapshot.version >= self._published.version:
                self._published = snapshot

    def probe(self, wait: float) -> bool:
        """Whether the store answers within `wait` seconds: refreshes now, in the background,
        and waits for it, unless a refresh succeeded within the last `refresh_seconds`. A
        write asks this first, so an unreachable store costs it `wait` seconds rather than
        LanceDB's minute of retries."""
        if not self.remote:
            return True
        with self._lock:
            recent = time.monotonic() - self._attempted < self.refresh_seconds
            if recent and self._refresher is None and self._reachable:
                return True
            running = self._refresher or self._start()
        running.join(wait)
        with self._lock:
            return self._refresher is not running and self._reachable is True

    def refresh_when_due(self) -> None:
        """On object storage, start a background refresh if `refresh_seconds` passed since
        the last one began (failed ones included: an unreachable store is retried at the
        same pace)."""
        if not self.remote:
            return
        with self._lock:
            due = time.monotonic() - self._attempted >= self.refresh_seconds
            if due and self._refresher is None:
                self._start()

    def _start(self) -> threading.Thread:
        """A new refresh thread, started (the caller holds the lock)."""
        self._attempted = time.monotonic()
        self._answered = threading.Event()
        thread = threading.Thread(
            target=self._refresh, name=f"{THREAD_PREFIX}{self.source}", daemon=True
        )
        self._refresher = thread
        thread.start()
        return thread

    def _refresh(self) -> None:
        with self._lock:
            answered = self._answered
        try:
            exists = self.table.exists()
            answered.set()
            if not exists and not self._create:
                with self._lock:
                    self._empty = True
                    self._succeeded()
                return
            self._prepare(self.table.refresh())  # here, so that no reader pays for it
            with self._lock:
                self._empty = False
                self._succeeded()
        except MtlError as exc:  # in a background thread: kept for status(), logged
            with self._lock:
                first = self._reachable is not False  # later failures: quieter
                self._reachable, self._error = False, str(exc)
            log = logger.warning if first else logger.info
            log("could not refresh the %s store: %s", self.source, exc)
        finally:
            with self._lock:
                self._refresher = None

    def _succeeded(self) -> None:
        self._reachable, self._error = True, None
        self._confirmed = datetime.now(UTC)

    def keywords(self, snapshot: Snapshot) -> Bm25Index:
        """BM25 over the snapshot's texts, built once per lineage of snapshots (a new one at
        once).

        Rows this process appended since (its own inserts: a later snapshot of the same
        lineage) are not in the index until a background rebuild catches up: recall never
        waits for it, and scores them one by one meanwhile (`memory.queries`).
        """
        with self._lock:
            cached = self._keywords
            if cached is not None and _covers(cached[2], cached[0], snapshot):
                if cached[1] != snapshot.generation and not self._rebuilding:
                    self._rebuilding = True
                    threading.Thread(
                        target=self._rebuild_keywords,
                        args=(snapshot,),
                        name="mtl-bm25",
                        daemon=True,
                    ).start()
                return cached[2]
        generation = snapshot.generation
        index = Bm25Index(snapshot.texts())  # outside the lock: ~1 s at 100,000 insights
        return_free_heap()  # the build's tokens and sorts, freed
        with self._lock:
            self._keywords = (snapshot, generation, index)
        return index

    def _rebuild_keywords(self, snapshot: Snapshot) -> None:
        try:
            generation = snapshot.generation
            index = Bm25Index(snapshot.texts())
            return_free_heap()
            with self._lock:
                if self._keywords is not None and self._keywords[0].lineage is snapshot.lineage:
                    self._keywords = (snapshot, generation, index)
        finally:
            with self._lock:
                self._rebuilding = False

    def status(self) -> TierStatus:
        with self._lock:
            return TierStatus(
                reachable=self._reachable,
                loaded_at=self._confirmed,
                error=self._error,
                empty=self._empty,
            )

    def close(self) -> None:
        """Forget the snapshot and index; the next read loads them again."""
        with self._lock:
            self._keywords = None
            self._published = None
            self._confirmed = None
            self._reachable = None  # as in a new process: the next read waits for the load
            self._attempted = float("-inf")
        self.table.close()
