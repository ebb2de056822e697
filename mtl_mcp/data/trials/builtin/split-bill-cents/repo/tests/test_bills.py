from decimal import Decimal

from bills import split_amount


def test_an_even_split():
    assert split_amount("10.00", 2) == ["5.00", "5.00"]


def test_shares_add_up_to_the_total():
    shares = split_amount("100.00", 3)
    assert sum(Decimal(share) for share in shares) == Decimal("100.00")
