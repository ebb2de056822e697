"""The parts every concept of `Memory` shares: its settings, the personal and team tiers,
the embedding model, opening the table (a new store gets the starter pack) and the model
check every read and write makes.

`Memory` (`facade`) is this core and one class per concept, stacked: reading, recording,
curation, the loop's bookkeeping and upkeep, each in its own module.
"""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from collections import Counter, OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Self

from mtl_mcp.config import DEFAULT_EMBED_MODEL, PREVIOUS_EMBED_MODEL, Settings, load_settings
from mtl_mcp.errors import (
    ConfigError,
    EmbeddingError,
)
from mtl_mcp.index.embedder import Embedder, Vector, get_embedder
from mtl_mcp.index.gate import GateFile
from mtl_mcp.index.methods import plan_vector
from mtl_mcp.memory.loop import Loop
from mtl_mcp.memory.team import TeamPool
from mtl_mcp.memory.tier import Tier
from mtl_mcp.schemas import (
    RecordResult,
)
from mtl_mcp.storage.snapshot import Snapshot
from mtl_mcp.storage.table import InsightTable

if TYPE_CHECKING:
    pass

logger = logging.getLogger(__name__)

NOTES_KEPT = 10
PLAN_CACHE = 64
# How the notes of an insight say why its status changed (consolidation reads them back:
# a wording of a lesson retired by verdicts or by hand is retired with it).
VERDICTS_NOTE = "retired by session verdicts: "
HAND_NOTE = "retired by hand: "
REINSTATED_NOTE = "reinstated by hand"


def appended_note(note_sql: str) -> str:
    """SQL for the notes with one more (an SQL string), keeping the newest NOTES_KEPT."""
    return (
        f"array_slice(array_append(coalesce(notes, make_array()), {note_sql}), -{NOTES_KEPT}, -1)"
    )


