import subprocess
from pathlib import Path

SCRIPT = Path.cwd() / "backup.sh"


def run(*args):
    return subprocess.run(["bash", str(SCRIPT), *map(str, args)],
                          capture_output=True, text=True, timeout=30)


def make_tree(root):
    files = {
        "app.conf": "a\n",
        "nginx site.conf": "b\n",
        "conf d/team wiki.conf": "c\n",
        "plain/x.conf": "d\n",
        "notes.txt": "not a conf\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return files


def test_spaces_in_the_source_the_destination_and_the_file_names(tmp_path):
    src = tmp_path / "Team Share" / "etc configs"
    src.mkdir(parents=True)
    files = make_tree(src)
    dest = tmp_path / "Back Ups" / "tonight"
    done = run(src, dest)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "backed up 4 files\n"
    for name, text in files.items():
        copied = dest / name
        if name.endswith(".conf"):
            assert copied.read_text(encoding="utf-8") == text, name
        else:
            assert not copied.exists()
    assert not (tmp_path / "Back").exists() and not (tmp_path / "Team").exists()


def test_a_missing_source_fails_loudly(tmp_path):
    done = run(tmp_path / "No Such Dir", tmp_path / "dest")
    assert done.returncode != 0
    assert done.stderr.strip()
    assert "backed up" not in done.stdout


def test_an_empty_source_backs_up_nothing(tmp_path):
    (tmp_path / "empty dir").mkdir()
    done = run(tmp_path / "empty dir", tmp_path / "out dir")
    assert (done.returncode, done.stdout) == (0, "backed up 0 files\n")
