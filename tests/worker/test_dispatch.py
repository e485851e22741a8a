"""How claimed jobs reach the slot threads (threads.Inbox), and what a thread tidies after a job."""

import threading

import pytest
from django.db import connection, transaction

from django_jobs.handlers.registry import handler, unregister
from django_jobs.models import Job
from django_jobs.worker.slots import Inbox
from tests.helpers import run_burst
from tests.models import Execution

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_inbox_hands_out_jobs_in_order_and_knows_how_long_they_wait():
    inbox = Inbox()
    assert inbox.stalled_for(0.0) is None  # nothing waits
    inbox.put(["a", "b"])
    assert inbox.stalled_for(float("inf")) == float("inf")
    assert inbox.get() == "a"
    inbox.close(2)  # "b" was never taken: dropped, and both threads are told to stop
    assert [inbox.get(), inbox.get()] == [None, None]
    assert inbox.stalled_for(0.0) is None


def test_a_batch_of_blocking_jobs_still_runs_concurrency_jobs_at_once():
    """One thread takes the batch first; jobs it cannot reach go to the idle threads.

    Each job waits for all four to be running: if the worker left them to one thread, the
    barrier would break and the jobs would fail."""
    barrier = threading.Barrier(4, timeout=20)

    @handler("rendezvous")
    def rendezvous(payload):
        return {"arrived": barrier.wait()}

    try:
        jobs = Job.enqueue_many("rendezvous", [{}] * 4)
        assert run_burst(concurrency=4) == 4
    finally:
        unregister("rendezvous")
    finished = Job.objects.filter(pk__in=[j.pk for j in jobs])
    assert sorted(j.status for j in finished) == ["completed"] * 4
    assert sorted(j.result["arrived"] for j in finished) == [0, 1, 2, 3]


def test_a_transaction_a_handler_leaves_open_is_rolled_back_after_the_job():
    """The thread opened its connection inside the handler (slot threads start without one):
    what the handler wrote uncommitted is rolled back, and the thread's next job runs."""

    @handler("leaves_transaction_open")
    def leaves_open(payload):
        found = connection.get_autocommit()  # the first job opens the thread's connection
        transaction.set_autocommit(False)
        Execution.objects.create(job_public_id=payload["mark"], pid=0, attempt=1)
        return {"autocommit_at_start": found}

    try:
        first = Job.enqueue("leaves_transaction_open", {"mark": "first"})
        second = Job.enqueue("leaves_transaction_open", {"mark": "second"})
        assert run_burst(concurrency=1) == 2
    finally:
        unregister("leaves_transaction_open")
    for job in (first, second):
        job.refresh_from_db()
        assert (job.status, job.result) == ("completed", {"autocommit_at_start": True})
    assert not Execution.objects.filter(job_public_id__in=["first", "second"]).exists()
