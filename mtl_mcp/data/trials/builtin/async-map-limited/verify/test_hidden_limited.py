import asyncio

import pytest

from limited import map_limited


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, timeout=5))


@pytest.mark.parametrize(("count", "limit"), [(10, 1), (10, 3), (500, 20), (3, 10), (0, 2)])
def test_never_more_than_limit_at_once_and_in_order(count, limit):
    active = peak = 0

    async def call(item):
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        for _ in range(item % 4 + 1):
            await asyncio.sleep(0)
        active -= 1
        return -item

    assert run(map_limited(call, list(range(count)), limit)) == [-i for i in range(count)]
    assert peak == min(limit, count)


def test_a_slow_item_does_not_hold_back_the_rest():
    """Item 0 can only finish once item 2 has started: with a limit of 2, item 2 must start
    as soon as item 1 finishes, not after a whole batch."""

    async def main():
        started = {i: asyncio.Event() for i in range(4)}

        async def call(item):
            started[item].set()
            if item == 0:
                await started[2].wait()
            return item

        return await map_limited(call, [0, 1, 2, 3], limit=2)

    assert run(main()) == [0, 1, 2, 3]


def test_order_is_kept_when_items_finish_out_of_order():
    async def main():
        gates = {i: asyncio.Event() for i in range(3)}

        async def call(item):
            if item < 2:
                await gates[item + 1].wait()
            gates[item].set()
            return f"r{item}"

        return await map_limited(call, [0, 1, 2], limit=3)

    assert run(main()) == ["r0", "r1", "r2"]


@pytest.mark.parametrize("limit", [0, -1])
def test_a_limit_below_one_is_refused(limit):
    async def call(item):
        return item

    with pytest.raises(ValueError):
        run(map_limited(call, [1, 2], limit))


def test_a_failing_call_propagates():
    async def call(item):
        if item == 2:
            raise LookupError("item 2")
        return item

    with pytest.raises(LookupError):
        run(map_limited(call, [1, 2, 3], 2))
