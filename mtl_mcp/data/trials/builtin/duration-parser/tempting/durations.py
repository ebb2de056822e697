"""Durations in job configs: '90s', '15m', '1h30m', '2d 4h'."""

import re

UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


def parse_duration(text: str) -> int:
    """The number of seconds `text` means.

    `text` is one or more <integer><unit> parts with units d, h, m and s, largest unit
    first and each unit at most once ('1h30m', '2d 4h': spaces between parts are allowed),
    or a bare integer, which is seconds. Anything else raises ValueError naming the text.
    """
    text = text.strip()
    if text.isdigit():
        return int(text)
    parts = re.findall(r"(\d+)\s*([dhms])", text)
    if not parts:
        raise ValueError(f"not a duration: {text!r}")
    return sum(int(number) * UNITS[unit] for number, unit in parts)
