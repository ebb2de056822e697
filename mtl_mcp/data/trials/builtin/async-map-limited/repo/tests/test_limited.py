import asyncio

from limited import map_limited


def test_at_most_limit_run_at_once():
    active = peak = 0

    async def call(item):
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        for _ in range(3):
            await asyncio.sleep(0)
        active -= 1
        return item * 10

    results = asyncio.run(map_limited(call, list(range(6)), limit=2))
    assert results == [0, 10, 20, 30, 40, 50]
    assert peak == 2
