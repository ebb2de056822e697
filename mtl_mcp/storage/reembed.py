"""Re-embedding a store in place, while it is in use.

The new vectors fill a second column, `vector_next`, a batch at a time and in any process,
while recall keeps reading `vector` with the model that made it; a row written meanwhile
gets `vector_next` null and is embedded in a later batch, an edited one too (its text is
compared before its new vector is kept). Once every row has one, a single commit renames
`vector` to `vector_prev` and `vector_next` to `vector`: which model a vector column is
from travels in its field metadata (`vector_model`), so a reader of any table version knows
which model to embed its queries with, without a second lookup that could be stale. Then the
old column is dropped and the meta table names the new model (for older releases, backups
and doctor).

Nothing is lost if a process stops at any point: the next one goes on from the rows that
still lack a new vector.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from mtl_mcp.storage.lance import lance_errors
from mtl_mcp.storage.locks import store_lock
from mtl_mcp.storage.schema import MODEL_KEY, NEXT_VECTOR, PREVIOUS_VECTOR, VECTOR, vector_model

if TYPE_CHECKING:
    from mtl_mcp.storage.table import InsightTable

TEXT_COLUMNS = ["title", "description", "content"]
ADVICE = "the re-embedding goes on from where it stopped next time; `mtl-mcp doctor` says more"


def target(schema: pa.Schema) -> str | None:
    """The model a re-embedding under way is filling `vector_next` with, if one is."""
    if NEXT_VECTOR not in schema.names:
        return None
    named = (schema.field(NEXT_VECTOR).metadata or {}).get(MODEL_KEY)
    return bytes(named).decode() if named else None


def begin(table: InsightTable, model: str, dim: int) -> None:
    """Add the `vector_next` column for `model` (null in every row), unless it is there; one
    for another model (the configuration changed meanwhile) is dropped first."""
    with store_lock(table.local, exclusive=True), lance_errors(f"re-embedding {table.uri}", ADVICE):
        handle = table.open()
        current = target(handle.schema)
        if current == model:
            return
        if current is not None:
            handle.drop_columns([NEXT_VECTOR])
        field = pa.field(NEXT_VECTOR, pa.list_(pa.float32(), dim), metadata={MODEL_KEY: model})
        handle.add_columns([field])
    table.forget_snapshot()


def pending(table: InsightTable, limit: int) -> list[dict[str, Any]]:
    """Up to `limit` rows without a new vector yet: their ids and texts."""
    return table.read(f"{NEXT_VECTOR} IS NULL", ["id", *TEXT_COLUMNS], limit=limit)


def progress(table: InsightTable) -> tuple[int, int]:
    """(rows with their new vector, rows in all) of the re-embedding under way."""
    handle = table.open()
    with lance_errors(f"reading {table.uri}", ADVICE):
        total = handle.count_rows()
        if NEXT_VECTOR not in handle.schema.names:
            return 0, total
        return total - handle.count_rows(f"{NEXT_VECTOR} IS NULL"), total


def fill(table: InsightTable, rows: list[dict[str, Any]], vectors: npt.NDArray[np.float32]) -> None:
    """Store the new vectors of `rows` (as `pending` gave them); a row whose text changed
    since keeps none, and is embedded again in a later batch. Recall's snapshot does not hold
    this column: this process's is kept, at the new version."""
    schema = table.open().schema
    columns = {name: [row[name] for row in rows] for name in ("id", *TEXT_COLUMNS)}
    flat = pa.array(np.ascontiguousarray(vectors, np.float32).ravel())
    columns[NEXT_VECTOR] = pa.FixedSizeListArray.from_arrays(flat, vectors.shape[1])
    fields = [schema.field(name) for name in ("id", *TEXT_COLUMNS, NEXT_VECTOR)]
    data = pa.table(columns, schema=pa.schema(fields))
    unchanged = " AND ".join(
        f"(target.{c} = source.{c} OR (target.{c} IS NULL AND source.{c} IS NULL))"
        for c in TEXT_COLUMNS
    )
    table.write(
        lambda t: t.merge_insert("id").when_matched_update_all(where=unchanged).execute(data),
        patch=lambda snapshot: snapshot.same_rows(),
    )


def finish(table: InsightTable) -> bool:
    """Swap the columns if every row has its new vector (writers wait meanwhile); whether it
    did. Then the meta table names the new model and the old column goes."""
    with store_lock(table.local, exclusive=True), lance_errors(f"re-embedding {table.uri}", ADVICE):
        handle = table.open()
        model = target(handle.schema)
        if model is None or handle.count_rows(f"{NEXT_VECTOR} IS NULL"):
            return False
        # One commit: a reader sees the old columns or the new ones. (lancedb 0.40 types each
        # alteration as an Iterable of dicts; it takes dicts.)
        swap: Any = (
            {"path": VECTOR, "rename": PREVIOUS_VECTOR},
            {"path": NEXT_VECTOR, "rename": VECTOR},
        )
        handle.alter_columns(*swap)
        table.forget_snapshot()
    tidy(table)
    return True


def leftover(table: InsightTable) -> bool:
    """Whether a swap left its old column (or the meta table its old model) behind."""
    handle = table.open()
    return PREVIOUS_VECTOR in handle.schema.names or (
        vector_model(handle.schema, {}) not in (None, table.meta.get("embed_model"))
    )


def tidy(table: InsightTable) -> None:
    """After a swap (or one cut short after its commit): drop the old column, and record the
    new model in the meta table."""
    with store_lock(table.local, exclusive=True), lance_errors(f"re-embedding {table.uri}", ADVICE):
        handle = table.open()
        model = vector_model(handle.schema, {})
        if PREVIOUS_VECTOR in handle.schema.names:
            handle.drop_columns([PREVIOUS_VECTOR])
        if model and table.meta.get("embed_model") != model:
            table.set_meta({"embed_model": model})
