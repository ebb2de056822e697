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


def load_settings(environ=None) -> Settings:
    """The defaults, with each APP_<FIELD> variable of `environ` (os.environ by default)
    overriding its field: APP_PORT=8080 sets port.

    Values are converted to the field's type: int and float fields take numbers, bool
    fields take true/false, yes/no, on/off or 1/0 (in any case), str fields take the text
    as it is. A value that does not convert raises ValueError naming the variable.
    """
    environ = os.environ if environ is None else environ
    overrides = {}
    for field in fields(Settings):
        key = "APP_" + field.name.upper()
        if key in environ:
            value = environ[key]
            overrides[field.name] = int(value) if value.isdigit() else value
    return replace(Settings(), **overrides)
