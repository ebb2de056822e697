import subprocess
from pathlib import Path

SCRIPT = Path(__file__).parent.parent / "backup.sh"


def test_a_destination_with_spaces(tmp_path):
    src = tmp_path / "etc"
    (src / "nginx").mkdir(parents=True)
    (src / "app.conf").write_text("port=80\n", encoding="utf-8")
    (src / "nginx" / "site.conf").write_text("server {}\n", encoding="utf-8")
    dest = tmp_path / "Team Share" / "backup"
    done = subprocess.run(["bash", str(SCRIPT), str(src), str(dest)],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert (dest / "app.conf").read_text(encoding="utf-8") == "port=80\n"
    assert (dest / "nginx" / "site.conf").is_file()
    assert done.stdout == "backed up 2 files\n"
