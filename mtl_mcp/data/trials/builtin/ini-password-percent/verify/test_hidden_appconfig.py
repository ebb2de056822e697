import shutil
from pathlib import Path

import pytest

from appconfig import load

CONFIG = """\
[paths]
base_dir = /srv/app
log_dir = %(base_dir)s/logs
cache_dir = %(log_dir)s/../cache

[database]
url = postgresql://app@db.internal/app
password = {password}
"""


def write(tmp_path, password):
    path = tmp_path / "app.ini"
    path.write_text(CONFIG.format(password=password), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "password", ["50%off", "%", "100%%", "a%(base_dir)sb", "%(nope)s", "p@ss%20word", "plain"]
)
def test_the_password_is_taken_exactly_as_written(tmp_path, password):
    assert load(write(tmp_path, password))["db_password"] == password


def test_interpolated_values_still_resolve(tmp_path):
    config = load(write(tmp_path, "s3cr%t!"))
    assert config["log_dir"] == "/srv/app/logs"
    assert config["cache_dir"] == "/srv/app/logs/../cache"
    assert config["base_dir"] == "/srv/app"


def test_the_shipped_example_config(tmp_path):
    shutil.copy(Path.cwd() / "app.ini", tmp_path / "app.ini")
    config = load(tmp_path / "app.ini")
    assert config["log_dir"] == "/srv/app/logs"
    assert config["cache_dir"] == "/srv/app/cache"
    assert config["db_password"] == "change-me"
