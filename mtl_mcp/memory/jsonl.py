"""The JSONL exchange format: one insight per line, as `export` writes and `import` reads.

Reading is defensive: a bad line is reported by its number and skipped, never fatal, and a
line of any length is read in bounded memory.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

from pydantic import ValidationError

from mtl_mcp.schemas import Insight, InsightDraft, validation_problems

IMPORT_LINE_MAX = 1 << 20  # an exported insight is a few KB; longer lines are skipped unread


def read_import(path: Path) -> Iterator[tuple[int, Insight | InsightDraft | str]]:
    """(line number, parsed item or the reason it is unusable) for each non-blank line.

    A line with an `id` is an exported insight (stored as it was); one without is a draft.
    """
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
            try:
                data = json.loads(line)
                if not isinstance(data, dict):
                    raise ValueError("not a JSON object")
                model = Insight if "id" in data else InsightDraft
                yield number, model.model_validate(data)
            except ValidationError as exc:
                yield number, "; ".join(validation_problems(exc)[:3])
            except ValueError as exc:
                yield number, f"not a JSON object ({exc})"
            except RecursionError:
                yield number, "JSON nested too deeply to be an insight"


def count_lines(path: Path) -> int:
    """Newlines in a file, counted in chunks: one huge line is never held whole."""
    with path.open("rb") as handle:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))


def dump_jsonl(insights: Iterable[Insight]) -> Iterator[str]:
    """One JSON line per insight, the format `read_import` reads."""
    for insight in insights:
        # `source` says which store a listing came from; a file belongs to no store.
        yield json.dumps(insight.model_dump(mode="json", exclude={"source"}), ensure_ascii=False)
