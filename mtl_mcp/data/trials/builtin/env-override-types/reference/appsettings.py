"""The app's settings: defaults, overridden by APP_* environment variables."""

import os
from dataclasses import dataclass, fields, replace


@dataclass(frozen=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 8000
    debug: bool = False
    workers: int = 2
    timeout: float = 30.0
    name: str = "app"


TRUE = {"true", "yes", "on", "1"}
FALSE = {"false", "no", "off", "0"}


def convert(key: str, raw: str, kind: type):
    """`raw` as a `kind`, or ValueError naming `key`."""
    if kind is bool:
        word = raw.strip().lower()
        if word in TRUE | FALSE:
            return word in TRUE
        raise ValueError(f"{key}={raw!r}: expected true/false, yes/no, on/off or 1/0")
    if kind in (int, float):
        try:
            return kind(raw.strip())
        except ValueError:
            raise ValueError(f"{key}={raw!r}: expected a number ({kind.__name__})") from None
    return raw


def load_settings(environ=None) -> Settings:
    """The defaults, with each APP_<FIELD> variable of `environ` (os.environ by default)
    overriding its field: APP_PORT=8080 sets port.

    Values are converted to the field's type: int and float fields take numbers, bool
    fields take true/false, yes/no, on/off or 1/0 (in any case), str fields take the text
    as it is. A value that does not convert raises ValueError naming the variable.
    """
    environ = os.environ if environ is None else environ
    defaults = Settings()
    overrides = {}
    for field in fields(Settings):
        key = "APP_" + field.name.upper()
        if key in environ:
            # the default's type, not field.type: annotations may be strings
            kind = type(getattr(defaults, field.name))
            overrides[field.name] = convert(key, environ[key], kind)
    return replace(defaults, **overrides)
