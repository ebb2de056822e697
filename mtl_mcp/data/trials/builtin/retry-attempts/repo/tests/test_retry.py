import pytest

from retry import retry


def flaky(failures):
    """A function that raises ConnectionError `failures` times, then returns 'ok'."""
    calls = []

    def call():
        calls.append(1)
        if len(calls) <= failures:
            raise ConnectionError("reset by peer")
        return "ok"

    return call, calls


def test_flaky_call_succeeds_on_the_third_attempt():
    call, calls = flaky(2)
    assert retry(attempts=3, sleep=lambda s: None)(call)() == "ok"
    assert len(calls) == 3


def test_other_errors_are_not_retried():
    calls = []

    @retry(attempts=3, exceptions=(ConnectionError,), sleep=lambda s: None)
    def broken():
        calls.append(1)
        raise KeyError("config")

    with pytest.raises(KeyError):
        broken()
    assert len(calls) == 1
