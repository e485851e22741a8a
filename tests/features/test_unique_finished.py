"""A unique key that also guards a finished state (completed, dead, canceled) is held by its job
wherever its row is: on PostgreSQL the insert holds the key (an advisory lock on its hash, for
the transaction) and looks for the holder on the whole table before it inserts
(``features/unique.py``, the engine's ``hold_key``), so that on a table partitioned by shelf a
key on a finished row in a day partition, which the open partition's unique index does not
see, refuses a new job all the same. On the plain table the index holds it as before.

Each test runs on the plain table (PostgreSQL and MariaDB: two connections) and, on PostgreSQL,
on the table partitioned by shelf (``tests/partitioned.py``)."""

import os
from contextlib import nullcontext
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from django_jobs.core.outcomes import AttemptOutcome
from django_jobs.core.shelves import OPEN_SHELF
from django_jobs.models import Job
from tests.conftest import requires_row_locks
from tests.partitioned import (
    day_partition,
    in_thread,
    partition_of,
    partitioned_jobs_table,
    race,
)

pytestmark = pytest.mark.django_db(transaction=True)

DONE_ONCE = ["pending", "processing", "failed", "completed", "canceled"]
POSTGRES = os.environ.get("DJANGO_JOBS_TEST_DB", "sqlite") == "postgres"


@pytest.fixture(params=["plain", "partitioned"])
def layout(request):
    if request.param == "partitioned" and not POSTGRES:
        pytest.skip("the jobs table is partitioned on PostgreSQL only")
    if request.param == "plain" and POSTGRES:
        pytest.skip("the jobs table is partitioned on PostgreSQL")
    with partitioned_jobs_table() if request.param == "partitioned" else nullcontext():
        yield request.param


def enqueue():
    return Job.enqueue("echo", unique_key="once", unique_states=DONE_ONCE,
                       unique_for=timedelta(days=1))


def test_a_key_held_by_a_completed_job_in_its_window_refuses_a_new_one(layout):
    job = enqueue()
    (claimed,) = Job.objects.claim(worker_id="w", limit=1, lease_seconds=30)
    now = timezone.now()
    Job.objects.finish([AttemptOutcome(job=claimed, kind="completed", started_at=now,
                                       finished_at=now)])
    row = Job.objects.get(pk=job.pk)
    assert row.status == "completed" and row.unique_key == job.unique_key
    assert row.shelf != OPEN_SHELF
    if layout == "partitioned":
        assert partition_of(job) == day_partition(job)

    again = enqueue()

    assert again.duplicate and again.pk == job.pk and again.status == "completed"
    assert Job.objects.count() == 1


def test_a_key_of_open_states_only_keeps_the_index_alone(layout):
    """No hold and no look first for a key that guards no finished state: its holder is found
    after the index refused the insert, as before."""
    job = Job.enqueue("echo", unique_key="k")
    queries: list[str] = []

    def record(execute, sql, params, many, context):
        queries.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        again = Job.enqueue("echo", unique_key="k")
    assert again.duplicate and again.pk == job.pk
    assert not any("advisory" in sql for sql in queries)


@requires_row_locks
@pytest.mark.parametrize("ended_by_its_enqueuer", [False, True],
                         ids=["open", "canceled in its enqueue's transaction"])
def test_two_concurrent_enqueues_of_a_key_guarding_finished_states_make_one_job(
    layout, ended_by_its_enqueuer
):
    """The first enqueue's transaction stays open (with its job canceled in it: moved off the
    open partition before the second insert can see it) while the second one waits for it."""
    if not POSTGRES:
        pytest.skip("the race's wait is read from pg_stat_activity")

    def first():
        job = enqueue()
        if ended_by_its_enqueuer:
            Job.objects.filter(pk=job.pk).cancel()
        return job

    second = race(first, enqueue)

    jobs = list(Job.objects.all())
    assert len(jobs) == 1
    assert second.duplicate and second.pk == jobs[0].pk
    assert jobs[0].status == ("canceled" if ended_by_its_enqueuer else "pending")


@requires_row_locks
def test_eight_concurrent_enqueues_of_a_key_guarding_finished_states_make_one_job(layout):
    threads = [in_thread(enqueue) for _ in range(8)]
    for thread, _ in threads:
        thread.join(30)
    results = [out for _, out in threads]
    assert all("error" not in out for out in results), results
    assert Job.objects.count() == 1
    assert sum(not out["result"].duplicate for out in results) == 1
