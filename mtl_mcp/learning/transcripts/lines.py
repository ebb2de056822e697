"""Bounded, forgiving access to a transcript file: lines, JSON records, format sniffing.

Files are read in binary, one line at a time with a byte cap, and decoded per line with
errors="replace": a 100 MB line, a stray invalid byte or binary garbage costs a skipped
line, never the whole file or the process's memory.
"""

from __future__ import annotations

import codecs
import json
import logging
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from mtl_mcp.errors import TranscriptError
from mtl_mcp.learning.transcripts.events import Collector, Format
from mtl_mcp.untrusted import NotRegularFile, open_regular

logger = logging.getLogger(__name__)

MAX_LINE_BYTES = 4 * 1024 * 1024
_DISCARD_CHUNK = 1024 * 1024
SNIFF_BYTES = 64 * 1024

_PASS_A_FILE = (
    "pass one transcript file: a Claude Code session (.jsonl under ~/.claude/projects/), "
    "a Codex rollout (.jsonl under ~/.codex/sessions/), an agent trajectory (.json) "
    "or a text/Markdown log"
)


def open_transcript(path: Path) -> IO[bytes]:
    """Open `path` for binary reading, as UTF-8: a UTF-16 or UTF-32 file (with a byte-order
    mark, or UTF-16 without one) is decoded into a spooled copy, a UTF-8 BOM is skipped.
    Anything else is read as it is, invalid bytes and all. Or say what to pass instead."""
    if not path.exists():
        raise TranscriptError(f"{path} does not exist: {_PASS_A_FILE}")
    if path.is_dir():
        raise TranscriptError(f"{path} is a directory: {_PASS_A_FILE} inside it")
    try:
        stream = open_regular(path)  # a FIFO or a device would block or never end
        head = stream.read(SNIFF_BYTES)
    except OSError as exc:
        raise TranscriptError(
            f"cannot read {path} ({exc.strerror or exc}): {_PASS_A_FILE}"
        ) from exc
    encoding = text_encoding(head)
    if encoding in (None, "utf-8"):
        stream.seek(0)
        return stream
    if encoding == "utf-8-sig":
        stream.seek(len(codecs.BOM_UTF8))
        return stream
    with stream:
        stream.seek(0)
        return _as_utf8(stream, encoding, path)


def _as_utf8(stream: IO[bytes], encoding: str, path: Path) -> IO[bytes]:
    """The stream decoded from `encoding` and encoded as UTF-8, in 1 MB chunks, into a
    temporary file that stays in memory up to 8 MB."""
    decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
    copy: IO[bytes] = tempfile.SpooledTemporaryFile(max_size=8 * 1024 * 1024)  # noqa: SIM115
    try:
        while chunk := stream.read(_DISCARD_CHUNK):
            copy.write(decoder.decode(chunk).encode("utf-8", errors="replace"))
        copy.write(decoder.decode(b"", final=True).encode("utf-8", errors="replace"))
    except OSError as exc:
        copy.close()
        raise TranscriptError(f"reading {path} failed part way ({exc}): {_PASS_A_FILE}") from exc
    copy.seek(0)
    return copy


# Byte-order marks, longest first: UTF-32 LE's starts with UTF-16 LE's.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
_NUL_SHARE_MAX = 0.01  # more NUL bytes than this in UTF-8 is binary data, not a stray byte
_INVALID_SHARE_MAX = 0.3  # more invalid bytes than this is not UTF-8 text


def text_encoding(head: bytes) -> str | None:
    """The encoding of a file that starts with `head`: named by its byte-order mark, UTF-16
    when every other byte is NUL (ASCII text in UTF-16 without a mark), else "utf-8".
    None when it is not text: NUL bytes in any other pattern, or mostly invalid UTF-8."""
    for bom, name in _BOMS:
        if head.startswith(bom):
            return name
    nuls = head.count(0)
    if nuls:
        even, odd = head[0::2], head[1::2]
        if odd.count(0) > 0.9 * len(odd) and even.count(0) < 0.1 * len(even):
            return "utf-16-le"
        if even.count(0) > 0.9 * len(even) and odd.count(0) < 0.1 * len(odd):
            return "utf-16-be"
        if nuls > _NUL_SHARE_MAX * len(head):
            return None
    if head.decode("utf-8", errors="replace").count("\ufffd") > _INVALID_SHARE_MAX * len(head):
        return None  # about one replacement character per invalid byte
    return "utf-8"


