"""A fenced write that waited on a finish which moved its row to another partition is sent once
more and refused by its fence (``engine/moved_rows.py``); any other ``40001`` is raised as it is.

The races run on a table partitioned by shelf: the test database's jobs table, set aside for
the test, and in its place a partitioned one of the same columns (an open partition, one for
the prune days, a kept one). Two connections (threads): one finishes the job and holds its
transaction open, the other's write waits on the row's lock; the first commits, the second's
statement meets the moved row."""

import re
import uuid
from collections.abc import Callable

import pytest
from django.db import OperationalError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_jobs.core.db_errors import sqlstate
from django_jobs.core.outcomes import AttemptOutcome
from django_jobs.core.shelves import OPEN_SHELF
from django_jobs.core.states import COMPLETED, FAILED, PENDING, PROCESSING
from django_jobs.engine import moved_rows
from django_jobs.models import Job
from tests.conftest import requires_postgres
from tests.helpers import claim
from tests.partitioned import (
    day_partition,
    in_thread,
    partition_of,
    partitioned_jobs_table,
    race,
)

pytestmark = [requires_postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def partitioned_jobs():
    with partitioned_jobs_table():
        yield


def finished(job: Job, kind: str = "completed") -> Callable[[], object]:
    now = timezone.now()
    outcome = AttemptOutcome(job=job, kind=kind, started_at=now, finished_at=now)
    return lambda: Job.objects.finish([outcome])


def processing_job() -> Job:
    Job.enqueue("noop")
    (job,) = claim(1)
    assert partition_of(job) == "django_jobs_job_open"
    return job


# Each fenced write of the job a finish moved: what it returns when the fence refuses it.
def progress(job: Job) -> object:
    return Job.objects.record_progress(job, 0.5, "half")


def heartbeat(job: Job) -> object:
    return Job.objects.heartbeat(held={job.pk: job.lease_token}, lease_seconds=30)


def release(job: Job) -> object:
    return Job.objects.release([Job.objects.get(pk=job.pk)])


def finish_again(job: Job) -> object:
    return finished(job, "failed")()


def cancel(job: Job) -> object:
    return Job.objects.filter(pk=job.pk).cancel()


REFUSED = [(progress, False), (heartbeat, (set(), set())), (release, 0), (finish_again, []),
           (cancel, 0)]


@pytest.mark.parametrize(("write", "refused"), REFUSED, ids=lambda v: getattr(v, "__name__", ""))
def test_a_fenced_write_waiting_on_a_finish_that_moved_its_row_is_refused_by_its_fence(
    partitioned_jobs, write, refused
):
    job = processing_job()

    assert race(finished(Job.objects.get(pk=job.pk)), lambda: write(job)) == refused

    row = Job.objects.get(pk=job.pk)
    assert (row.status, row.progress, row.cancel_requested) == (COMPLETED, None, False)
    assert row.shelf != OPEN_SHELF
    assert partition_of(job) == day_partition(job)


def test_a_retry_waiting_on_a_cancel_that_moved_its_row_retries_the_canceled_job(
    partitioned_jobs
):
    Job.enqueue("noop")
    Job.objects.update(status=FAILED)
    job = Job.objects.get()

    assert race(lambda: Job.objects.filter(pk=job.pk).cancel(),
                lambda: Job.objects.filter(pk=job.pk).retry()) == 1

    row = Job.objects.get(pk=job.pk)
    assert (row.status, row.shelf) == (PENDING, OPEN_SHELF)
    assert partition_of(job) == "django_jobs_job_open"


def test_a_fenced_write_in_the_callers_transaction_is_sent_again_after_a_savepoint(
    partitioned_jobs
):
    """In an atomic block the retry rolls back to a savepoint: what the caller wrote before
    stays, and its transaction goes on."""
    job = processing_job()
    other = Job.enqueue("noop")

    def write() -> object:
        with transaction.atomic():
            Job.objects.filter(pk=other.pk).update(priority=5)
            refused = progress(job)
            return refused, Job.objects.get(pk=other.pk).priority

    assert race(finished(Job.objects.get(pk=job.pk)), write) == (False, 5)
    assert Job.objects.get(pk=other.pk).priority == 5


def test_the_claim_on_the_partitioned_table_is_planned_on_the_open_partition(partitioned_jobs):
    from django_jobs.engine.postgres import statements as sql

    text = sql.claim_sql(Job, ("pending", "failed"), 0, 0, 10)
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + text, [uuid.uuid4(), timezone.now(), "w", timezone.now(),
                                           timezone.now(), timezone.now()])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "django_jobs_job_open" in plan
    assert not re.search(r"django_jobs_job_\d{8}", plan), plan  # no day partition
    assert "django_jobs_job_kept" not in plan


