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


def test_a_free_lock_is_taken_and_released(tmp_path):
    lock = tmp_path / "job.pid"
    acquire(lock)
    assert lock.read_text() == str(os.getpid())
    release(lock)
    assert not lock.exists()


def test_a_stale_lock_from_last_night_is_taken_over(tmp_path):
    lock = tmp_path / "job.pid"
    lock.write_text(str(dead_pid()))
    yesterday = time.time() - 86400
    os.utime(lock, (yesterday, yesterday))
    acquire(lock)
    assert lock.read_text() == str(os.getpid())


def test_a_second_acquire_in_the_same_run_is_refused(tmp_path):
    lock = tmp_path / "job.pid"
    acquire(lock)
    with pytest.raises(LockHeld):
        acquire(lock)
