import copy

import settings
from settings import layered, merge


def test_nested_sections_merge_at_any_depth():
    base = {"db": {"host": "h", "options": {"sslmode": "prefer", "timeout": 10}}}
    merged = merge(base, {"db": {"options": {"timeout": 30}}})
    assert merged == {"db": {"host": "h", "options": {"sslmode": "prefer", "timeout": 30}}}


def test_neither_argument_is_changed():
    base = {"db": {"host": "h", "options": {"timeout": 10}}, "tags": ["a"]}
    override = {"db": {"port": 1, "options": {"timeout": 30}}, "tags": ["b"]}
    before = copy.deepcopy((base, override))
    merge(base, override)
    assert (base, override) == before


def test_the_defaults_survive_many_layerings():
    pristine = copy.deepcopy(settings.DEFAULTS)
    first = layered({"db": {"port": 6543, "options": {"sslmode": "require"}}})
    assert first["db"] == {"host": "localhost", "port": 6543,
                           "options": {"sslmode": "require", "timeout": 10}}
    second = layered({"log": {"level": "DEBUG"}})
    assert second["db"] == pristine["db"]
    assert second["log"] == {"level": "DEBUG", "handlers": ["console"]}
    assert settings.DEFAULTS == pristine


def test_lists_and_scalars_replace():
    merged = merge({"log": {"handlers": ["console"]}, "x": {"a": 1}}, {"log": {"handlers": ["file"]}, "x": 5})
    assert merged == {"log": {"handlers": ["file"]}, "x": 5}


def test_a_dict_replaces_a_scalar():
    assert merge({"x": 5}, {"x": {"a": 1}}) == {"x": {"a": 1}}


def test_new_keys_are_added_at_any_depth():
    assert merge({"a": {"b": {}}}, {"a": {"b": {"c": 1}, "d": 2}}) == {"a": {"b": {"c": 1}, "d": 2}}
