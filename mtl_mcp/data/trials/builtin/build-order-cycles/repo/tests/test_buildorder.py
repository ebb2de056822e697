import pytest

from buildorder import CycleError, build_order


def test_a_chain_builds_from_the_bottom():
    assert build_order({"app": ["lib"], "lib": ["core"]}) == ["core", "lib", "app"]


def test_a_cycle_is_refused():
    with pytest.raises(CycleError):
        build_order({"a": ["b"], "b": ["a"]})
