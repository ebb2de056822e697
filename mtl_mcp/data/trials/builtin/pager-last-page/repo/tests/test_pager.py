import pytest

from pager import get_page, page_count


def test_first_page_holds_per_page_items():
    page = get_page(list(range(25)), 1)
    assert page.items == list(range(10))


def test_partial_last_page_is_counted():
    assert page_count(25, 10) == 3


def test_second_of_three_pages_has_a_next_page():
    assert get_page(list(range(25)), 2).has_next


def test_per_page_must_be_positive():
    with pytest.raises(ValueError):
        page_count(5, 0)
