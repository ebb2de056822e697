import threading

import pytest

from crawler import fetch_all


def finishing_in_reverse(urls):
    """A fetch whose calls finish last-url-first (each waits for the one after it)."""
    done = {url: threading.Event() for url in urls}

    def fetch(url):
        index = urls.index(url)
        if index + 1 < len(urls):
            assert done[urls[index + 1]].wait(timeout=10), "fetches did not run concurrently"
        done[url].set()
        return {"url": url, "title": f"Title of {url.rsplit('/', 1)[-1]}"}

    return fetch


def test_results_line_up_with_unsorted_urls():
    urls = ["https://z.example/zeta", "https://a.example/alpha", "https://m.example/mu"]
    results = fetch_all(urls, finishing_in_reverse(urls))
    assert [r["url"] for r in results] == urls


def test_results_that_do_not_sort_still_line_up():
    urls = [f"https://x.example/{n}" for n in (9, 3, 7, 1, 5)]
    assert [r["url"] for r in fetch_all(urls, finishing_in_reverse(urls), workers=5)] == urls


def test_the_first_failure_in_url_order_is_raised():
    urls = ["u1", "u2", "u3"]
    u3_failed = threading.Event()

    def fetch(url):
        if url == "u3":
            u3_failed.set()
            raise KeyError("u3")
        if url == "u1":
            u3_failed.wait(timeout=10)
            raise ValueError("u1")
        return url

    with pytest.raises(ValueError, match="u1"):
        fetch_all(urls, fetch)


def test_duplicate_urls_each_get_their_result():
    calls = []
    lock = threading.Lock()

    def fetch(url):
        with lock:
            calls.append(url)
            return f"{url}#{len(calls)}"

    results = fetch_all(["b", "a", "b"], fetch)
    assert [r.split("#")[0] for r in results] == ["b", "a", "b"]
    assert len(set(results)) == 3
