import shutil
import subprocess
from pathlib import Path

SCRIPT = Path.cwd() / "rotate_logs.sh"


def install(tmp_path, logs=("web.log", "worker.log")):
    app = tmp_path / "opt app"
    app.mkdir()
    shutil.copy(SCRIPT, app / "rotate_logs.sh")
    (app / "logs").mkdir()
    for name in logs:
        (app / "logs" / name).write_text(f"{name}\n", encoding="utf-8")
    home = tmp_path / "home"
    home.mkdir()
    return app, home


def run(command, cwd):
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=30)


def test_cron_style_from_home_by_absolute_path(tmp_path):
    app, home = install(tmp_path)
    (app / "logs" / "old.log.gz").write_bytes(b"already rotated")
    done = run(["bash", str(app / "rotate_logs.sh")], cwd=home)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (app / "logs").iterdir()) == [
        "old.log.gz", "web.log.gz", "worker.log.gz"]
    assert (app / "logs" / "old.log.gz").read_bytes() == b"already rotated"


def test_by_a_relative_path_from_the_parent(tmp_path):
    app, _ = install(tmp_path)
    done = run(["bash", "opt app/rotate_logs.sh"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (app / "logs" / "web.log.gz").is_file()


def test_a_missing_log_folder_touches_nothing_where_it_runs(tmp_path):
    app, home = install(tmp_path)
    shutil.rmtree(app / "logs")
    (home / "keep.log").write_text("mine\n", encoding="utf-8")
    done = run(["bash", str(app / "rotate_logs.sh")], cwd=home)
    assert done.returncode != 0
    assert (home / "keep.log").read_text(encoding="utf-8") == "mine\n"
    assert sorted(p.name for p in home.iterdir()) == ["keep.log"]


def test_no_logs_today_is_not_an_error(tmp_path):
    app, home = install(tmp_path, logs=())
    done = run(["bash", str(app / "rotate_logs.sh")], cwd=home)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", "cron mails whatever lands on stderr"
    assert list((app / "logs").iterdir()) == []
