"""Retry flaky calls (network, file locks) a fixed number of times."""

import functools
import time


def retry(attempts=3, exceptions=(Exception,), delay=0.5, sleep=time.sleep):
    """Call the decorated function up to `attempts` times in all, sleeping `delay` seconds
    between two attempts, while it raises one of `exceptions`.

    When the last attempt fails too, its exception propagates to the caller. Any other
    exception propagates at once, without a retry.
    """
    if attempts < 1:
        raise ValueError("attempts must be at least 1")

    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            for attempt in range(1, attempts + 1):
                try:
                    return fn(*args, **kwargs)
                except exceptions:
                    sleep(delay)

        return wrapper

    return decorate