def not_text(path: Path) -> str | None:
    """Why `path` cannot be a transcript though it reads (binary data, or text in an
    encoding other than UTF-8, -16 and -32), or None. Cheap: it looks at the first 64 KB."""
    try:
        with open_regular(path) as stream:
            head = stream.read(SNIFF_BYTES)
    except OSError:
        return None  # open_transcript says why
    if text_encoding(head) is not None:
        return None
    if head.count(0) > _NUL_SHARE_MAX * len(head):
        found = f"it holds binary data ({head.count(0)} NUL bytes in its first {len(head)} bytes)"
    else:
        share = head.decode("utf-8", errors="replace").count("\ufffd") / len(head)
        found = (
            f"{share:.0%} of its first {len(head)} bytes are not UTF-8, so it is binary data "
            "or text in another encoding (convert text: `iconv -f <encoding> -t UTF-8 FILE`)"
        )
    return f"{path} is not a readable transcript: {found}. Instead, {_PASS_A_FILE}"


def _raw_lines(stream: IO[bytes]) -> Iterator[bytes | None]:
    """Each line's bytes, or None for a line longer than MAX_LINE_BYTES (then discarded)."""
    while line := stream.readline(MAX_LINE_BYTES + 1):
        if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
            # Drain the rest of the oversized line a chunk at a time; never hold it whole.
            while (rest := stream.readline(_DISCARD_CHUNK)) and not rest.endswith(b"\n"):
                pass
            yield None
        else:
            yield line


def text_lines(path: Path, sink: Collector, *, keep_blank: bool = False) -> Iterator[str]:
    """Each non-blank line, decoded (blank ones too, as "", if `keep_blank`).

    Oversized lines are counted as skipped and not yielded.
    """
    with open_transcript(path) as stream:
        try:
            for raw in _raw_lines(stream):
                if raw is None:
                    sink.total_lines += 1
                    sink.skipped += 1
                    sink.note(f"lines over {MAX_LINE_BYTES // (1024 * 1024)} MB were skipped")
                    continue
                line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                if line.strip():
                    sink.total_lines += 1
                    yield line
                elif keep_blank:
                    yield ""
        except OSError as exc:
            raise TranscriptError(
                f"reading {path} failed part way ({exc}): {_PASS_A_FILE}"
            ) from exc


def json_records(path: Path, sink: Collector) -> Iterator[dict[str, Any]]:
    """Each line that is a JSON object; anything else is counted as skipped."""
    for line in text_lines(path, sink):
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):  # not JSON, garbage, truncated, hostile nesting
            sink.skipped += 1
            continue
        if isinstance(record, dict):
            yield record
        else:
            sink.skipped += 1


CLAUDE_TYPES = frozenset({"user", "assistant", "summary", "file-history-snapshot", "progress"})
CODEX_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
_CLAUDE_KEYS = ("sessionId", "parentUuid", "isSidechain", "leafUuid")
_TRAJECTORY_KEYS = ("messages", "trajectory", "history", "steps", "trajectory_format")
_STEP_KEYS = ("role", "action", "observation")
# For a first line too long to parse within the sniffed bytes.
_CLAUDE_HINT = re.compile(
    r'"(?:parentUuid|sessionId|isSidechain)"\s*:'
    r'|^\{\s*"type"\s*:\s*"(?:user|assistant|summary|file-history-snapshot|progress)"'
)
_CODEX_HINT = re.compile(
    r'"type"\s*:\s*"(?:session_meta|response_item|event_msg|turn_context|compacted'
    r"|message|function_call|function_call_output|reasoning)\""
)
_DOCUMENT_HINT = re.compile(r'"(?:messages|trajectory|history|steps)"\s*:\s*\[')
_TRAJECTORY_HINT = re.compile(r'"(?:role|action|observation)"\s*:')


