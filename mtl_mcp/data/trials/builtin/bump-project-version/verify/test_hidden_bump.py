import subprocess
import sys
from pathlib import Path

import pytest

TOOL_FIRST = """\
# Build settings. version = "9.9.9" in a comment is not a version.
[tool.demo-plugin]
version = "0.9.0"

[project]
name = "demo"
version = "1.4.2"  # keep in sync with CHANGELOG.md
dependencies = ["requests>=2"]

[project.optional-dependencies]
dev = ["pytest"]

[tool.other]
version = "1.4.2"
"""


def bump(tmp_path, text, part, newline="\n"):
    path = tmp_path / "pyproject.toml"
    path.write_bytes(text.replace("\n", newline).encode("utf-8"))
    done = subprocess.run([sys.executable, str(Path.cwd() / "bump.py"), part, "--file", str(path)],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return path.read_bytes().decode("utf-8")


@pytest.mark.parametrize(("part", "new"), [("patch", "1.4.3"), ("minor", "1.5.0"), ("major", "2.0.0")])
def test_only_the_project_version_changes_wherever_its_table_is(tmp_path, part, new):
    expected = TOOL_FIRST.replace('version = "1.4.2"  # keep', f'version = "{new}"  # keep')
    assert bump(tmp_path, TOOL_FIRST, part) == expected


def test_windows_line_endings_are_kept(tmp_path):
    expected = TOOL_FIRST.replace('version = "1.4.2"  # keep', 'version = "1.4.3"  # keep')
    assert bump(tmp_path, TOOL_FIRST, "patch", newline="\r\n") == expected.replace("\n", "\r\n")


def test_a_file_with_a_single_table(tmp_path):
    text = '[project]\nname = "x"\nversion = "0.0.9"\n'
    assert bump(tmp_path, text, "patch") == '[project]\nname = "x"\nversion = "0.0.10"\n'
