import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).parent.parent


def project(tmp_path, build):
    for name in ("deploy.sh", "publish.sh"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / "build.sh").write_text(build, encoding="utf-8")
    for script in tmp_path.glob("*.sh"):
        script.chmod(0o755)
    return tmp_path


def test_a_good_build_is_published(tmp_path):
    where = project(tmp_path, (ROOT / "build.sh").read_text(encoding="utf-8"))
    done = subprocess.run(["bash", "deploy.sh"], cwd=where, capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 0
    assert (where / "published.txt").is_file()


def test_a_failed_build_is_not_published(tmp_path):
    where = project(tmp_path, "#!/usr/bin/env bash\necho 'error: syntax'\nexit 3\n")
    done = subprocess.run(["bash", "deploy.sh"], cwd=where, capture_output=True, text=True,
                          timeout=30)
    assert done.returncode != 0
    assert not (where / "published.txt").exists()
