"""Helpers for the task tests: a real Worker drained in a thread, and a task-signal recorder."""

import threading
from contextlib import contextmanager

from django.db import connections

from django_jobs.models import Job
from django_jobs.worker.loop import Worker
from django_jobs.worker.options import WorkerOptions


def drain(worker_id="tasks-worker", **options):
    """Run a real Worker in burst mode in a thread until nothing is ready; return jobs run."""
    worker = Worker(WorkerOptions(burst=True, poll_interval=0.05, worker_id=worker_id, **options))
    ran = []

    def target():
        try:
            ran.append(worker.run())
        finally:
            connections.close_all()

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(timeout=120)
    assert not thread.is_alive(), "worker did not finish"
    return ran[0]


def drain_until_finished(result, rounds=20):
    """Drain (retries wait out their short backoff) until ``result`` is final."""
    for _ in range(rounds):
        drain()
        result.refresh()
        if result.is_finished:
            return result
        Job.objects.filter(public_id=result.id).run_now()
    raise AssertionError(f"{result.id} still {result.status} after {rounds} rounds")


class Recorder:
    """Collects task signals (sent from worker threads) as (signal, id, status, attempts)."""

    def __init__(self):
        self.events = []
        self.results = []
        self.lock = threading.Lock()

    def started(self, sender, task_result, **kwargs):
        self._add("started", sender, task_result)

    def finished(self, sender, task_result, **kwargs):
        self._add("finished", sender, task_result)

    def _add(self, name, sender, result):
        with self.lock:
            self.events.append((name, sender, result.id, result.status, result.attempts))
            self.results.append((name, result))


@contextmanager
def recording_task_signals():
    """A Recorder connected to task_started and task_finished for the ``with`` block."""
    from django_jobs.backends.compat import task_finished, task_started

    recorder = Recorder()
    task_started.connect(recorder.started)
    task_finished.connect(recorder.finished)
    try:
        yield recorder
    finally:
        task_started.disconnect(recorder.started)
        task_finished.disconnect(recorder.finished)
