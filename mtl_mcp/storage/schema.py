"""The data format: the insight table's Arrow schema, the meta table, their names.

The store is two LanceDB tables in one database: `insights` (one row per insight, with its
vector) and `meta` (key/value: schema version, embedding model, vector dimension).

A team pool is the same two tables with one more column, `shared_by`: the opaque ids of the
members who shared each insight (its `support` counts them). Its meta table also holds a
random `project_salt`, so project identities reach the pool only as keyed hashes.
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa

TABLE = "insights"
META_TABLE = "meta"
SCHEMA_VERSION = 1
SHARED_BY = "shared_by"
# Field metadata making a column the unenforced primary key merge_insert relies on: two
# writers inserting one new key at once make one row.
PRIMARY_KEY = {b"lance-schema:unenforced-primary-key:position": b"1"}
PROJECT_SALT = "project_salt"
VECTOR = "vector"
# While a store is re-embedded (`storage.reembed`): the new vectors, then the replaced ones.
NEXT_VECTOR = "vector_next"
PREVIOUS_VECTOR = "vector_prev"
VECTOR_COLUMNS = frozenset({VECTOR, NEXT_VECTOR, PREVIOUS_VECTOR})
MODEL_KEY = b"mtl-mcp:embed-model"  # a vector column's field metadata: the model it is from


def insight_schema(dim: int, team: bool = False) -> pa.Schema:
    """The table's Arrow schema. `id` is the unenforced primary key merge_insert relies on."""
    text, texts, count = pa.string(), pa.list_(pa.string()), pa.int32()
    when = pa.timestamp("us", tz="UTC")
    return pa.schema(
        [
            pa.field("id", text, nullable=False, metadata=PRIMARY_KEY),
            *(pa.field(name, text) for name in ("title", "description", "content")),
            *(pa.field(name, text) for name in ("polarity", "category", "domain")),
            pa.field("languages", texts),
            pa.field("tags", texts),
            pa.field("project", text),
            pa.field("projects", texts),
            *(pa.field(name, text) for name in ("session_id", "client", "model")),
            pa.field("created_at", when),
            pa.field("updated_at", when),
            *(pa.field(name, count) for name in ("support", "helpful", "harmful", "recall_count")),
            pa.field("status", text),
            pa.field("abstraction_score", pa.float32()),
            pa.field("notes", texts),
            pa.field(VECTOR, pa.list_(pa.float32(), dim)),
            *([pa.field(SHARED_BY, texts)] if team else []),
        ]
    )


META_SCHEMA = pa.schema(
    [
        pa.field(
            "key",
            pa.string(),
            nullable=False,
            metadata=PRIMARY_KEY,
        ),
        pa.field("value", pa.string()),
    ]
)


def vector_model(schema: pa.Schema, meta: dict[str, str]) -> str | None:
    """The model the `vector` column of a table version is from: its field metadata, or, for
    a column written before re-embedding existed, the meta table's `embed_model`."""
    if VECTOR in schema.names:
        named = (schema.field(VECTOR).metadata or {}).get(MODEL_KEY)
        if named:
            return bytes(named).decode()
    return meta.get("embed_model")


def row_columns(schema: pa.Schema) -> list[str]:
    """The table's columns but its vectors: what a snapshot's rows hold."""
    return [name for name in schema.names if name not in VECTOR_COLUMNS]


def sql_string(value: str) -> str:
    """A string literal for a LanceDB SQL predicate or expression."""
    return "'" + value.replace("'", "''") + "'"


def ids_predicate(ids: Iterable[str]) -> str:
    """`id IN (...)` for some ids, sorted so the predicate is deterministic."""
    return f"id IN ({', '.join(sql_string(i) for i in sorted(ids))})"
