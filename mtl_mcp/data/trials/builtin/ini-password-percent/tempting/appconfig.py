"""Read the app's INI config (an example: app.ini).

Values may refer to others as %(name)s (configparser's interpolation), as log_dir does
with %(base_dir)s. The database password is used exactly as written.
"""

import configparser


def load(path) -> dict[str, str]:
    parser = configparser.ConfigParser(interpolation=None)
    with open(path, encoding="utf-8") as f:
        parser.read_file(f)
    return {
        "base_dir": parser.get("paths", "base_dir"),
        "log_dir": parser.get("paths", "log_dir"),
        "cache_dir": parser.get("paths", "cache_dir"),
        "db_url": parser.get("database", "url"),
        "db_password": parser.get("database", "password"),
    }
