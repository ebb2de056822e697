from bump import bump_text, main

PYPROJECT = """\
[project]
name = "demo"
version = "1.4.2"

[tool.black]
target-version = ["py311"]

[tool.demo-plugin]
version = "0.9.0"
"""


def test_patch():
    assert 'version = "1.4.3"' in bump_text(PYPROJECT, "patch")


def test_minor_resets_patch():
    assert 'version = "1.5.0"' in bump_text(PYPROJECT, "minor")


def test_other_tables_keep_their_version(tmp_path):
    path = tmp_path / "pyproject.toml"
    path.write_text(PYPROJECT, encoding="utf-8")
    main(["patch", "--file", str(path)])
    assert path.read_text(encoding="utf-8") == PYPROJECT.replace("1.4.2", "1.4.3")
