"""LanceDB, at its boundary: connections, and its errors translated by one table.

LanceDB raises builtin exceptions (RuntimeError, OSError, ValueError) carrying the Rust
error's message, so the table classifies by type and message. Nothing above the storage
layer sees a LanceDB exception.
"""

from __future__ import annotations

import contextlib
import os
import re
import warnings
from collections.abc import Collection, Iterator
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from mtl_mcp.config import private_umask
from mtl_mcp.errors import MtlError, StoreBusy, StoreDamaged, StoreError
from mtl_mcp.storage.schema import ids_predicate

if TYPE_CHECKING:
    from lancedb.db import DBConnection
    from lancedb.table import Table

# (exception types, message pattern, our class): the first row that matches decides.
_Translation = tuple[tuple[type[BaseException], ...], re.Pattern[str], type[StoreError]]
_TRANSLATIONS: tuple[_Translation, ...] = (
    # Optimistic concurrency: another writer committed first. Retrying the write helps.
    ((RuntimeError, OSError, ValueError), re.compile(r"conflict|retryable", re.I), StoreBusy),
    # A data file, manifest or index that is missing, truncated or overwritten.
    (
        (OSError, RuntimeError, ValueError),
        re.compile(
            r"not found|no such file|does not exist|corrupt|unexpected eof|footer|manifest"
            r"|invalid (?:data|file|magic)|failed to fill whole buffer|out of range",
            re.I,
        ),
        StoreDamaged,
    ),
)
_RUST_LOCATION = re.compile(r",\s*/\S+\.rs:\d+:\d+")


def lance_message(exc: BaseException) -> str:
    """A LanceDB error's message without the Rust source location it ends with."""
    return _RUST_LOCATION.sub("", str(exc)).strip() or type(exc).__name__


def classify(exc: BaseException) -> type[StoreError]:
    """Our error class for a LanceDB exception."""
    for types, pattern, ours in _TRANSLATIONS:
        if isinstance(exc, types) and pattern.search(str(exc)):
            return ours
    return StoreError


@contextlib.contextmanager
def lance_errors(doing: str, advice: str) -> Iterator[None]:
    """Translate any LanceDB exception raised in the block: "<doing> failed (<why>): <advice>".

    Our own errors pass through unchanged.
    """
    try:
        yield
    except MtlError:
        raise
    except Exception as exc:  # the one boundary: lance raises assorted builtin types
        raise classify(exc)(f"{doing} failed ({lance_message(exc)}): {advice}") from exc


def connect(uri: str | Path, *, consistent: bool = False) -> DBConnection:
    """A LanceDB connection; `consistent` re-checks the latest version on every read, so
    other processes' writes are seen at once."""
    os.environ.setdefault("LANCEDB_LOG", "error")  # Rust-side warnings would hit stderr per query
    import lancedb

    private_umask()  # LanceDB's own files too: insights are private to their owner
    with lance_errors(
        f"opening the store at {uri}", "check the path and its permissions, or run `mtl-mcp doctor`"
    ):
        if consistent:
            return lancedb.connect(str(uri), read_consistency_interval=timedelta(0))
        return lancedb.connect(str(uri))


def rewrite_without(table: Table, ids: Collection[str]) -> tuple[int, int]:
    """Delete rows by id and leave no copy of them in any file of the table's directory.

    Lance deletes are soft and compaction skips a fragment with few deleted rows, so every
    remaining row is rewritten into new files; then every older version and any file no
    version references is removed. Ids, not the matched text, go into the delete predicate:
    Lance keeps a delete's predicate in its transaction file. Returns (rows deleted,
    versions removed). Callers hold the store lock exclusively.
    """
    before = table.count_rows()
    if ids:
        table.delete(ids_predicate(ids))
    deleted = before - table.count_rows()
    table.update(where="true", values_sql={"status": "status"})
    versions = len(table.list_versions())
    with warnings.catch_warnings():
        # It warns that readers of older versions will fail: the purge is meant to do that.
        warnings.simplefilter("ignore", UserWarning)
        table.optimize(cleanup_older_than=timedelta(0), delete_unverified=True)
    return deleted, versions - len(table.list_versions())
