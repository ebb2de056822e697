import pytest

from retry import retry


class Flaky:
    def __init__(self, failures, error=ConnectionError):
        self.failures, self.error, self.calls = failures, error, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error(f"attempt {self.calls} failed")
        return (args, kwargs)


@pytest.mark.parametrize("attempts", [1, 2, 3, 5])
def test_the_last_failure_propagates_after_exactly_attempts_calls(attempts):
    sleeps = []
    always = Flaky(failures=99)
    wrapped = retry(attempts=attempts, delay=0.25, sleep=sleeps.append)(always)
    with pytest.raises(ConnectionError, match=f"attempt {attempts} failed"):
        wrapped()
    assert always.calls == attempts
    assert sleeps == [0.25] * (attempts - 1), "it sleeps between attempts only"


@pytest.mark.parametrize("failures", [0, 1, 2])
def test_a_call_that_recovers_returns_its_value(failures):
    sleeps = []
    call = Flaky(failures)
    assert retry(attempts=3, sleep=sleeps.append)(call)(1, k=2) == ((1,), {"k": 2})
    assert call.calls == failures + 1 and len(sleeps) == failures


def test_only_the_listed_exceptions_are_retried():
    call = Flaky(failures=1, error=ValueError)
    wrapped = retry(attempts=3, exceptions=(ConnectionError,), sleep=lambda s: None)(call)
    with pytest.raises(ValueError):
        wrapped()
    assert call.calls == 1


def test_the_wrapper_keeps_the_functions_name_and_doc():
    def fetch():
        """Fetch the thing."""

    wrapped = retry()(fetch)
    assert (wrapped.__name__, wrapped.__doc__) == ("fetch", "Fetch the thing.")


def test_zero_attempts_is_refused():
    with pytest.raises(ValueError):
        retry(attempts=0)
