"""Upkeep: re-embedding, flushing what recall accumulates (counters, the ledger, the
team outbox), backups and restores, and closing."""

from __future__ import annotations

import builtins
import functools
import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

from mtl_mcp.errors import (
    Retryable,
    StoreError,
    StoreReadOnly,
)
from mtl_mcp.index.embedder import Vector
from mtl_mcp.memory.bookkeeping import Bookkeeping
from mtl_mcp.memory.recording import IMPORT_BATCH
from mtl_mcp.schemas import Insight, InsightDraft
from mtl_mcp.storage import backup, reembed
from mtl_mcp.storage.locks import store_lock, try_store_lock
from mtl_mcp.storage.schema import ids_predicate
from mtl_mcp.storage.snapshot import Snapshot

if TYPE_CHECKING:
    from mtl_mcp.storage.backup import BackupInfo, RestoreResult

logger = logging.getLogger(__name__)

NOTES_KEPT = 10
# Rows per batch of a background re-embedding: well under a second each, so a stop (or the
# swap, which waits for writers) never waits long.
REEMBED_BATCH = 64


class Upkeep(Bookkeeping):
    """Keep the store and its bookkeeping written, backed up and consistent."""

    def reindex(self, progress: Callable[[int], None] | None = None) -> int:
        """Re-embed every insight with the configured model and record it as the store's;
        then the plans of the session verdicts the ledger holds (`reembed_verdicts`)."""
        self._open()
        with store_lock(
            self.settings.local_store, exclusive=True
        ):  # writes meanwhile would be overwritten
            backup.make_backup(self.settings, "reindex")  # the overwrite replaces every vector
            rows = self.table.rows_without_vectors()
            embedder = self._configured()
            vectors: list[Vector] = []
            for start in range(0, len(rows), IMPORT_BATCH):
                batch = rows[start : start + IMPORT_BATCH]
                texts = [Insight.model_validate(r).embedding_text() for r in batch]
                vectors.extend(embedder.embed_documents(texts))
                if progress:
                    progress(len(batch))
            self.table.replace(
                [{**r, "vector": v.tolist()} for r, v in zip(rows, vectors, strict=True)],
                embedder.name,
                embedder.dim,
            )
        self.reembed_verdicts()
        return len(rows)

    def upgrade_vectors(
        self,
        progress: Callable[[int, int], None] | None = None,
        stop: Callable[[], bool] | None = None,
        batch: int = REEMBED_BATCH,
    ) -> bool:
        """Re-embed, batch by batch, a store the previous default runtime made with the
        configured one, while recall goes on answering from the old vectors with the old
        runtime (`storage.reembed`); then swap them in one commit and re-embed the session
        verdicts' plans. A server does it in the background after its warm-up.

        Resumable: `stop()` is asked between batches, and a stop or a crash loses nothing.
        `progress(done, total)` after each batch. One process at a time does it: the others
        return at once. Returns whether the store's vectors are the configured model's."""
        self._snapshot()
        if not self._upgrading():
            if reembed.leftover(self.table):  # a swap cut short before its cleanup
                reembed.tidy(self.table)
            return self._snapshot().model == self._model_name
        target = self._configured()
        with try_store_lock(self.settings.local_store, ".reembed.lock") as mine:
            if not mine:
                return False
            reembed.begin(self.table, target.name, target.dim)
            done, total = reembed.progress(self.table)
            logger.info("re-embedding %d insights with %s: %d done", total, target.name, done)
            while not (stop and stop()):
                rows = reembed.pending(self.table, batch)
                if rows:
                    texts = [
                        InsightDraft.model_construct(
                            **{c: row[c] for c in reembed.TEXT_COLUMNS}
                        ).embedding_text()
                        for row in rows
                    ]
                    reembed.fill(self.table, rows, target.embed_documents(texts))
                    done = min(done + len(rows), total)
                    if progress:
                        progress(done, total)
                    continue
                with self._lock:  # no record of this process embeds across the swap
                    if reembed.finish(self.table):
                        break
            else:
                logger.info("re-embedding stopped at %d of %d; it goes on next time", done, total)
                return False
        self._snapshot()
        count = self.reembed_verdicts()
        logger.info("re-embedded the store with %s, and %d verdicts", target.name, count)
        self._changed()
        return True

    def reembed_verdicts(self, progress: Callable[[int], None] | None = None) -> int:
        """Embed again with the configured model the plans of the session verdicts that
        another model embedded (feedback leaves those out until then); how many. `reindex`
        does it; so may anything that changes the model the store's vectors are from."""
        return self.loop.reembed(self.embedder, progress)

    def flush(self, drain: bool = True) -> None:
        """Write accumulated recall counts (recall stays a pure read on its hot path) and
        the ledger's recalls, then (`drain`) retry the team outbox once per refresh interval
        while the pool answers. The counts go first: a drain waits on the pool, and they
        never should.

        A read-only store cannot take the counts: they are dropped (they are shown, never
        ranked by), said once in the log, and reads go on."""
        try:
            self.loop.flush()
        finally:
            try:
                self._flush_recalls()
            finally:
                if drain:
                    self._drain_outbox()

    def _flush_recalls(self) -> None:
        with self._recalls_lock:
            pending, self._pending_recalls = self._pending_recalls, Counter()
        by_count: dict[int, list[str]] = {}
        for insight, count in pending.items():
            by_count.setdefault(count, []).append(insight)
        for count, ids in list(by_count.items()):
            counts = dict.fromkeys(ids, count)
            try:
                self.table.update(
                    ids_predicate(ids),
                    {"recall_count": f"recall_count + {count}"},
                    patch=functools.partial(Snapshot.with_recall_counts, counts=counts),
                )
            except StoreReadOnly as exc:
                if not self._counts_unsaved:
                    logger.info("recall counts are not saved: %s", exc)
                self._counts_unsaved = True
                return
            except StoreError:  # keep the unwritten counts for the next flush
                with self._recalls_lock:
                    for times, group in by_count.items():
                        self._pending_recalls.update(dict.fromkeys(group, times))
                raise
            del by_count[count]

    def _drain_outbox(self) -> None:
        """Share what waits in the outbox, at most once per refresh interval, and only once
        a background refresh has heard from the pool (an idle process starts one)."""
        team = self.team
        if team is None or not team.outbox.pending():
            return
        if team.tier.status().reachable is not True:
            team.tier.refresh_when_due()
            return
        now = time.monotonic()
        if now - self._drained_at < self.settings.refresh_seconds:
            return
        self._drained_at = now
        try:
            drained = self.share([])
        except Retryable as exc:
            logger.info("the team outbox waits: %s", exc)
            return
        logger.info("team outbox: %s", Counter(r.status for r in drained))

    # -- backups ---------------------------------------------------------------------------------

    def backup(self, reason: str = "manual") -> BackupInfo | None:
        """Back up the current rows now; None if there is no store yet."""
        return backup.make_backup(self.settings, reason)

    def backups(self) -> builtins.list[BackupInfo]:
        """The complete backups, newest first."""
        return backup.list_backups(self.settings)

    def find_backup(self, name: str) -> BackupInfo:
        """A backup by the name `backups()` shows, or by its path."""
        return backup.find_backup(self.settings, name)

    def restore(self, chosen: BackupInfo) -> RestoreResult:
        """Replace the store with a backup; the replaced store is backed up (or set aside)."""
        self.close()
        result = backup.restore_backup(self.settings, chosen)
        self._seeded = self._seed_done = True  # a restored store is never seeded
        self._changed()
        return result

    def inspect(self) -> str | None:
        """What is wrong with the store's files, or None when every one of them reads."""
        return backup.inspect_store(self.settings)

    def close(self) -> None:
        """Flush pending counters; the memory can be used again afterwards (it reopens).
        The team outbox is left for the next share or a running server: closing never
        waits on the pool."""
        try:
            self.flush(drain=False)
        finally:
            self._personal.close()
            if self.team is not None:
                self.team.close()
