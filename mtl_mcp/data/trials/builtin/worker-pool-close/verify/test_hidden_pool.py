import threading

import pytest

from pool import WorkerPool


@pytest.mark.parametrize("size", [1, 3, 8])
def test_close_stops_every_worker_of_any_pool(size):
    done = []
    lock = threading.Lock()

    def handler(job):
        with lock:
            done.append(job)

    pool = WorkerPool(handler, size=size)
    for job in range(50):
        pool.submit(job)
    pool.close(timeout=3)
    assert not any(thread.is_alive() for thread in pool.threads)
    assert sorted(done) == list(range(50)), "every job queued before close() ran"


def test_queued_jobs_finish_before_the_workers_stop():
    release = threading.Event()
    done = []

    def handler(job):
        release.wait(timeout=10)
        done.append(job)

    pool = WorkerPool(handler, size=2)
    for job in range(6):
        pool.submit(job)
    closer = threading.Thread(target=pool.close, kwargs={"timeout": 10})
    closer.start()
    release.set()
    closer.join(timeout=15)
    assert not closer.is_alive()
    assert sorted(done) == list(range(6))


def test_a_failing_job_does_not_stop_its_worker():
    def handler(job):
        if job == "bad":
            raise RuntimeError("boom")

    pool = WorkerPool(handler, size=4)
    for job in ["bad", "ok", "bad", "ok"]:
        pool.submit(job)
    pool.close(timeout=3)
    assert [job for job, _ in pool.errors] == ["bad", "bad"]
    assert not any(thread.is_alive() for thread in pool.threads)