class MemoryCore(ABC):
    """What every concept of `Memory` works with (see `facade.Memory`)."""

    def __init__(
        self,
        settings: Settings | None = None,
        embedder: Embedder | None = None,
        on_change: Callable[[Self], None] | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.settings = settings or load_settings()
        # What "now" is for the times stored with insights and recalls, and for the age
        # consolidation retires by: the wall clock, or a simulated one (bench/year.py).
        self.clock: Callable[[], datetime] = clock or (lambda: datetime.now(UTC))
        self._embedder = embedder
        self._on_change: Callable[[Self], None] | None = on_change
        self.table = InsightTable(self.settings, self._model_info)
        self._personal = Tier(self.table, "personal", self.settings.refresh_seconds)
        self.team = TeamPool(self.settings, self._model_info) if self.settings.team_uri else None
        if self.team is not None:
            self.team.tier.prepare = self._compare_with_team
        self._lock = threading.RLock()  # one record at a time: exact dedup within a process
        self._seeded = False
        self._seed_done = False
        # Recall counts have their own lock: a recall must never wait for a record's write.
        self._recalls_lock = threading.Lock()
        self._pending_recalls: Counter[str] = Counter()
        self._drained_at = 0.0  # when the background last tried to drain the team outbox
        self.loop = Loop(self.settings)  # what reached a model, and how it went
        self.gate = GateFile(self.settings.home)  # what is put before a model unasked
        self._counts_unsaved = False  # a read-only store refused the recall counts (logged)
        self._plans: OrderedDict[tuple[str, str, bool], Vector] = OrderedDict()
        self._plans_lock = threading.Lock()

    # -- parts ----------------------------------------------------------------------------

    @property
    def embedder(self) -> Embedder:
        """The model the store's vectors are from (loaded on first use): the configured one
        or, while a store the previous default runtime made is re-embedded in the background
        (`upgrade_vectors`), that runtime, for queries and writes alike."""
        if self._embedder is not None:
            return self._embedder
        if self._upgrading():
            return get_embedder(self.settings, PREVIOUS_EMBED_MODEL)
        return self._configured()

    def _upgrading(self) -> bool:
        """Whether the store's vectors (as last read) are the previous default runtime's and
        the configuration asks for the current one: `upgrade_vectors` moves them."""
        loaded = self.table.loaded
        return (
            self._embedder is None
            and self.settings.embed_model == DEFAULT_EMBED_MODEL
            and loaded is not None
            and loaded.model == PREVIOUS_EMBED_MODEL
        )

    def _configured(self) -> Embedder:
        """The configured model (`embedder` follows the store's)."""
        return self._embedder or get_embedder(self.settings)

    def plan_embedding(self, plan: str, split: bool) -> Vector:
        """A plan's query vector (`index.methods.plan_vector`), the last PLAN_CACHE kept: a
        session's hook recall and its verdicts at the end embed the same plan."""
        embedder = self.embedder  # the previous runtime's while a re-embedding runs
        key = (embedder.name, plan, split)
        with self._plans_lock:
            if (hit := self._plans.get(key)) is not None:
                self._plans.move_to_end(key)
                return hit
        vector = plan_vector(embedder, plan, split=split)
        with self._plans_lock:
            self._plans[key] = vector
            while len(self._plans) > PLAN_CACHE:
                self._plans.popitem(last=False)
        return vector

    def _model_info(self) -> tuple[str, int]:
        """The configured model's name and dimension, for a new store."""
        configured = self._configured()
        return configured.name, configured.dim

    @property
    def _model_name(self) -> str:
        """The embedding model's name, without loading it for that."""
        if self._embedder is not None:
            return self._embedder.name
        return PREVIOUS_EMBED_MODEL if self._upgrading() else self.settings.embed_model

    @property
    def meta(self) -> dict[str, str]:
        """The store's meta table: schema version, embedding model, vector dimension."""
        self._open()
        return self.table.meta

    def exists(self) -> bool:
        """Whether the store was created already; asking does not create it."""
        return self.table.exists()

    def _open(self) -> None:
        """Open the table; a store this call created gets the starter pack."""
        self.table.open()
        if self._seed_done or not self.table.created:
            return  # every read passes here: it must not queue behind a record's lock
        with self._lock:
            if not self._seeded:
                self._seeded = True  # seed() reads through here again
                try:
                    if self.settings.starter:
                        self.seed()
                finally:  # seeded or not, reads stop taking the write lock (never retried)
                    self._seed_done = True

    def _snapshot(self) -> Snapshot:
        self._open()
        return self._personal.snapshot()

    def _check_model(self) -> None:
        # A reindex or re-embedding by another process changes the model: see it first.
        stored = self._snapshot().model
        if stored and stored != self.embedder.name:
            raise EmbeddingError(
                f"this store was built with embedding model {stored!r} but {self.embedder.name!r} "
                "is configured: run `mtl-mcp reindex` to re-embed everything with the new model, "
                f"or set MTL_MCP_EMBED_MODEL={stored}"
            )

    def _changed(self: Self) -> None:
        if self._on_change is not None:
            self._on_change(self)

    def changes_stamp(self) -> tuple[int, int, int]:
        """Changes whenever the insights (in any process) or the recall ledger change: the
        table version, and the ledger's and verdicts' file times. A stat or two, and a
        version check: cheap enough to poll every second."""
        version = self._snapshot().version
        ledger = self.loop.ledger.path
        stamps = []
        for path in (ledger, ledger.with_name(ledger.name + "-wal")):
            try:
                stamps.append(path.stat().st_mtime_ns)
            except OSError:
                stamps.append(0)
        return version, max(stamps), self.loop.ledger.verdict_stamp()

    def warm(self) -> None:
        """Open the table, load the model and build the keyword index now, not on first use;
        start loading the team pool in the background."""
        if self.team is not None:
            self.team.tier.refresh_when_due()
        self._open()
        self.embedder.embed_query("warm up")
        self._personal.keywords(self._snapshot()).scores("warm up")

    def _team(self) -> TeamPool:
        if self.team is None:
            raise ConfigError(
                "no team pool is configured: set MTL_MCP_TEAM_URI (or team_uri in "
                f"{self.settings.config_file}) to its URI, e.g. s3://bucket/team"
            )
        return self.team

    def _compare_with_team(self, team: Snapshot) -> None:
        """Find the team rows this memory holds already, for a new team snapshot (in the
        refresh thread: recall then finds the answer ready)."""
        personal = self.table.loaded
        if (
            self.team is not None
            and personal is not None
            and not self.team.model_problem(self._model_name)
        ):
            self.team.overlap.hidden(team, personal)

    def _team_snapshot(self) -> Snapshot | None:
        """The team snapshot, if a pool is configured, loaded and comparable with ours."""
        if self.team is None:
            return None
        snapshot = self.team.snapshot()
        if snapshot is None or self.team.model_problem(self._model_name):
            return None
        return snapshot

    def team_notice(self) -> str | None:
        """Why results may lack the team pool's newest insights, or None when they do not:
        it is unreachable (results come from the last snapshot loaded, or none), has not
        answered yet, or uses another embedding model."""
        if self.team is None:
            return None
        status = self.team.tier.status()
        loaded = self.team.table.loaded
        if loaded is not None and (problem := self.team.model_problem(self._model_name)):
            return f"Team insights are left out: {problem}."
        if status.reachable is False:
            if loaded is None or status.loaded_at is None:
                return (
                    "The team pool did not answer: these results come from your personal "
                    "memory only (`mtl-mcp doctor` says why)."
                )
            return (
                "The team pool did not answer: its insights here come from the snapshot "
                f"loaded at {status.loaded_at:%Y-%m-%d %H:%M:%S} UTC (`mtl-mcp doctor` says why)."
            )
        if loaded is None and not status.empty:
            return (
                "The team pool has not answered yet: these results come from your personal "
                "memory only."
            )
        return None

    @abstractmethod
    def seed(self) -> list[RecordResult]:
        """Add the starter pack (a new store gets it on first open)."""
