"""Run many coroutines with a cap on how many run at once (for the API client)."""

import asyncio


async def map_limited(func, items, limit):
    """await func(item) for every item, with at most `limit` running at any moment, and the
    next item starting as soon as a running one finishes (no waiting for a whole batch).

    Returns the results in the order of `items`. limit < 1 raises ValueError.
    """
    if limit < 1:
        raise ValueError(f"limit must be at least 1, not {limit}")
    semaphore = asyncio.Semaphore(limit)  # one for all the calls, or it limits nothing

    async def run(item):
        async with semaphore:
            return await func(item)

    return await asyncio.gather(*(run(item) for item in items))
