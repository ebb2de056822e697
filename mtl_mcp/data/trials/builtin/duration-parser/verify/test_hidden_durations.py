import pytest

from durations import parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90), ("15m", 900), ("1h30m", 5400), ("2d 4h", 187200), ("2d4h", 187200),
        ("1d2h3m4s", 93784), ("1h 30m 15s", 5415), ("0s", 0), ("45", 45), ("0", 0),
        ("  10m  ", 600), ("100h", 360000),
    ],
)
def test_valid_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text",
    ["", "   ", "soon", "5x", "1h30", "30m1h", "1h1h", "-5m", "1.5h", "h", "1h,30m",
     "5m later", "1d 2d"],
)
def test_anything_else_is_a_value_error_naming_the_text(text):
    with pytest.raises(ValueError) as caught:
        parse_duration(text)
    assert repr(text) in str(caught.value) or repr(text.strip()) in str(caught.value)
