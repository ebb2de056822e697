from appconfig import load

CONFIG = """\
[paths]
base_dir = /srv/app
log_dir = %(base_dir)s/logs
cache_dir = /var/cache/app

[database]
url = postgresql://app@db.internal/app
password = {password}
"""


def write(tmp_path, password):
    path = tmp_path / "app.ini"
    path.write_text(CONFIG.format(password=password), encoding="utf-8")
    return path


def test_a_plain_password(tmp_path):
    assert load(write(tmp_path, "hunter2"))["db_password"] == "hunter2"


def test_a_password_with_a_percent_sign(tmp_path):
    assert load(write(tmp_path, "50%off"))["db_password"] == "50%off"


def test_the_database_url(tmp_path):
    assert load(write(tmp_path, "x"))["db_url"] == "postgresql://app@db.internal/app"
