import pytest

from sizes import human_size, listing

KIB, MIB, GIB, TIB = 1024, 1024**2, 1024**3, 1024**4


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0 B"), (1, "1 B"), (1023, "1023 B"), (KIB, "1.0 KiB"), (1536, "1.5 KiB"),
        (KIB * 1023, "1023.0 KiB"), (MIB - 1, "1.0 MiB"), (MIB, "1.0 MiB"),
        (int(3.2 * GIB), "3.2 GiB"), (GIB - 1, "1.0 GiB"), (TIB - 1, "1.0 TiB"),
        (TIB, "1.0 TiB"), (2048 * TIB, "2048.0 TiB"), (MIB * 1023 + MIB // 2, "1023.5 MiB"),
    ],
)
def test_the_spec_at_each_boundary(n, text):
    assert human_size(n) == text


def test_a_negative_size_is_refused():
    with pytest.raises(ValueError):
        human_size(-1)


def test_the_listing_lines_up():
    assert listing({"a": 5, "b": MIB - 1, "c": 1023}) == (
        "       5 B  a\n"
        "   1.0 MiB  b\n"
        "    1023 B  c\n"
    )
