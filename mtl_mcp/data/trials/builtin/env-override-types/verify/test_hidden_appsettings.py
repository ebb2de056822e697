import pytest

from appsettings import Settings, load_settings


@pytest.mark.parametrize(
    ("environ", "field", "value"),
    [
        ({"APP_PORT": "8080"}, "port", 8080),
        ({"APP_WORKERS": "16"}, "workers", 16),
        ({"APP_TIMEOUT": "2.5"}, "timeout", 2.5),
        ({"APP_TIMEOUT": "60"}, "timeout", 60.0),
        ({"APP_NAME": "007"}, "name", "007"),
        ({"APP_HOST": "::1"}, "host", "::1"),
        ({"APP_DEBUG": "true"}, "debug", True),
        ({"APP_DEBUG": "True"}, "debug", True),
        ({"APP_DEBUG": "yes"}, "debug", True),
        ({"APP_DEBUG": "ON"}, "debug", True),
        ({"APP_DEBUG": "1"}, "debug", True),
        ({"APP_DEBUG": "false"}, "debug", False),
        ({"APP_DEBUG": "No"}, "debug", False),
        ({"APP_DEBUG": "off"}, "debug", False),
        ({"APP_DEBUG": "0"}, "debug", False),
    ],
)
def test_each_override_takes_its_fields_type(environ, field, value):
    got = getattr(load_settings(environ), field)
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize(
    ("environ", "key"),
    [({"APP_PORT": "eighty"}, "APP_PORT"), ({"APP_PORT": ""}, "APP_PORT"),
     ({"APP_DEBUG": "maybe"}, "APP_DEBUG"), ({"APP_TIMEOUT": "soon"}, "APP_TIMEOUT"),
     ({"APP_WORKERS": "2.5"}, "APP_WORKERS")],
)
def test_a_value_that_does_not_convert_names_its_variable(environ, key):
    with pytest.raises(ValueError, match=key):
        load_settings(environ)


def test_other_variables_are_ignored_and_the_defaults_kept():
    assert load_settings({"PORT": "1", "APP_UNKNOWN": "x", "HOME": "/root"}) == Settings()


def test_os_environ_is_the_default(monkeypatch):
    monkeypatch.setenv("APP_WORKERS", "3")
    monkeypatch.setenv("APP_DEBUG", "false")
    settings = load_settings()
    assert settings.workers == 3 and settings.debug is False
