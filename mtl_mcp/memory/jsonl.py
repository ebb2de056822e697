"""The JSONL exchange format: one insight per line, as `export` writes and `import` reads.

Reading is defensive: a bad line is reported by its number and skipped, never fatal, and a
line of any length is read in bounded memory. A pretty-printed JSON document (an array of
insights, or one) is read too, whole, up to IMPORT_DOCUMENT_MAX.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mtl_mcp.schemas import Insight, InsightDraft, validation_problems

IMPORT_LINE_MAX = 1 << 20  # an exported insight is a few KB; longer lines are skipped unread
IMPORT_DOCUMENT_MAX = 64 << 20  # a JSON document is read whole: ~20,000 insights at most


def read_import(path: Path) -> Iterator[tuple[int, Insight | InsightDraft | str]]:
    """(line number, parsed item or the reason it is unusable) for each non-blank line.

    A line with an `id` is an exported insight (stored as it was); one without is a draft.
    A file holding one JSON document over several lines (an array of insights, or a single
    insight, as `jq .` prints them) is read as that document instead: each item is numbered
    by the line it starts on.
    """
    document, problem = _json_document(path)
    if document is not None:
        yield from _document_items(document)
        return
    with path.open("rb") as handle:
        number = 0
        while raw := handle.readline(IMPORT_LINE_MAX + 1):
            number += 1
            if len(raw) > IMPORT_LINE_MAX and not raw.endswith(b"\n"):
                while (rest := handle.readline(IMPORT_LINE_MAX)) and not rest.endswith(b"\n"):
                    pass  # drain the rest of the line a chunk at a time
                yield number, f"longer than {IMPORT_LINE_MAX >> 20} MB: not an insight"
                continue
            line = raw.decode("utf-8", errors="replace").strip()
            if not line:
                continue
            if problem is not None:  # the first line opens a document that cannot be read
                yield number, problem
                problem = None
                continue
            try:
                yield number, _item(json.loads(line))
            except ValueError as exc:
                yield number, f"not a JSON object ({exc})"
            except RecursionError:
                yield number, "JSON nested too deeply to be an insight"


_JSON_KINDS = {list: "array", str: "string", int: "number", float: "number", bool: "boolean"}


def _item(data: Any) -> Insight | InsightDraft | str:
    """An insight or a draft from one parsed JSON value, or why it is neither."""
    if not isinstance(data, dict):
        return f"not a JSON object (a JSON {_JSON_KINDS.get(type(data), 'value')})"
    model = Insight if "id" in data else InsightDraft
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        return "; ".join(validation_problems(exc)[:3])
    except RecursionError:
        return "JSON nested too deeply to be an insight"


def _opens_document(line: str) -> bool:
    """Whether a line is the start of a JSON array or object that goes on past it."""
    if not line.startswith(("[", "{")):
        return False
    try:
        json.loads(line)
    except json.JSONDecodeError as exc:
        return exc.pos >= len(line)  # the decoder ran out of text, not into garbage
    except (ValueError, RecursionError):
        return False
    return False


def _json_document(path: Path) -> tuple[str | None, str | None]:
    """The file's text if it is one JSON document over several lines, else None and, when
    its first line opens one that cannot be read, why (the first line's problem)."""
    with path.open("rb") as handle:
        while (first := handle.readline(IMPORT_LINE_MAX + 1)) and not first.strip():
            pass
    line = first.decode("utf-8", errors="replace").strip()
    if len(first) > IMPORT_LINE_MAX or not _opens_document(line):
        return None, None
    expected = (
        "import reads JSONL (one insight per line, as `mtl-mcp export` writes it) or one "
        "JSON document (an array of insights, or a single insight)"
    )
    if path.stat().st_size > IMPORT_DOCUMENT_MAX:
        return None, (
            f"this looks like a JSON document over {IMPORT_DOCUMENT_MAX >> 20} MB: {expected} "
            "of at most that size; convert it to JSONL, e.g. `jq -c '.[]' FILE > FILE.jsonl`"
        )
    text = path.read_bytes().decode("utf-8", errors="replace")
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return None, (
            f"this looks like a JSON document, but it is not valid JSON ({exc.msg} at line "
            f"{exc.lineno} column {exc.colno}): fix it; {expected}"
        )
    except (ValueError, RecursionError):
        return None, f"this looks like a JSON document, but it cannot be read: {expected}"
    return text, None


def _document_items(text: str) -> Iterator[tuple[int, Insight | InsightDraft | str]]:
    """The items of a valid JSON document (an array, or one object), each numbered by the
    line it starts on."""
    decoder = json.JSONDecoder()
    at = _skip_blank(text, 0)
    if not text.startswith("[", at):
        yield text.count("\n", 0, at) + 1, _item(json.loads(text))
        return
    at = _skip_blank(text, at + 1)
    while not text.startswith("]", at):
        value, end = decoder.raw_decode(text, at)  # valid JSON: parsed once already
        yield text.count("\n", 0, at) + 1, _item(value)
        at = _skip_blank(text, end)
        if text.startswith(",", at):
            at = _skip_blank(text, at + 1)


def _skip_blank(text: str, at: int) -> int:
    """The position of the first character from `at` that is not JSON whitespace."""
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    return at


def count_lines(path: Path) -> int:
    """Newlines in a file, counted in chunks: one huge line is never held whole."""
    with path.open("rb") as handle:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))


def dump_jsonl(insights: Iterable[Insight]) -> Iterator[str]:
    """One JSON line per insight, the format `read_import` reads."""
    for insight in insights:
        # `source` says which store a listing came from; a file belongs to no store.
        yield json.dumps(insight.model_dump(mode="json", exclude={"source"}), ensure_ascii=False)
