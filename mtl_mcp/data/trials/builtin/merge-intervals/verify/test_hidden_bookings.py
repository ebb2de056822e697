import copy
import random

import pytest

from bookings import merge_intervals


def brute_force(intervals):
    """Merge by marking every half-step covered: slow, and obviously right."""
    if not intervals:
        return []
    points = sorted({x for start, end in intervals for x in range(start * 2, end * 2 + 1)})
    merged = [[points[0], points[0]]]
    for p in points[1:]:
        if p == merged[-1][1] + 1:
            merged[-1][1] = p
        else:
            merged.append([p, p])
    return [[start // 2, end // 2] for start, end in merged]


@pytest.mark.parametrize(
    ("intervals", "merged"),
    [
        ([], []),
        ([[5, 5]], [[5, 5]]),
        ([[1, 10], [2, 3]], [[1, 10]]),
        ([[2, 3], [1, 10]], [[1, 10]]),
        ([[1, 10], [2, 3], [4, 12]], [[1, 12]]),
        ([[1, 2], [3, 4]], [[1, 2], [3, 4]]),
        ([[-5, -1], [-2, 0]], [[-5, 0]]),
        ([(1, 3), (2, 6)], [[1, 6]]),
    ],
)
def test_edge_cases(intervals, merged):
    assert merge_intervals(intervals) == merged


def test_the_input_is_not_changed():
    intervals = [[6, 8], [1, 3], [2, 4], [1, 10]]
    before = copy.deepcopy(intervals)
    result = merge_intervals(intervals)
    assert intervals == before
    result[0][1] = 99
    assert intervals == before


def test_against_a_brute_force_on_many_random_calendars():
    rng = random.Random(20240501)
    for _ in range(400):
        intervals = []
        for _ in range(rng.randint(0, 8)):
            start = rng.randint(0, 30)
            intervals.append([start, start + rng.randint(0, 10)])
        assert merge_intervals(intervals) == brute_force(intervals), intervals
