"""Split an expense between people, for the shared-expenses app."""


def split_amount(total: str, n: int) -> list[str]:
    """Split `total`, a decimal string with at most two decimals ('100.00', '7.5'), into `n`
    shares in whole cents that add up to exactly `total`.

    The shares differ by at most one cent, and the first shares take the extra cents:
    split_amount('100.00', 3) == ['33.34', '33.33', '33.33']. n < 1 raises ValueError.
    """
    cents = round(float(total) * 100)
    share = cents // n
    shares = [share] * n
    shares[-1] += cents - share * n  # the last share takes what is left over
    return [f"{c / 100:.2f}" for c in shares]