def test_the_heartbeats_read_on_the_partitioned_table_is_planned_on_the_open_partition(
    partitioned_jobs
):
    """The heartbeat reads back the held jobs by id on the open shelf: a day partition,
    whose statistics may say it is empty while it fills, is not read (its scan by id, a scan
    of all the day's finished rows, ran at each heartbeat of each worker)."""
    job = processing_job()
    with CaptureQueriesContext(connection) as queries:
        Job.objects.heartbeat(held={job.pk: job.lease_token}, lease_seconds=30)
    (read,) = [q["sql"] for q in queries.captured_queries
               if q["sql"].startswith("SELECT") and "cancel_requested" in q["sql"]]
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + read)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "django_jobs_job_open" in plan
    assert not re.search(r"django_jobs_job_\d{8}", plan), plan  # no day partition
    assert "django_jobs_job_kept" not in plan


def test_another_serialization_failure_is_raised_as_it_is():
    """A fenced write in a REPEATABLE READ transaction whose row another one changed since its
    snapshot: PostgreSQL's "could not serialize access", not a moved row; raised once."""
    job = processing_job_plain()
    updates = []

    def counting(execute, sql, params, many, context):
        updates.extend([sql] if sql.startswith("UPDATE") else [])
        return execute(sql, params, many, context)

    with pytest.raises(OperationalError) as raised, transaction.atomic(), \
            connection.execute_wrapper(counting):
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        Job.objects.filter(pk=0).exists()  # the snapshot
        thread, out = in_thread(lambda: Job.objects.filter(pk=job.pk).update(priority=1))
        thread.join(10)
        assert out == {"result": 1}
        progress(job)
    assert len(updates) == 1  # not sent again
    assert sqlstate(raised.value) == "40001"
    assert "could not serialize access" in str(raised.value)
    row = Job.objects.get(pk=job.pk)
    assert (row.status, row.progress) == (PROCESSING, None)


def processing_job_plain() -> Job:
    Job.enqueue("noop")
    (job,) = claim(1)
    return job


def in_transaction(job: Job) -> Callable[[], object]:
    def write() -> object:
        with transaction.atomic():
            return progress(job)
    return write


def test_in_the_callers_transaction_the_first_moved_row_is_sent_again_on_what_the_catalog_says(
    partitioned_jobs
):
    """The jobs table is partitioned, as the catalog says: the first write in a caller's
    transaction that meets a moved row already runs in a savepoint and is sent again."""
    job = processing_job()
    moved_rows.forget(connection.alias)

    assert race(finished(Job.objects.get(pk=job.pk)), in_transaction(job)) is False
    assert connection.alias in moved_rows.MOVES_ROWS


def test_a_table_partitioned_after_the_catalog_was_read_is_known_from_its_first_moved_row(
    partitioned_jobs
):
    """Where the catalog was read before the table was partitioned (a process older than the
    migration), the first error reaches the caller, and from then on the write runs in a
    savepoint and is sent again."""
    first, second = processing_job(), processing_job()
    moved_rows.forget(connection.alias)
    moved_rows._read.add(connection.alias)  # read while the table was plain

    with pytest.raises(OperationalError, match="already moved to another partition"):
        race(finished(Job.objects.get(pk=first.pk)), in_transaction(first))
    assert connection.alias in moved_rows.MOVES_ROWS
    assert race(finished(Job.objects.get(pk=second.pk)), in_transaction(second)) is False
