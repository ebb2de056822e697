import os
import subprocess
import sys
import time

import pytest

from pidlock import LockHeld, acquire, release


def dead_pid():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.fixture
def live_pid():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield child.pid
    child.kill()
    child.wait()


def age(path, seconds):
    then = time.time() - seconds
    os.utime(path, (then, then))


@pytest.mark.parametrize("seconds_ago", [0, 60, 86400 * 3])
def test_a_lock_of_a_dead_process_is_taken_over_however_old(tmp_path, seconds_ago):
    lock = tmp_path / "job.pid"
    lock.write_text(str(dead_pid()))
    age(lock, seconds_ago)
    acquire(lock)
    assert lock.read_text().strip() == str(os.getpid())


@pytest.mark.parametrize("seconds_ago", [0, 86400 * 3])
def test_a_lock_of_a_running_process_is_refused_however_old(tmp_path, live_pid, seconds_ago):
    lock = tmp_path / "job.pid"
    lock.write_text(str(live_pid))
    age(lock, seconds_ago)
    with pytest.raises(LockHeld):
        acquire(lock)
    assert lock.read_text().strip() == str(live_pid)


def test_release_leaves_another_processes_lock_alone(tmp_path, live_pid):
    lock = tmp_path / "job.pid"
    lock.write_text(str(live_pid))
    release(lock)
    assert lock.read_text().strip() == str(live_pid)


def test_a_run_in_another_process_holds_the_lock_until_it_crashes(tmp_path):
    lock = tmp_path / "job.pid"
    holder = (
        "import sys\n"
        f"sys.path.insert(0, {os.getcwd()!r})\n"
        "from pidlock import acquire\n"
        f"acquire({str(lock)!r})\n"
        "print('locked', flush=True)\n"
        "sys.stdin.read()\n"  # runs until the test closes its stdin; then exits, no release
    )
    child = subprocess.Popen([sys.executable, "-c", holder], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "locked\n"
        with pytest.raises(LockHeld):
            acquire(lock)
    finally:
        child.stdin.close()
        child.wait(timeout=30)
    acquire(lock)
    assert lock.read_text().strip() == str(os.getpid())
