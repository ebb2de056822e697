"""Every object under a store's URI on object storage, read byte by byte: the remote half of a
purge's trace scan (`mtl_mcp.operations.purge.find_traces` is the local half).

LanceDB has no call that lists a table's files, so this reads the bucket with pyarrow's S3
client, configured from the same places LanceDB reads: the config file's [storage] options,
then the standard AWS_* variables and profiles. Only s3:// (and S3-compatible endpoints) is
scanned; other schemes are reported as not scanned, with what to do instead.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlparse

from mtl_mcp.errors import StoreError, StoreUnavailable

if TYPE_CHECKING:
    from pyarrow.fs import S3FileSystem

_CHUNK = 8 << 20
_OVERLAP = 16 << 10  # longer than any insight field, so no match straddles two chunks unseen
# LanceDB's option names (several spellings), then the environment variables it also reads.
_ENDPOINT = ("aws_endpoint", "endpoint", "aws_endpoint_url", "endpoint_url")
_ENDPOINT_ENV = ("AWS_ENDPOINT", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
_REGION = ("aws_region", "region")
_REGION_ENV = ("AWS_REGION", "AWS_DEFAULT_REGION")
_KEYS = {
    "access_key": ("aws_access_key_id", "access_key_id"),
    "secret_key": ("aws_secret_access_key", "secret_access_key"),
    "session_token": ("aws_session_token", "session_token", "token"),
}


class BinaryReader(Protocol):
    """A local file or an object-store stream, opened for reading bytes."""

    def read(self, size: int, /) -> bytes: ...


@dataclass
class ObjectScan:
    """Objects whose bytes match, and URIs that could not be scanned (with why)."""

    matches: list[str] = field(default_factory=list)
    unscanned: list[str] = field(default_factory=list)


def _option(options: Mapping[str, str], names: tuple[str, ...], env: tuple[str, ...]) -> str:
    lowered = {key.lower(): value for key, value in options.items()}
    for name in names:
        if lowered.get(name):
            return lowered[name]
    return next((os.environ[n] for n in env if os.environ.get(n)), "")


def _s3(options: Mapping[str, str]) -> S3FileSystem:
    from pyarrow.fs import S3FileSystem

    kwargs: dict[str, Any] = {"allow_bucket_creation": False, "allow_bucket_deletion": False}
    if endpoint := _option(options, _ENDPOINT, _ENDPOINT_ENV):
        kwargs["endpoint_override"] = endpoint
    if region := _option(options, _REGION, _REGION_ENV):
        kwargs["region"] = region
    for argument, names in _KEYS.items():
        if value := _option(options, names, ()):
            kwargs[argument] = value
    return S3FileSystem(**kwargs)


def scan_objects(uri: str, options: Mapping[str, str], pattern: re.Pattern[str]) -> ObjectScan:
    """Every object under `uri` whose bytes match `pattern` (decoded as UTF-8)."""
    scan = ObjectScan()
    parsed = urlparse(uri)
    if parsed.scheme not in ("s3", "s3a"):
        scan.unscanned.append(
            f"{uri}: only s3:// objects can be scanned here; the purge removed every older "
            "version through LanceDB, so check with your provider's tools if you must"
        )
        return scan
    root = f"{parsed.netloc}/{parsed.path.strip('/')}".rstrip("/")
    try:
        from pyarrow.fs import FileSelector, FileType

        s3 = _s3(options)
        for info in s3.get_file_info(FileSelector(root, recursive=True, allow_not_found=True)):
            if info.type != FileType.File:
                continue
            with s3.open_input_stream(info.path) as stream:
                if stream_matches(stream, pattern):
                    scan.matches.append(f"s3://{info.path}")
    except OSError as exc:  # pyarrow's S3 errors are OSErrors carrying the service's reason
        kind = StoreUnavailable if "connect" in str(exc).lower() else StoreError
        raise kind(f"scanning {uri} for traces failed ({exc}): run the purge again") from exc
    return scan


def stream_matches(stream: BinaryReader, pattern: re.Pattern[str]) -> bool:
    """Whether the bytes of `stream`, read in chunks, match `pattern` (as UTF-8)."""
    tail = b""
    while chunk := bytes(stream.read(_CHUNK)):
        window = tail + chunk
        if pattern.search(window.decode("utf-8", errors="surrogateescape")):
            return True
        tail = window[-_OVERLAP:]
    return False