def _sniff_record(record: dict[str, Any], single_line: bool) -> Format | None:
    kind = record.get("type")
    kind = kind if isinstance(kind, str) else None  # JSON can put a list here: unhashable
    if "projectHash" in record and "sessionId" in record:
        return "gemini-cli"  # the first line of a Gemini CLI chat file
    if kind == "session.start" and isinstance(record.get("data"), dict):
        return "copilot-cli"  # the first line of a Copilot CLI events.jsonl
    if kind in CODEX_TYPES or ("payload" in record and "timestamp" in record):
        return "codex"
    if kind in CLAUDE_TYPES or any(key in record for key in _CLAUDE_KEYS):
        return "claude-code"
    if single_line and any(key in record for key in _TRAJECTORY_KEYS):
        return "trajectory"
    if any(key in record for key in _STEP_KEYS):
        return "trajectory"  # a JSONL of chat messages or agent steps
    return None


def detect_format(path: Path) -> Format:
    """Guess a transcript's format from its first few KB (never "auto")."""
    with open_transcript(path) as stream:
        try:
            head = stream.read(SNIFF_BYTES).decode("utf-8", errors="replace")
        except OSError as exc:
            raise TranscriptError(f"cannot read {path} ({exc}): {_PASS_A_FILE}") from exc
    head = head.lstrip("\ufeff \t\r\n")
    if not head.startswith(("{", "[")):
        return "text"
    first_line, _, rest = head.partition("\n")
    if head.startswith("[") or first_line.strip() == "{":
        return "trajectory"  # a JSON array, or a pretty-printed document
    try:
        first: object = json.loads(first_line)
    except (ValueError, RecursionError):
        first = None
    if isinstance(first, dict) and (found := _sniff_record(first, not rest.strip())):
        return found
    if _CLAUDE_HINT.search(head):
        return "claude-code"
    if _DOCUMENT_HINT.search(head):
        return "trajectory"
    if _CODEX_HINT.search(head):
        return "codex"
    if _TRAJECTORY_HINT.search(head):
        return "trajectory"
    logger.debug("%s looks like JSON of no known transcript shape; reading it as text", path)
    return "text"


# Enough for the opening exchange of any session; a hook reads no more than this.
CONVERSATION_SCAN_BYTES = 1024 * 1024


def _speaker(record: dict[str, Any]) -> object:
    """Who speaks in a message record (Claude Code, Codex or chat JSONL); None otherwise."""
    kind = record.get("type")
    if kind in ("user", "assistant") and isinstance(record.get("message"), dict):
        return kind
    payload = record.get("payload")
    if kind == "response_item" and isinstance(payload, dict) and payload.get("type") == "message":
        return payload.get("role")
    return record.get("role")


def missing_conversation(path: Path, budget: int = CONVERSATION_SCAN_BYTES) -> str | None:
    """Why `path` is no session worth distilling ("does not exist", "is empty", "holds no
    conversation"), or None when it is or may be one.

    Reads at most `budget` bytes. Only a JSON-lines transcript of a known shape that ends
    within the budget without both a user and an assistant message holds no conversation;
    anything this check cannot judge cheaply (another format, an unreadable file, more than
    `budget` bytes) is left to the worker, which reads it in full.
    """
    try:
        stream = open_regular(path)  # a FIFO would block the session-end hook
    except FileNotFoundError:
        return "does not exist"
    except IsADirectoryError:
        return "is a directory"
    except NotRegularFile:
        return "is not a regular file (a FIFO, a device or a socket)"
    except OSError:
        return None  # e.g. permissions: the worker's error shows in `mtl-mcp queue`
    speakers: set[object] = set()
    blank = True
    with stream:
        while budget > 0 and (line := stream.readline(budget)):
            budget -= len(line)
            if not line.strip():
                continue
            blank = False
            if budget <= 0:
                return None  # this line may be cut short
            try:
                record = json.loads(line)
            except (ValueError, RecursionError):
                return None  # not JSON lines
            if not isinstance(record, dict) or _sniff_record(record, single_line=False) is None:
                return None
            speakers.add(_speaker(record))
            if {"user", "assistant"} <= speakers:
                return None
    if budget <= 0:
        return None  # not read to its end
    return "is empty" if blank else "holds no conversation"
