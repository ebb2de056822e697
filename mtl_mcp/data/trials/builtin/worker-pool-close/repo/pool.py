"""A small pool of worker threads consuming a job queue."""

import queue
import threading

_STOP = object()


class WorkerPool:
    """`size` daemon threads that run handler(job) for each submitted job.

    close() lets the workers finish every job submitted before it, then stops them and
    waits (up to `timeout` seconds each) for them to exit. A job whose handler raises is
    recorded in `errors` and does not stop its worker.
    """

    def __init__(self, handler, size=4):
        self.handler = handler
        self.jobs = queue.Queue()
        self.errors = []
        self.threads = [threading.Thread(target=self._work, daemon=True) for _ in range(size)]
        for thread in self.threads:
            thread.start()

    def submit(self, job):
        self.jobs.put(job)

    def _work(self):
        while True:
            job = self.jobs.get()
            if job is _STOP:
                return
            try:
                self.handler(job)
            except Exception as exc:
                self.errors.append((job, exc))

    def close(self, timeout=None):
        self.jobs.put(_STOP)
        for thread in self.threads:
            thread.join(timeout)
