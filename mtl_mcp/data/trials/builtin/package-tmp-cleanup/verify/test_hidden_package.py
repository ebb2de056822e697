import os
import shutil
import subprocess
import tarfile
from pathlib import Path

ROOT = Path.cwd()


def package(tmp_path, *args, notes=True):
    work = tmp_path / "work"
    shutil.copytree(ROOT / "app", work / "app")
    if notes:
        shutil.copy(ROOT / "RELEASE_NOTES.md", work)
    temp = tmp_path / "tmp"
    temp.mkdir()
    done = subprocess.run(["bash", str(ROOT / "package.sh"), *args], cwd=work,
                          capture_output=True, text=True, timeout=30,
                          env={**os.environ, "TMPDIR": str(temp)})
    return done, work, temp


def test_a_good_release_is_whole_and_leaves_nothing(tmp_path):
    done, work, temp = package(tmp_path, "2.0.0")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "wrote release-2.0.0.tar.gz\n"
    with tarfile.open(work / "release-2.0.0.tar.gz") as archive:
        assert sorted(archive.getnames()) == [
            "app-2.0.0", "app-2.0.0/RELEASE_NOTES.md", "app-2.0.0/main.py"]
    assert list(temp.iterdir()) == []


def test_a_failed_release_fails_and_still_leaves_nothing(tmp_path):
    done, work, temp = package(tmp_path, "2.0.1", notes=False)
    assert done.returncode != 0
    assert list(temp.iterdir()) == []
    assert not (work / "release-2.0.1.tar.gz").exists()


def test_a_missing_version_is_a_usage_error(tmp_path):
    done, _, temp = package(tmp_path)
    assert done.returncode != 0 and "usage" in done.stderr
    assert list(temp.iterdir()) == []
