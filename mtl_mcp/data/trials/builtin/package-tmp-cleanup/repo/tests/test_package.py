import os
import shutil
import subprocess
import tarfile
from pathlib import Path

ROOT = Path(__file__).parent.parent


def test_a_release_leaves_no_temp_folder(tmp_path):
    work = tmp_path / "work"
    shutil.copytree(ROOT / "app", work / "app")
    shutil.copy(ROOT / "RELEASE_NOTES.md", work)
    temp = tmp_path / "tmp"
    temp.mkdir()
    done = subprocess.run(["bash", str(ROOT / "package.sh"), "1.2.0"], cwd=work,
                          capture_output=True, text=True, timeout=30,
                          env={**os.environ, "TMPDIR": str(temp)})
    assert done.returncode == 0, done.stderr
    with tarfile.open(work / "release-1.2.0.tar.gz") as archive:
        assert "app-1.2.0/main.py" in archive.getnames()
    assert list(temp.iterdir()) == []
