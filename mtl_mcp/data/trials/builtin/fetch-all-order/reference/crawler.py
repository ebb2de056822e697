"""Fetch many pages at once for the crawler."""

from concurrent.futures import ThreadPoolExecutor


def fetch_all(urls, fetch, workers=8):
    """fetch(url) for every url, up to `workers` at a time.

    Returns the results in the order of `urls`. When fetches raise, fetch_all raises the
    exception of the first failing url in the order of `urls`.
    """
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(fetch, url) for url in urls]
        # in submission order, whatever order they finish in
        return [future.result() for future in futures]
