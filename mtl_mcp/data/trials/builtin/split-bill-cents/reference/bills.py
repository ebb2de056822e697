"""Split an expense between people, for the shared-expenses app."""

from decimal import Decimal


def split_amount(total: str, n: int) -> list[str]:
    """Split `total`, a decimal string with at most two decimals ('100.00', '7.5'), into `n`
    shares in whole cents that add up to exactly `total`.

    The shares differ by at most one cent, and the first shares take the extra cents:
    split_amount('100.00', 3) == ['33.34', '33.33', '33.33']. n < 1 raises ValueError.
    """
    if n < 1:
        raise ValueError(f"cannot split between {n} people")
    cents = int(Decimal(total) * 100)  # Decimal: no float rounding on the way to cents
    share, extra = divmod(cents, n)
    return [_money(share + 1 if i < extra else share) for i in range(n)]


def _money(cents: int) -> str:
    return f"{cents // 100}.{cents % 100:02d}"
