import json
import subprocess
import sys
from pathlib import Path

import pytest

from settings_store import load, save

# Runs save() in a child process whose files may not grow past 4 KiB: the write of a
# large settings file fails part way, as on a full disk.
FULL_DISK = """
import resource, signal, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
from settings_store import save
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
try:
    save(Path(sys.argv[2]), {"history": ["x" * 100] * 500})
except OSError:
    sys.exit(3)
sys.exit(0)
"""


def test_a_full_disk_keeps_the_old_settings_and_leaves_nothing_behind(tmp_path):
    path = tmp_path / "settings.json"
    save(path, {"theme": "dark", "font_size": 14})
    before = path.read_bytes()
    done = subprocess.run([sys.executable, "-c", FULL_DISK, str(Path.cwd()), str(path)],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 3, done.stderr
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["settings.json"]


def test_a_value_that_is_not_json_keeps_the_old_settings(tmp_path):
    path = tmp_path / "settings.json"
    save(path, {"theme": "dark"})
    with pytest.raises(TypeError):
        save(path, {"theme": "light", "window": object()})
    assert load(path) == {"theme": "dark"}
    assert [p.name for p in tmp_path.iterdir()] == ["settings.json"]


def test_saves_replace_the_file_and_leave_nothing_else(tmp_path):
    path = tmp_path / "settings.json"
    for size in (10, 12, 14):
        save(path, {"font_size": size, "name": "Zoë"})
    assert load(path) == {"font_size": 14, "name": "Zoë"}
    assert json.loads(path.read_text(encoding="utf-8")) == {"font_size": 14, "name": "Zoë"}
    assert [p.name for p in tmp_path.iterdir()] == ["settings.json"]


def test_the_first_save_creates_the_file(tmp_path):
    save(tmp_path / "new.json", {"a": 1})
    assert load(tmp_path / "new.json") == {"a": 1}
