"""Curation: what a person (or a rule) changes about insights already stored: rate, edit,
retire, forget, purge, and share with the team pool."""

from __future__ import annotations

import builtins
import logging
from collections.abc import Collection, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

import mtl_mcp.memory.ingest as ingest
import mtl_mcp.memory.sharing as sharing
from mtl_mcp.errors import (
    InputError,
)
from mtl_mcp.index.categories import fill_labels
from mtl_mcp.memory.core import HAND_NOTE, appended_note
from mtl_mcp.memory.recording import Recording
from mtl_mcp.schemas import (
    NOTE_MAX,
    Insight,
    InsightDraft,
    RecordResult,
    ShareResult,
    too_long,
)
from mtl_mcp.storage.schema import sql_string
from mtl_mcp.text.redact import redact

if TYPE_CHECKING:
    pass

logger = logging.getLogger(__name__)

NOTES_KEPT = 10


class Curation(Recording):
    """Change, retire, remove and share insights."""

    def rate(self, insight: str, helpful: bool, note: str | None = None) -> Insight:
        """Count a helpful or harmful use; retire an insight that keeps misleading."""
        if note and len(note) > NOTE_MAX:
            raise InputError(f"{too_long('note', len(note), NOTE_MAX)} (say why in a sentence)")
        current = self.get(insight)
        column = "helpful" if helpful else "harmful"
        values_sql = {column: f"{column} + 1"}
        harmful = current.harmful + (0 if helpful else 1)
        if harmful >= self.settings.retire_after_harmful and harmful > 2 * current.helpful:
            values_sql["status"] = "'retired'"
        if current.source == "team" and self.team is not None:
            self.team.rate(insight, values_sql)  # notes stay personal: they are not shared
            return self.get(insight)
        if note and note.strip():
            values_sql["notes"] = appended_note(sql_string(redact(note.strip())[:NOTE_MAX]))
        self.table.update(f"id = {sql_string(insight)}", values_sql)
        self._changed()
        return self.get(insight)

    def revise(self, insight: str, fields: dict[str, Any]) -> RecordResult:
        """Edit an insight of your memory in place: the new text goes through the lint
        (secrets and project names included) as `record`'s drafts do, and is embedded
        again. Its id, support, ratings, provenance and feedback history stay: they are
        about the lesson, which an edit words better. Rejected (nothing changes) with the
        lint's reasons, or when the new text says what another insight already says."""
        current = self.get(insight)
        if current.source == "team":
            raise InputError(f"{insight} is in the team pool: edit your own copy, or rate it there")
        editable = set(InsightDraft.model_fields)
        if unknown := sorted(set(fields) - editable):
            raise InputError(
                f"cannot edit {', '.join(unknown)}: only {', '.join(sorted(editable))}"
            )
        draft = {**current.model_dump(include=editable), **fields}
        results, accepted = ingest.screen([draft], None)
        result = results[0]
        result.id = insight
        if not accepted:
            return result
        self._check_model()
        with self._lock:
            item = accepted[0]
            vectors = self.embedder.embed_documents([item.draft.embedding_text()])
            # A field cleared by the edit is inferred, as `record` does: never stored null.
            [item.draft] = fill_labels(
                [item.draft], vectors, self.embedder, self.settings.models_dir
            )
            vector = vectors[0]
            snapshot = self._snapshot()
            similar = snapshot.vectors @ vector
            similar[~snapshot.active] = -np.inf
            own = snapshot.positions.get(insight)
            if own is not None:
                similar[own] = -np.inf
            best = int(np.argmax(similar)) if len(similar) else -1
            if best >= 0 and similar[best] >= self.settings.dedup_threshold:
                other = snapshot.records([best])[0]
                result.status = "rejected"
                result.reasons.append(
                    f"it would say what {other['id']} ('{redact(other['title'])}') says "
                    f"(similarity {float(similar[best]):.2f}): forget one of the two instead"
                )
                return result
            stored = self.get(insight)  # counters as they are now, under the write lock
            notes = [*stored.notes, "edited by hand"][-NOTES_KEPT:]
            row = {
                **stored.model_dump(),
                **item.draft.model_dump(),
                "updated_at": datetime.now(UTC),
                "abstraction_score": item.score,
                "notes": notes,
                "vector": vector.tolist(),
            }
            self.table.upsert([row])
        result.status = "stored"
        self._changed()
        return result

    def retire(self, insight: str, reason: str | None = None) -> Insight:
        """Retire an insight of your memory by hand: recall leaves it out until
        `reinstate`; the reason goes in its notes."""
        if reason and len(reason) > NOTE_MAX:
            raise InputError(f"{too_long('reason', len(reason), NOTE_MAX)} (say why briefly)")
        current = self.get(insight)
        if current.source == "team":
            raise InputError(
                f"{insight} is in the team pool: rate it harmful to retire it for the team"
            )
        if current.status == "retired":
            return current
        why = redact(reason.strip()) if reason and reason.strip() else "no reason given"
        note = sql_string(f"{HAND_NOTE}{why}"[:NOTE_MAX])
        self.table.update(
            f"id = {sql_string(insight)}", {"status": "'retired'", "notes": appended_note(note)}
        )
        self._changed()
        return self.get(insight)

    def forget(self, insight: str) -> Insight:
        """Delete one insight. Older table versions keep its text until compaction prunes
        them (an hour later at the earliest): `purge` removes it from disk at once."""
        current = self.get(insight)
        if current.source == "team":
            raise InputError(
                f"{insight} is in the team pool, not your memory: `mtl-mcp forget {insight} "
                "--purge` removes an insight you shared; rate one shared by others as "
                "harmful (rate_insight helpful=false) to retire it"
            )
        self.table.delete(f"id = {sql_string(insight)}")
        self._changed()
        return current

    def purge(self, ids: Collection[str]) -> tuple[int, int]:
        """Delete insights and every copy of them in the table's files, older versions
        included. Waits for other processes' writes; readers of older versions fail once
        and reload. Returns (insights deleted, versions removed)."""
        self._open()
        purged = self.table.purge(ids)
        self.loop.forget(ids)
        self._changed()
        return purged

    def share(
        self,
        ids: Sequence[str],
        dry_run: bool = False,
        policy: sharing.SharePolicy | None = None,
    ) -> builtins.list[ShareResult]:
        """Share insights of your memory with the team pool, after a second lint pass (and
        `policy`, if given); one result per id, in order, then any the outbox held.

        When the pool cannot take them now they wait in the outbox (status `queued`); every
        call first retries what waits there. `dry_run` only screens them.
        """
        team = self._team()
        ids = list(dict.fromkeys(ids))
        if not dry_run:
            ids += [i for i in team.outbox.pending() if i not in ids]
        results, ready = sharing.screen_ids(self._snapshot(), ids, policy)
        if not dry_run:
            team.deliver(ready, results, self._model_name, self.settings.dedup_threshold)
        return list(results.values())

    def share_candidates(self, policy: sharing.SharePolicy) -> builtins.list[str]:
        """Ids of the active insights `policy` would share that the pool lacks from you."""
        team = self._team()
        pool = team.snapshot()
        shared = team.shared_in(pool) if pool is not None else set()
        return sharing.candidates(self._snapshot(), shared, policy)

    def purge_shared(self, ids: Collection[str]) -> tuple[int, int]:
        """Purge from the team pool the insights among `ids` that you shared: the rows and
        every copy of them in its objects. Returns (insights deleted, versions removed)."""
        return self._team().purge(sorted(ids))

    def shared_insights(self) -> builtins.list[Insight]:
        """Every insight in the team pool that you shared, read from the pool now."""
        return self._team().shared_by_me()
