"""Real ``runworker`` processes woken on PostgreSQL: an enqueue wakes the one worker that waited
longest, a worker that was given a job but died is made up for by another's poll, and a worker
that stops removes its waiting row (migration 0018, ``engine/postgres/waiters.py``)."""

from __future__ import annotations

import signal

import pytest
from django.db import connection

from django_jobs.models import Job
from tests.conftest import requires_postgres, wait_for

pytestmark = [requires_postgres, pytest.mark.django_db(transaction=True), pytest.mark.slow]
S = Job.Status
# Polls and heartbeats far apart: within the waits below, only a notification wakes a worker.
ASLEEP = ["--poll-interval", "120", "--heartbeat", "60", "--lease", "300"]


def waiting() -> list[int]:
    """The pids of the waiting workers' listeners, longest waiting first."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM django_jobs_waiter WHERE waiting IS NOT NULL "
                       "ORDER BY waiting, pid")
        return [pid for (pid,) in cursor.fetchall()]


def rows() -> dict[int, object]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid, waiting FROM django_jobs_waiter")
        return dict(cursor.fetchall())


@pytest.fixture(autouse=True)
def no_waiters():
    """The waiters table is not a model's: the test database's flush leaves it as it is."""
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM django_jobs_waiter")
    yield
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM django_jobs_waiter")


def start_waiting(start_worker, name: str, *options: str):
    """A worker that has registered as waiting; returns it and its listener's pid."""
    before = set(waiting())
    worker = start_worker("--worker-id", name, *options)
    wait_for(lambda: set(waiting()) - before or worker.proc.poll() is not None, timeout=60)
    (pid,) = set(waiting()) - before
    return worker, pid


def test_an_enqueue_wakes_the_worker_that_waited_longest_alone(start_worker):
    first, first_pid = start_waiting(start_worker, "first", *ASLEEP)
    second, second_pid = start_waiting(start_worker, "second", *ASLEEP)
    since = rows()[second_pid]
    job = Job.enqueue("echo")
    wait_for(lambda: Job.objects.get(pk=job.pk).status == S.COMPLETED, timeout=60)
    assert Job.objects.get(pk=job.pk).worker_id == "first"
    wait_for(lambda: first_pid in waiting(), timeout=60)  # its next claim: waiting again
    assert rows()[second_pid] == since  # never taken
    for worker in (first, second):
        worker.signal(signal.SIGTERM)
        assert worker.wait() == 0, worker.output()
    assert rows() == {}  # each removed its row on the way out


def test_a_worker_given_a_job_that_died_is_made_up_for_by_another_workers_poll(start_worker):
    doomed, doomed_pid = start_waiting(start_worker, "doomed", *ASLEEP)
    polling, polling_pid = start_waiting(start_worker, "polling", "--poll-interval", "0.5")
    doomed.signal(signal.SIGKILL)
    assert doomed.wait() == -signal.SIGKILL
    job = Job.enqueue("echo")
    # The trigger gave the job to the worker that waited longest, which is gone.
    assert rows()[doomed_pid] is None
    assert polling_pid in waiting()
    wait_for(lambda: Job.objects.get(pk=job.pk).status == S.COMPLETED, timeout=60)
    assert Job.objects.get(pk=job.pk).worker_id == "polling"
    polling.signal(signal.SIGTERM)
    assert polling.wait() == 0, polling.output()


def test_a_job_not_yet_due_runs_once_due(start_worker):
    worker, _ = start_waiting(start_worker, "patient", "--poll-interval", "0.5")
    job = Job.enqueue("echo", delay=1.5)
    wait_for(lambda: Job.objects.get(pk=job.pk).status == S.COMPLETED, timeout=60)
    finished = Job.objects.get(pk=job.pk)
    assert finished.started_at >= finished.run_at
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()
