import itertools
import random

import pytest

from buildorder import CycleError, build_order


def assert_valid(deps, order):
    packages = set(deps) | {d for ds in deps.values() for d in ds}
    assert sorted(order) == sorted(packages), "every package exactly once"
    position = {package: i for i, package in enumerate(order)}
    for package, needs in deps.items():
        for dep in needs:
            assert position[dep] < position[package], f"{dep} must come before {package}"


def has_cycle(deps):
    """Brute force: some package reaches itself."""
    def reachable(start):
        seen, stack = set(), list(deps.get(start, []))
        while stack:
            node = stack.pop()
            if node not in seen:
                seen.add(node)
                stack.extend(deps.get(node, []))
        return seen
    return any(package in reachable(package) for package in deps)


@pytest.mark.parametrize(
    "deps",
    [
        {"app": ["web", "cli"], "web": ["core"], "cli": ["core"]},
        {"a": ["b", "c", "d"], "b": ["d"], "c": ["d"], "d": []},
        {"x": [], "y": [], "z": ["x", "y"]},
        {"app": ["lib", "lib"]},
        {},
        {"solo": []},
        {"top": ["mid1", "mid2"], "mid1": ["base"], "mid2": ["base", "mid1"], "base": []},
    ],
)
def test_shared_dependencies_are_not_cycles(deps):
    assert_valid(deps, build_order(deps))


@pytest.mark.parametrize(
    "deps",
    [
        {"a": ["a"]},
        {"a": ["b"], "b": ["c"], "c": ["a"]},
        {"app": ["lib"], "lib": ["core"], "core": ["util"], "util": ["lib"]},
        {"ok": ["base"], "base": [], "x": ["y"], "y": ["x"]},
    ],
)
def test_every_cycle_is_refused(deps):
    with pytest.raises(CycleError):
        build_order(deps)


def test_against_a_brute_force_on_random_graphs():
    rng = random.Random(7)
    names = [f"p{i}" for i in range(7)]
    for _ in range(300):
        deps = {name: rng.sample(names, rng.randint(0, 2)) for name in rng.sample(names, 5)}
        if has_cycle(deps):
            with pytest.raises(CycleError):
                build_order(deps)
        else:
            assert_valid(deps, build_order(deps))
