"""Read the event log: JSON Lines, one JSON object per line."""

import json


class BadRecord(ValueError):
    """A line of the log is not a JSON object; `line` is its 1-based number in the file."""

    def __init__(self, line: int, reason: str):
        super().__init__(f"line {line}: {reason}")
        self.line = line


def read_events(path) -> list[dict]:
    """The events in the log at `path`, in order.

    Blank lines (a trailing newline, an editor's empty last line) are skipped; any other
    line that is not a JSON object raises BadRecord with the line's number in the file.
    """
    events = []
    with open(path, encoding="utf-8") as f:
        lines = [line for line in f if line.strip()]
    for number, line in enumerate(lines, start=1):
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise BadRecord(number, exc.msg) from exc
    return events
