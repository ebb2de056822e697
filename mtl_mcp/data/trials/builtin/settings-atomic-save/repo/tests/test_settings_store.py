import pytest

from settings_store import load, save


def test_a_saved_file_loads_back(tmp_path):
    path = tmp_path / "settings.json"
    save(path, {"theme": "dark", "font_size": 14})
    assert load(path) == {"theme": "dark", "font_size": 14}


def test_a_failed_save_keeps_the_old_settings(tmp_path):
    path = tmp_path / "settings.json"
    save(path, {"theme": "dark"})
    with pytest.raises(TypeError):
        save(path, {"theme": "light", "window": object()})
    assert load(path) == {"theme": "dark"}
