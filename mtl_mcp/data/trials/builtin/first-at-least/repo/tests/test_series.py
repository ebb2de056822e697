from series import first_at_least, window


def test_a_target_inside_the_series():
    assert first_at_least([10, 20, 30, 40], 25) == 2


def test_duplicates_give_the_first():
    assert first_at_least([1, 2, 2, 2, 3], 2) == 1


def test_a_target_above_every_reading():
    assert first_at_least([1, 3, 5], 6) == 3


def test_window():
    assert window([1, 2, 3, 4, 5], 2, 4) == [2, 3]
