import bisect
import math
import random

import pytest

from series import first_at_least, window


class Counted:
    """A reading that counts every comparison made with it."""

    comparisons = 0

    def __init__(self, value):
        self.value = value

    def _other(self, other):
        Counted.comparisons += 1
        return other.value if isinstance(other, Counted) else other

    def __lt__(self, other):
        return self.value < self._other(other)

    def __le__(self, other):
        return self.value <= self._other(other)

    def __gt__(self, other):
        return self.value > self._other(other)

    def __ge__(self, other):
        return self.value >= self._other(other)

    def __eq__(self, other):
        return self.value == self._other(other)

    __hash__ = None


@pytest.mark.parametrize(
    ("values", "target", "index"),
    [
        ([], 5, 0), ([5], 5, 0), ([5], 4, 0), ([5], 6, 1), ([1, 3, 5], 6, 3), ([1, 3, 5], 5, 2),
        ([1, 3, 5], 0, 0), ([1, 3, 5], -100, 0), ([2, 2, 2], 2, 0), ([2, 2, 2], 3, 3),
        ([1, 1, 2, 2], 2, 2), ([0.5, 1.5, 2.5], 1.5, 1), (list(range(1000)), 999, 999),
        (list(range(1000)), 1000, 1000),
    ],
)
def test_boundaries(values, target, index):
    assert first_at_least(values, target) == index


def test_against_bisect_on_random_series():
    rng = random.Random(42)
    for _ in range(500):
        values = sorted(rng.randint(0, 50) for _ in range(rng.randint(0, 30)))
        target = rng.randint(-5, 55)
        assert first_at_least(values, target) == bisect.bisect_left(values, target)


SERIES = [Counted(2 * i) for i in range(100_000)]


@pytest.mark.parametrize("target", [-1, 0, 12345, 99999, 100000, 250000])
def test_a_lookup_makes_logarithmically_many_comparisons(target):
    values = SERIES
    Counted.comparisons = 0
    index = first_at_least(values, Counted(target))
    assert index == bisect.bisect_left(list(range(0, 200_000, 2)), target)
    budget = 2 * math.ceil(math.log2(len(values))) + 4
    assert Counted.comparisons <= budget, f"{Counted.comparisons} comparisons for one lookup"


def test_window_edges():
    assert window([1, 2, 3], 0, 10) == [1, 2, 3]
    assert window([1, 2, 3], 4, 10) == []
    assert window([], 0, 1) == []
