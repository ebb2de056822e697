"""Durations in job configs: '90s', '15m', '1h30m', '2d 4h'."""

import re

UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
# each unit at most once, largest first; spaces between the parts
DURATION = re.compile(r"(?:(\d+)d)?\s*(?:(\d+)h)?\s*(?:(\d+)m)?\s*(?:(\d+)s)?")


def parse_duration(text: str) -> int:
    """The number of seconds `text` means.

    `text` is one or more <integer><unit> parts with units d, h, m and s, largest unit
    first and each unit at most once ('1h30m', '2d 4h': spaces between parts are allowed),
    or a bare integer, which is seconds. Anything else raises ValueError naming the text.
    """
    stripped = text.strip()
    if stripped.isdigit():
        return int(stripped)
    match = DURATION.fullmatch(stripped)
    if not stripped or not match or not any(match.groups()):
        raise ValueError(f"not a duration: {text!r}")
    return sum(int(n) * UNITS[u] for n, u in zip(match.groups(), "dhms") if n is not None)
