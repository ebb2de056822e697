"""Sizes for the `du`-style listing."""

UNITS = ["B", "KiB", "MiB", "GiB", "TiB"]


def human_size(n: int) -> str:
    """`n` bytes, for people.

    Whole bytes below 1024 ('512 B'). Otherwise one decimal in the largest binary unit
    (1 KiB = 1024 B) that keeps the number, once rounded, below 1024: '1.5 KiB', '1.0 MiB',
    '3.2 GiB'. TiB is the largest unit ('2048.0 TiB'). A negative size raises ValueError.
    """
    if n < 1024:
        return f"{n} B"
    size = n / 1024
    for unit in UNITS[1:]:
        if size < 1024 or unit == UNITS[-1]:
            return f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def listing(entries: dict[str, int]) -> str:
    """One line per entry, the size right-aligned in 10 columns, then the name."""
    return "".join(f"{human_size(size):>10}  {name}\n" for name, size in entries.items())
