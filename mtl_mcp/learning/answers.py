"""How often a backend's structured answers could be used: one line per answer, in
`<home>/answers.jsonl`, summed by `mtl-mcp stats`.

A backend that reads JSON out of free text (the OpenAI-compatible one: small local models
often ignore the schema) records how each answer ended:

    valid       the answer was the JSON object asked for
    recovered   it was wrapped in prose or a code fence, or almost JSON, and was mended
    repaired    it did not fit until the model was told why, once
    rejected    still unusable after that: the job stays queued and backs off

Lines hold no text of the session or the answer, only the backend, the step and the
outcome. Each is one O_APPEND write (`files.append_private`), so concurrent writers are
safe; a malformed line is skipped. Only the last `KEEP_LINES` are read.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from mtl_mcp.files import append_private

AnswerOutcome = Literal["valid", "recovered", "repaired", "rejected"]
OUTCOMES: tuple[AnswerOutcome, ...] = ("valid", "recovered", "repaired", "rejected")
KEEP_LINES = 10_000  # about 800 KB; older lines are ignored


def answers_file(home: Path) -> Path:
    return home / "answers.jsonl"


def record_answer(home: Path, backend: str, step: str, outcome: AnswerOutcome) -> None:
    """Append how one answer of `backend` at `step` ended."""
    line = json.dumps(
        {
            "ts": datetime.now(UTC).isoformat(timespec="seconds"),
            "backend": backend,
            "step": step,
            "outcome": outcome,
        },
        separators=(",", ":"),
    )
    append_private(answers_file(home), line)


def answer_summary(home: Path) -> dict[str, dict[str, float]]:
    """Per backend: how many answers ended each way, and `reject_rate` (rejected / all);
    empty when none was recorded."""
    try:
        lines = answers_file(home).read_bytes().splitlines()[-KEEP_LINES:]
    except FileNotFoundError:
        return {}
    counts: dict[str, Counter[str]] = {}
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict) or entry.get("outcome") not in OUTCOMES:
            continue
        counts.setdefault(str(entry.get("backend")), Counter())[entry["outcome"]] += 1
    summary: dict[str, dict[str, float]] = {}
    for backend, counted in sorted(counts.items()):
        total = sum(counted.values())
        row: dict[str, float] = {"answers": total, **{o: counted[o] for o in OUTCOMES}}
        row["reject_rate"] = round(counted["rejected"] / total, 4)
        summary[backend] = row
    return summary
