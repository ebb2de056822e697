import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).parent.parent


def test_it_works_from_another_folder(tmp_path):
    app = tmp_path / "app"
    (app / "logs").mkdir(parents=True)
    shutil.copy(ROOT / "rotate_logs.sh", app / "rotate_logs.sh")
    (app / "logs" / "web.log").write_text("GET /\n", encoding="utf-8")
    elsewhere = tmp_path / "home"
    elsewhere.mkdir()
    done = subprocess.run(["bash", str(app / "rotate_logs.sh")], cwd=elsewhere,
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert (app / "logs" / "web.log.gz").is_file()
    assert not (app / "logs" / "web.log").exists()
