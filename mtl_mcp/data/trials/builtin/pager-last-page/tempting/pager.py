"""Split search results into pages for the results view."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Page:
    number: int  # 1-based
    items: list
    total_pages: int

    @property
    def has_next(self) -> bool:
        return self.number < self.total_pages


def page_count(total: int, per_page: int) -> int:
    """How many pages `total` results fill, `per_page` to a page (no results: no pages)."""
    if per_page < 1:
        raise ValueError("per_page must be at least 1")
    return total // per_page + 1


def get_page(items: list, number: int, per_page: int = 10) -> Page:
    """Page `number` (1-based) of `items`. A page past the end is empty."""
    if number < 1:
        raise ValueError("page numbers start at 1")
    start = (number - 1) * per_page
    return Page(number, items[start : start + per_page], page_count(len(items), per_page))
