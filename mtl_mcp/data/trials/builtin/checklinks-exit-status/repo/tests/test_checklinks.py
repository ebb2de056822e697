import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parent.parent / "checklinks.py"


def run(*args, cwd):
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=cwd,
                          capture_output=True, text=True)


def test_a_clean_doc_exits_0(tmp_path):
    (tmp_path / "other.md").write_text("# Other\n", encoding="utf-8")
    (tmp_path / "index.md").write_text("See [the other page](other.md).\n", encoding="utf-8")
    done = run("index.md", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout == ""


def test_a_broken_link_exits_1(tmp_path):
    (tmp_path / "index.md").write_text("# Index\nSee [setup](setup.md).\n", encoding="utf-8")
    done = run("index.md", cwd=tmp_path)
    assert done.stdout == "index.md:2: setup.md\n"
    assert done.returncode == 1
