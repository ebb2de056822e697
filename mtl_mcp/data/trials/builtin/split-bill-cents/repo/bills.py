"""Split an expense between people, for the shared-expenses app."""


def split_amount(total: str, n: int) -> list[str]:
    """Split `total`, a decimal string with at most two decimals ('100.00', '7.5'), into `n`
    shares in whole cents that add up to exactly `total`.

    The shares differ by at most one cent, and the first shares take the extra cents:
    split_amount('100.00', 3) == ['33.34', '33.33', '33.33']. n < 1 raises ValueError.
    """
    share = round(float(total) / n, 2)
    return [f"{share:.2f}"] * n
