import pytest

from durations import parse_duration


def test_single_units():
    assert parse_duration("90s") == 90
    assert parse_duration("15m") == 900


def test_combined_units():
    assert parse_duration("1h30m") == 5400


def test_a_bare_number_is_seconds():
    assert parse_duration("45") == 45


def test_words_are_refused():
    with pytest.raises(ValueError):
        parse_duration("soon")
