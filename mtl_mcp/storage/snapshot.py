"""An in-memory snapshot of the insight table for fast recall and listing.

LanceDB's flat search costs ~11 ms at 10k rows and ~220 ms at 100k on two cores, while a
float32 matrix-vector product over 100k x 384 costs ~14 ms. So the store keeps the table's
rows as an Arrow table (without vectors) plus one contiguous unit-norm matrix, tagged with
the table version they were read at, and reloads them when another process has written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from mtl_mcp.config import return_free_heap
from mtl_mcp.storage.schema import VECTOR, row_columns

if TYPE_CHECKING:
    from lancedb.table import Table

Mask = npt.NDArray[np.bool_]
# What a snapshot works out about its rows once (cached properties) and hands on to the ones
# this process's own writes make from it: the ids, their positions, active rows, ratings.
_CARRIED = ("ids", "positions", "active", "rating")


@dataclass
class Snapshot:
    """Rows of one table version: `rows` (Arrow, no vectors) and `vectors` aligned with it.

    A snapshot never changes once readers have it: this process's own writes make a new one
    from it (`appended`, `with_recall_counts`), so its next read needs no reload and a recall
    running meanwhile keeps a consistent view. Snapshots made that way share a `lineage`
    (and the matrix, which grows into spare room); `generation` counts the appends, for
    caches built over the rows.
    """

    version: int
    rows: pa.Table
    matrix: npt.NDArray[np.float32]  # the vectors, with room to append (rows beyond len unused)
    generation: int = 0
    lineage: object = field(default_factory=object, repr=False)
    model: str | None = None  # the embedding model of the vectors (`reembed.vector_model`)
    _project_masks: dict[str, Mask] = field(default_factory=dict, repr=False)

    @property
    def vectors(self) -> npt.NDArray[np.float32]:
        """One unit-norm row per insight, aligned with `rows`."""
        return self.matrix[: len(self)]

    @classmethod
    def load(cls, table: Table, dim: int) -> Snapshot:
        """Read `table` (a handle checked out at one version) without holding its vectors twice.

        Rows come in one scan without the vector column; vectors stream in batches into one
        preallocated matrix, so peak memory is the matrix plus one batch.
        """
        names = row_columns(table.schema)
        # One chunk: `take` on a table of many small scan batches costs ~15 ms at 100k rows.
        rows = table.search().select(names).limit(None).to_arrow().combine_chunks()
        vectors = np.empty((rows.num_rows, dim), dtype=np.float32)
        filled = 0
        ids = rows.column("id")
        for batch in table.search().select(["id", VECTOR]).limit(None).to_batches(8192):
            count = batch.num_rows
            if filled + count > len(vectors) or not ids.slice(filled, count).equals(
                pa.chunked_array([batch.column(0)])
            ):
                raise RuntimeError("the two scans of one table version disagree on row order")
            flat = batch.column(1).values.to_numpy(zero_copy_only=False)
            vectors[filled : filled + count] = flat.reshape(count, dim)
            filled += count
        if filled != len(vectors):
            raise RuntimeError("the vector scan returned fewer rows than the row scan")
        return_free_heap()  # what the two scans allocated and freed
        return cls(version=table.version, rows=rows, matrix=vectors)

    def __len__(self) -> int:
        return int(self.rows.num_rows)

    @cached_property
    def active(self) -> Mask:
        """Rows that may be recalled (not retired)."""
        return self.column_mask("status", ["active"])

    @cached_property
    def rating(self) -> npt.NDArray[np.float32]:
        """Per row, in [-1, 1]: (helpful - harmful) smoothed so one rating moves it a little."""
        helpful = self._numbers("helpful")
        harmful = self._numbers("harmful")
        signal: npt.NDArray[np.float32] = (helpful - harmful) / (helpful + harmful + 2.0)
        return signal

    def texts(self, start: int = 0) -> pa.ChunkedArray:
        """Each row's title, description and content as one string (from row `start` on):
        what BM25 indexes.

        Patches keep rows in place and never touch these columns; a change to the row set
        makes a new snapshot.
        """
        rows = self.rows.slice(start) if start else self.rows
        return pc.binary_join_element_wise(
            *(rows.column(name).fill_null("") for name in ("title", "description")),
            rows.column("content").fill_null(""),
            " ",
        )

    @cached_property
    def lowered(self) -> pa.ChunkedArray:
        """`texts()` in lower case, for substring search (built once per snapshot)."""
        return pc.utf8_lower(self.texts())

    def contains(self, word: str) -> Mask:
        """Rows whose title, description or content holds `word` (lower case) anywhere."""
        found = pc.match_substring(self.lowered, word)
        return np.asarray(found.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)

    def counts(self, name: str) -> npt.NDArray[np.int64]:
        """An integer column as numbers (null as 0)."""
        values = self.rows.column(name).fill_null(0).to_numpy(zero_copy_only=False)
        return np.asarray(values, dtype=np.int64)

    @cached_property
    def ids(self) -> npt.NDArray[np.str_]:
        """The ids as a numpy array, for recall's tie-breaks by name (built once a snapshot)."""
        return np.asarray(self.rows.column("id").to_pylist(), dtype=str)

    @cached_property
    def positions(self) -> dict[str, int]:
        """Row position of each id."""
        return {insight: n for n, insight in enumerate(self.rows.column("id").to_pylist())}

    def _numbers(self, name: str) -> npt.NDArray[np.float32]:
        values = self.rows.column(name).to_numpy(zero_copy_only=False)
        numbers: npt.NDArray[np.float32] = np.nan_to_num(values.astype(np.float32))
        return numbers

    def appended(self, rows: pa.Table, vectors: npt.NDArray[np.float32]) -> Snapshot:
        """This snapshot with rows this process inserted (ids already here are skipped, as
        the insert did)."""
        new = [n for n, i in enumerate(rows.column("id").to_pylist()) if i not in self.positions]
        if not new:
            return replace(self, _project_masks={})
        count, added = len(self), len(new)
        matrix = self.matrix
        if count + added > len(matrix):  # grow by a quarter: appends stay amortized O(1)
            matrix = np.empty((max(count + added, count * 5 // 4), matrix.shape[1]), np.float32)
            matrix[:count] = self.vectors
        # Rows beyond `count` are no reader's: this snapshot's views stop at its own length.
        matrix[count : count + added] = vectors[new]
        combined = pa.concat_tables([self.rows, rows.take(new).cast(self.rows.schema)])
        # `take` slows down over many chunks: fold them once there are a few.
        folded = combined.combine_chunks() if combined.column(0).num_chunks > 16 else combined
        grown = replace(
            self, rows=folded, matrix=matrix, generation=self.generation + 1, _project_masks={}
        )
        return self._carrying(grown, rows.take(new))

    def with_rows(self, changed: pa.Table) -> Snapshot:
        """This snapshot with some of its rows replaced by `changed` (the same ids, read back
        after an update that left their texts, status and ratings as they were)."""
        positions = [self.positions[i] for i in changed.column("id").to_pylist()]
        index = np.arange(len(self), dtype=np.int64)
        index[positions] = len(self) + np.arange(len(positions))
        both = pa.concat_tables([self.rows, changed.select(self.rows.column_names)])
        rows = both.cast(self.rows.schema).take(pa.array(index)).combine_chunks()
        return self._carrying(replace(self, rows=rows, _project_masks={}))

    def same_rows(self) -> Snapshot:
        """This snapshot for a write that changed none of what it holds (new vectors in a
        column it does not read: `reembed.fill`)."""
        return self._carrying(replace(self))

    def _carrying(self, other: Snapshot, added: pa.Table | None = None) -> Snapshot:
        """`other` (these rows in the same order, then `added`) with what this one worked out
        about its rows carried over, where it did: a record at 100k rows would otherwise
        index every id again (~30 ms)."""
        known = {name: self.__dict__[name] for name in _CARRIED if name in self.__dict__}
        if added is not None and known:
            tail = Snapshot(self.version, added, np.zeros((0, self.matrix.shape[1]), np.float32))
            if "positions" in known:
                grown = dict(known["positions"])
                grown.update((i, len(self) + n) for n, i in enumerate(tail.ids.tolist()))
                known["positions"] = grown
            for name in ("ids", "active", "rating"):
                if name in known:
                    known[name] = np.concatenate([known[name], getattr(tail, name)])
        other.__dict__.update(known)
        return other

    def with_recall_counts(self, counts: Mapping[str, int]) -> Snapshot:
        """This snapshot after a recall-count flush, so this process's own write costs no
        reload (the rows' order and texts are unchanged)."""
        delta = np.zeros(len(self), dtype=np.int32)
        for insight, count in counts.items():
            if (position := self.positions.get(insight)) is not None:
                delta[position] = count
        index = self.rows.schema.get_field_index("recall_count")
        current = self.rows.column(index).fill_null(0)
        updated = pc.add(current, pa.array(delta, pa.int32())).cast(pa.int32())
        rows = self.rows.set_column(index, self.rows.schema.field(index), updated)
        return self._carrying(replace(self, rows=rows, _project_masks={}))

    def column_mask(self, name: str, values: Iterable[str]) -> Mask:
        """Rows whose `name` column is one of `values`."""
        result = pc.is_in(self.rows.column(name), value_set=pa.array(list(values), pa.string()))
        return np.asarray(result.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)

    def project_mask(self, project: str) -> Mask:
        """Rows that any session of `project` produced (memoized per project)."""
        if project not in self._project_masks:
            projects = self.rows.column("projects").combine_chunks()
            flat = pc.equal(pc.list_flatten(projects), project).fill_null(False)
            parents = pc.list_parent_indices(projects).to_numpy(zero_copy_only=False)
            mask = np.zeros(len(self), dtype=bool)
            mask[parents[flat.to_numpy(zero_copy_only=False)]] = True
            self._project_masks[project] = mask
        return self._project_masks[project]

    def similarities(
        self, query: npt.NDArray[np.float32], mask: Mask | None
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """Row indices passing `mask` and their cosine similarity to a unit-norm `query`."""
        scores = self.vectors @ query  # one pass over the matrix; gathering rows first copies it
        if mask is None:
            return np.arange(len(self), dtype=np.int64), scores
        indices = np.flatnonzero(mask)
        return indices, scores[indices]

    def records(
        self, indices: Sequence[int], columns: Sequence[str] | None = None
    ) -> list[dict[str, Any]]:
        """The rows at `indices`, in that order, as dicts (of only `columns`, if given)."""
        table = self.rows if columns is None else self.rows.select(list(columns))
        rows: list[dict[str, Any]] = table.take(pa.array(indices, pa.int64())).to_pylist()
        return rows
