import threading

from pool import WorkerPool


def test_jobs_run():
    done = []
    lock = threading.Lock()

    def handler(job):
        with lock:
            done.append(job)

    pool = WorkerPool(handler, size=2)
    for job in range(10):
        pool.submit(job)
    pool.close(timeout=5)
    assert sorted(done) == list(range(10))


def test_close_stops_every_worker():
    pool = WorkerPool(lambda job: None, size=2)
    pool.submit("job")
    pool.close(timeout=2)
    assert not any(thread.is_alive() for thread in pool.threads)
