"""A stop signal reaches the worker's loop wherever the main thread is when it lands."""

import random
import signal
import threading
import time

import pytest

from django_jobs.models import Job
from django_jobs.worker.loop import Worker
from django_jobs.worker.options import WorkerOptions
from tests.conftest import wait_for

FAST = ["--lease", "2", "--heartbeat", "0.3", "--poll-interval", "0.1"]


def test_a_stop_that_lands_while_the_loop_waits_returns_and_wakes_the_loop():
    """A signal handler runs between any two bytecodes of the main thread, also inside the
    wake's ``wait``. ``stop`` must return (it takes no lock the interrupted code could hold),
    and end the wait."""
    worker = Worker(WorkerOptions())
    returned = threading.Event()

    def stop_soon() -> None:
        time.sleep(0.2)
        worker.stop()
        returned.set()

    threading.Thread(target=stop_soon, daemon=True).start()
    try:
        began = time.monotonic()
        assert worker.wake.wait(30), "the loop was not woken"
        assert time.monotonic() - began < 20
        assert returned.wait(10), "stop() did not return"
        assert worker.stopping
    finally:
        worker.wake.close()


def test_a_real_stop_signal_wakes_the_loop_waiting_on_its_wake():
    """SIGTERM delivered while the main thread waits on the wake: the handler (``stop``) runs
    in the main thread, inside that wait, and its ``Wake.set`` ends it."""
    from django_jobs.worker.watchman import install_signals, restore_signals

    worker = Worker(WorkerOptions())
    previous = install_signals(worker.stop)
    main = threading.main_thread().ident
    assert main is not None
    sender = threading.Timer(0.2, signal.pthread_kill, (main, signal.SIGTERM))
    try:
        sender.start()
        assert worker.wake.wait(30), "the loop was not woken"
        assert worker.stopping
    finally:
        sender.cancel()
        restore_signals(previous)
        worker.wake.close()


def test_stop_outside_a_run_sets_the_wake_event():
    worker = Worker(WorkerOptions())
    worker.stop()
    assert worker.stopping and worker.wake.is_set()


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_sigterm_at_arbitrary_points_of_the_loop_always_ends_the_worker(start_worker):
    """Workers turning ten times a second while jobs flow, each sent SIGTERM at its own
    moment: every one drains and exits 0, and no job is lost or left held."""
    workers = [start_worker("--concurrency", "2", *FAST) for _ in range(4)]
    wait_for(lambda: all("started; queues" in w.output() for w in workers), timeout=60)
    jobs = Job.enqueue_many("echo", [{"n": n} for n in range(200)])
    for number, worker in enumerate(workers):
        time.sleep(0.05 * number + random.random() / 10)
        worker.signal(signal.SIGTERM)
    for worker in workers:
        assert worker.wait() == 0, worker.output()
        assert "stopping;" in worker.output()
    statuses = set(Job.objects.filter(pk__in=[j.pk for j in jobs])
                   .values_list("status", flat=True))
    assert statuses <= {Job.Status.COMPLETED, Job.Status.PENDING}
