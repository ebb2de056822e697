from bookings import merge_intervals


def test_sorted_bookings():
    assert merge_intervals([[1, 3], [2, 4], [6, 8]]) == [[1, 4], [6, 8]]


def test_unsorted_bookings():
    assert merge_intervals([[6, 8], [1, 3], [2, 4]]) == [[1, 4], [6, 8]]


def test_touching_bookings_merge():
    assert merge_intervals([[1, 2], [2, 3]]) == [[1, 3]]
