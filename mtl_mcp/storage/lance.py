"""LanceDB, at its boundary: connections, and its errors translated by one table.

LanceDB raises builtin exceptions (RuntimeError, OSError, ValueError) carrying the Rust
error's message, so the table classifies by type and message. Nothing above the storage
layer sees a LanceDB exception.

A store may be a directory or an object-store URI (s3://, gs://, az://, ...). LanceDB reads
credentials from the standard environment and profiles; `Settings.storage` (the config
file's [storage] table) adds options such as an S3-compatible endpoint, over timeouts of
our own: LanceDB's defaults wait minutes for a server that accepts connections and never
answers.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
import warnings
from collections.abc import Collection, Iterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mtl_mcp.config import local_path, private_umask
from mtl_mcp.errors import (
    MtlError,
    StoreBusy,
    StoreDamaged,
    StoreError,
    StoreReadOnly,
    StoreUnavailable,
)
from mtl_mcp.files import READ_ONLY_ADVICE
from mtl_mcp.storage.schema import ids_predicate
from mtl_mcp.text.redact import redact

if TYPE_CHECKING:
    from lancedb.db import DBConnection
    from lancedb.table import Table

# (exception types, message pattern, our class): the first row that matches decides.
_Translation = tuple[tuple[type[BaseException], ...], re.Pattern[str], type[StoreError]]
_LANCE = (RuntimeError, OSError, ValueError)
_TRANSLATIONS: tuple[_Translation, ...] = (
    # Optimistic concurrency: another writer committed first. Retrying the write helps.
    # (An overwrite by a restore or reindex elsewhere makes an update "incompatible".)
    (
        _LANCE,
        re.compile(
            r"conflict|retryable|too many concurrent writers|incompatible transaction", re.I
        ),
        StoreBusy,
    ),
    # A write to a read-only mount or a directory of another user: nothing is damaged.
    (
        _LANCE,
        re.compile(
            r"read-only file system|permission denied|operation not permitted"
            r"|os error (?:1|13|30)\b",
            re.I,
        ),
        StoreReadOnly,
    ),
    # A bucket that does not exist is a setting to fix, not damage or an outage.
    (_LANCE, re.compile(r"NoSuchBucket|bucket does not exist", re.I), StoreError),
    # The object store did not answer: network, endpoint or service down. Nothing changed.
    (
        _LANCE,
        re.compile(
            r"error sending request|connection refused|tcp connect|timed out|dns error"
            r"|connection reset|connection closed|broken pipe|failed to connect to namespace"
            r"|service unavailable|slow ?down",
            re.I,
        ),
        StoreUnavailable,
    ),
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
# Where in its Rust source a LanceDB error was raised: ", /path/x.rs:12:34", or (lance-io)
# ", location: Location { file: "/path/x.rs", line: 12, column: 34 }, backtrace: ...".
_RUST_LOCATION = re.compile(
    r",\s*(?:/\S+\.rs:\d+:\d+|location:\s*Location\s*\{[^}]*\}(?:,\s*backtrace:\s*\w+)?)"
)


# Bounds on every request to an object store; the config file's [storage] overrides them.
REMOTE_DEFAULTS = {
    "connect_timeout": "2s",
    "timeout": "30s",
    "client_max_retries": "2",
    "client_retry_timeout": "10",
}


def lance_message(exc: BaseException) -> str:
    """A LanceDB error's message without the Rust source location it ends with, any secret
    the redactor recognizes replaced, and cut to a readable length (an object-store error
    can run to kilobytes of nested debug output)."""
    message = _RUST_LOCATION.sub("", str(exc)).strip() or type(exc).__name__
    message = redact(message)
    return message if len(message) <= 600 else message[:600] + "…"


def classify(exc: BaseException) -> type[StoreError]:
    """Our error class for a LanceDB exception."""
    for types, pattern, ours in _TRANSLATIONS:
        if isinstance(exc, types) and pattern.search(str(exc)):
            return ours
    return StoreError


@contextlib.contextmanager
def lance_errors(doing: str, advice: str) -> Iterator[None]:
    """Translate any LanceDB exception raised in the block: "<doing> failed (<why>): <advice>".

    Our own errors pass through unchanged. A read-only store gets its own advice: nothing
    is damaged, and retrying will not help.
    """
    try:
        yield
    except MtlError:
        raise
    except Exception as exc:  # the one boundary: lance raises assorted builtin types
        ours = classify(exc)
        if ours is StoreReadOnly:
            advice = READ_ONLY_ADVICE
        raise ours(f"{doing} failed ({lance_message(exc)}): {advice}") from exc


# LanceDB's default session caches the metadata of every table version it reads, up to 1 GiB;
# each write makes a version, so a 10k import with merges grew ~85 MB per 1,000 lines (and a
# long-lived service would too). Capped and shared by every connection of the process, the
# import stayed flat (~360 MB) at about the same speed: recall reads from our own snapshot.
CACHE_BYTES = 16 * 2**20
_SESSION: Any = None
_SESSION_LOCK = threading.Lock()


def _defer_namespace_client() -> None:
    """Before `import lancedb`: that import then goes without running the `__init__` of the
    REST namespace client it imports (its generated API classes: 40% of the import time and
    14 MB) until something asks for one of that package's own names, which a local or an
    object-store connection never does."""
    import importlib.util

    name = "lance_namespace_urllib3_client"
    if name not in sys.modules and (spec := importlib.util.find_spec(name)) is not None:
        package = importlib.util.module_from_spec(spec)
        loader = spec.loader

        def __getattr__(attribute: str) -> Any:
            del package.__dict__["__getattr__"]
            assert loader is not None
            loader.exec_module(package)  # its submodules imported so far stay as they are
            return getattr(package, attribute)

        package.__getattr__ = __getattr__  # type: ignore[method-assign]
        sys.modules[name] = package


def _session() -> Any:
    global _SESSION
    _defer_namespace_client()
    import lancedb

    with _SESSION_LOCK:
        if _SESSION is None:
            _SESSION = lancedb.Session(
                index_cache_size_bytes=CACHE_BYTES, metadata_cache_size_bytes=CACHE_BYTES
            )
        return _SESSION


def connect(
    uri: str | Path,
    *,
    consistent: bool = False,
    storage_options: Mapping[str, str] | None = None,
) -> DBConnection:
    """A LanceDB connection; `consistent` re-checks the latest version on every read, so
    other processes' writes are seen at once (on object storage that costs a LIST request
    per read: callers there refresh on an interval instead).

    `storage_options` apply to object-store URIs only, over REMOTE_DEFAULTS.
    """
    os.environ.setdefault("LANCEDB_LOG", "error")  # Rust-side warnings would hit stderr per query
    _defer_namespace_client()
    import lancedb

    private_umask()  # LanceDB's own files too: insights are private to their owner
    remote = local_path(str(uri)) is None
    advice = (
        "check the URI, the endpoint and credentials ([storage] in config.toml, or the "
        "standard AWS_/GOOGLE_/AZURE_ variables) and that the object store is up"
        if remote
        else "check the path and its permissions, or run `mtl-mcp doctor`"
    )
    with lance_errors(f"opening the store at {uri}", advice):
        if remote:
            options = {**REMOTE_DEFAULTS, **(storage_options or {})}
            return lancedb.connect(str(uri), storage_options=options, session=_session())
        if consistent:
            return lancedb.connect(
                str(uri), read_consistency_interval=timedelta(0), session=_session()
            )
        return lancedb.connect(str(uri), session=_session())


def rewrite_without(
    table: Table, ids: Collection[str], *, others_may_write: bool = False
) -> tuple[int, int]:
    """Delete rows by id and leave no copy of them in any file of the table's directory.

    Lance deletes are soft and compaction skips a fragment with few deleted rows, so every
    remaining row is rewritten into new files; then every older version and any file no
    version references is removed. Ids, not the matched text, go into the delete predicate:
    Lance keeps a delete's predicate in its transaction file. Returns (rows deleted,
    versions removed).

    Callers hold the store lock exclusively, or, on object storage where no lock reaches
    other machines, pass `others_may_write`: then files no version references yet (another
    writer's commit in flight) are left alone; removing them breaks the table for good.
    The older versions' files are still removed.
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
        table.optimize(cleanup_older_than=timedelta(0), delete_unverified=not others_may_write)
    return deleted, versions - len(table.list_versions())
