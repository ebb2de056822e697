import pytest

from pager import get_page, page_count


@pytest.mark.parametrize(
    ("total", "per_page", "pages"),
    [(0, 10, 0), (1, 10, 1), (9, 10, 1), (10, 10, 1), (11, 10, 2), (25, 10, 3), (30, 10, 3),
     (100, 1, 100), (7, 3, 3), (6, 3, 2)],
)
def test_page_count_at_every_boundary(total, per_page, pages):
    assert page_count(total, per_page) == pages


def test_an_exact_multiple_has_no_empty_last_page():
    items = list(range(30))
    assert not get_page(items, 3).has_next
    assert get_page(items, 3).items == list(range(20, 30))


def test_no_results_means_no_next_page():
    page = get_page([], 1)
    assert page.items == [] and page.total_pages == 0 and not page.has_next


def test_the_last_partial_page():
    page = get_page(list(range(25)), 3)
    assert page.items == list(range(20, 25)) and not page.has_next
    assert get_page(list(range(25)), 2).has_next
