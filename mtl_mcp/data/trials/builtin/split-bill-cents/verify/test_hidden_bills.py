from decimal import Decimal

import pytest

from bills import split_amount


@pytest.mark.parametrize(
    ("total", "n", "shares"),
    [
        ("100.00", 3, ["33.34", "33.33", "33.33"]),
        ("0.05", 3, ["0.02", "0.02", "0.01"]),
        ("10.00", 4, ["2.50", "2.50", "2.50", "2.50"]),
        ("7.5", 2, ["3.75", "3.75"]),
        ("0.01", 3, ["0.01", "0.00", "0.00"]),
        ("0.00", 2, ["0.00", "0.00"]),
        ("1", 1, ["1.00"]),
        ("20.02", 4, ["5.01", "5.01", "5.00", "5.00"]),
    ],
)
def test_the_first_shares_take_the_extra_cents(total, n, shares):
    assert split_amount(total, n) == shares


@pytest.mark.parametrize("total", ["0.29", "1.15", "4.35", "1234567.89", "0.07", "999999999.99"])
@pytest.mark.parametrize("n", [1, 2, 3, 7, 13])
def test_shares_add_up_exactly_and_differ_by_at_most_a_cent(total, n):
    shares = [Decimal(share) for share in split_amount(total, n)]
    assert sum(shares) == Decimal(total)
    assert max(shares) - min(shares) <= Decimal("0.01")
    assert all(share == share.quantize(Decimal("0.01")) for share in shares)


@pytest.mark.parametrize("n", [0, -1])
def test_nobody_to_split_between_is_a_value_error(n):
    with pytest.raises(ValueError):
        split_amount("10.00", n)
