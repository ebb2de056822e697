import threading

from crawler import fetch_all


def test_results_follow_the_urls():
    second_done = threading.Event()

    def fetch(url):
        if url == "https://a.example/1":
            second_done.wait(timeout=5)  # the first page is slow: it finishes last
        else:
            second_done.set()
        return f"page {url[-1]}"

    urls = ["https://a.example/1", "https://a.example/2"]
    assert fetch_all(urls, fetch) == ["page 1", "page 2"]


def test_no_urls():
    assert fetch_all([], lambda url: url) == []
