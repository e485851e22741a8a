"""``Job.wait`` and ``Job.await_result`` against a real ``runworker`` process: the result
returned, the job's error raised, a timeout raised, the refusal inside a transaction, many
waiters in threads sharing one listener (PostgreSQL), and the async twin."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace

import pytest
from asgiref.sync import sync_to_async
from django.db import connection, connections, transaction

from django_jobs.core.contract import engine
from django_jobs.engine.postgres import engine as postgres_engine
from django_jobs.engine.postgres import finish_notes
from django_jobs.engine.postgres import waiters as pgwaiters
from django_jobs.exceptions import JobFailed, WaitInTransaction, WaitTimeout
from django_jobs.models import Job
from tests.conftest import requires_postgres, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
FAST = ["--lease", "5", "--heartbeat", "0.5", "--poll-interval", "0.2"]


@pytest.fixture(autouse=True)
def _listener_stopped():
    """The wait listener's connection ends with the test, before its database is dropped."""
    yield
    wakeups = engine("default").wakeups()
    if hasattr(wakeups, "stop"):
        wakeups.stop()


def test_wait_returns_the_result_raises_the_error_and_times_out(start_worker):
    start_worker(*FAST)
    done = Job.enqueue("echo", {"n": 1})
    dead = Job.enqueue("permanent")
    slow = Job.enqueue("slow", {"seconds": 3})

    assert done.wait(timeout=30) == {"echo": {"n": 1}}
    assert done.status == Job.Status.COMPLETED  # the instance holds the row as read

    with pytest.raises(JobFailed) as failed:
        dead.wait(timeout=30)
    assert failed.value.status == Job.Status.DEAD
    assert failed.value.error_type == "PermanentError"
    assert failed.value.error_message == "cannot ever work"
    assert 'raise PermanentError("cannot ever work")' in failed.value.traceback

    with pytest.raises(WaitTimeout) as late:
        slow.wait(timeout=0.3)
    assert isinstance(late.value, TimeoutError)
    assert slow.status in (Job.Status.PENDING, Job.Status.PROCESSING)
    assert slow.wait(timeout=30) == {"slept": 3, "attempt": 1}  # the job went on


def test_a_job_retried_after_failing_is_waited_for(start_worker):
    start_worker(*FAST)
    job = Job.enqueue("flaky", {"fail_times": 1}, max_attempts=2)
    # The retry backs off past the first reads: the wait goes on through status failed.
    assert job.wait(timeout=60) == {"succeeded_on": 2}


def test_inside_a_transaction_the_wait_is_refused_at_once():
    with transaction.atomic():
        job = Job.enqueue("echo")
        with pytest.raises(WaitInTransaction, match="inside a transaction"):
            job.wait(timeout=30)
    with pytest.raises(ValueError, match="timeout"):
        job.wait(timeout=-1)


def test_the_async_twin_returns_the_result_raises_the_error_and_times_out(start_worker):
    start_worker(*FAST)
    done = Job.enqueue("echo", {"n": 2})
    dead = Job.enqueue("permanent")
    unserved = Job.enqueue("echo", delay=3600)  # due in an hour

    async def waits():
        result = await done.await_result(timeout=30)
        with pytest.raises(JobFailed, match="PermanentError"):
            await dead.await_result(timeout=30)
        with pytest.raises(WaitTimeout):
            await unserved.await_result(timeout=0.2)
        await sync_to_async(connections.close_all)()  # the reads' thread's connection
        return result

    assert asyncio.run(waits()) == {"echo": {"n": 2}}


def _listeners() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                       [finish_notes.APPLICATION_NAME])
        return cursor.fetchone()[0]


def test_many_waiters_in_threads(start_worker):
    """On PostgreSQL they share one listening connection for the process."""
    jobs = [Job.enqueue("slow", {"seconds": 1.5}) for _ in range(8)]
    results: dict[int, object] = {}

    def wait(job: Job) -> None:
        try:
            results[job.pk] = job.wait(timeout=60)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=wait, args=(job,)) for job in jobs]
    for thread in threads:
        thread.start()
    if connection.vendor == "postgresql":
        assert wait_for(lambda: engine("default").wakeups().listening, timeout=10)
        assert _listeners() == 1
    start_worker(*FAST, "--concurrency", "8")
    for thread in threads:
        thread.join(timeout=90)
    assert results == {job.pk: {"slept": 1.5, "attempt": 1} for job in jobs}
    if connection.vendor == "postgresql":
        assert _listeners() == 1
        assert engine("default").wakeups().heard >= 1  # the worker's finishes were announced


@requires_postgres
def test_a_finish_notification_wakes_its_waiters_only():
    wakeups = engine("default").wakeups()
    mine, other = threading.Event(), threading.Event()
    with wakeups.watching(1, mine.set), wakeups.watching(2, other.set):
        assert wait_for(lambda: wakeups.listening, timeout=10)
        mine.clear(), other.clear()  # as it began listening, it woke every waiter once
        pgwaiters.result_waiters["default"] = True  # as a worker's heartbeat found
        try:
            postgres_engine.announce("default", [_done(1), _done(3)])
        finally:
            pgwaiters.result_waiters.clear()
        assert mine.wait(timeout=10)
    assert not other.is_set()


def _done(job_id: int) -> SimpleNamespace:
    """What ``announce`` reads of a written outcome: its job's id."""
    return SimpleNamespace(job=SimpleNamespace(pk=job_id))
