import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path.cwd()
FAILING = "#!/usr/bin/env bash\necho 'compiling 3 modules'\necho 'error: missing ;' >&2\nexit {status}\n"


def deploy(tmp_path, build):
    for name in ("deploy.sh", "publish.sh"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / "build.sh").write_text(build, encoding="utf-8")
    for script in tmp_path.glob("*.sh"):
        script.chmod(0o755)
    return subprocess.run(["bash", "deploy.sh"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=30)


@pytest.mark.parametrize("status", [1, 3, 42])
def test_a_failed_build_stops_with_the_builds_status(tmp_path, status):
    done = deploy(tmp_path, FAILING.format(status=status))
    assert done.returncode == status
    assert not (tmp_path / "published.txt").exists()
    assert "publishing" not in done.stdout


def test_a_failed_builds_output_is_on_the_console_and_in_the_log(tmp_path):
    done = deploy(tmp_path, FAILING.format(status=2))
    assert "error: missing ;" in done.stdout + done.stderr
    assert "compiling 3 modules" in done.stdout
    log = (tmp_path / "build.log").read_text(encoding="utf-8")
    assert "compiling 3 modules" in log and "error: missing ;" in log


def test_a_good_build_still_deploys_with_its_output_shown(tmp_path):
    done = deploy(tmp_path, (ROOT / "build.sh").read_text(encoding="utf-8"))
    assert done.returncode == 0
    assert "build finished" in done.stdout
    assert "build finished" in (tmp_path / "build.log").read_text(encoding="utf-8")
    assert (tmp_path / "published.txt").is_file()
