"""A job's shelf (``core/shelves.py``): the open day while the job is open, and once it is
finished the first UTC day boundary at or after its ``finished_at`` plus the ``RETENTION`` age
of its status (the kept day for a status kept for ever); its attempts on the same shelf. Held
after every write that finishes a job or reopens one, on every database, through the engine's
verbs and real in-process workers.

The expected day is worked out here from the row's own ``finished_at`` (the database's time)
and the setting, apart from ``prune_day``."""

from datetime import UTC, date, datetime, time, timedelta

import pytest
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from django_jobs.core import clock
from django_jobs.core.outcomes import AttemptOutcome
from django_jobs.core.shelves import KEPT_SHELF, OPEN_SHELF
from django_jobs.core.states import CANCELED, COMPLETED, DEAD, FAILED, PENDING, WAITING
from django_jobs.models import Job, JobAttempt
from tests.helpers import claim, run_burst, run_until_settled

pytestmark = pytest.mark.django_db(transaction=True)

OPEN = (WAITING, PENDING, Job.Status.PROCESSING, FAILED)
DEFAULT_AGES = {COMPLETED: timedelta(days=7), CANCELED: timedelta(days=7),
                DEAD: timedelta(days=30)}
ERROR = {"type": "E", "message": "boom"}


def expected_shelf(job: Job, ages=DEFAULT_AGES) -> date:
    """The shelf ``job`` (as read from its row) must have."""
    if job.status in OPEN:
        return OPEN_SHELF
    age = ages[job.status]
    if age is None:
        return KEPT_SHELF
    due = job.finished_at.astimezone(UTC) + age
    day = due.date()
    return day if due.time() == time(0) else day + timedelta(days=1)


def assert_shelves(ages=DEFAULT_AGES) -> list[Job]:
    """Every job's shelf is its expected one, open iff the job is open; a finished job's
    shelf is between its age and its age plus a day after its finish; every attempt is on its
    job's shelf. Returns the jobs, read from their rows."""
    jobs = list(Job.objects.order_by("pk"))
    assert jobs
    for job in jobs:
        assert job.shelf == expected_shelf(job, ages), (job.pk, job.status, job.finished_at)
        assert (job.shelf == OPEN_SHELF) == (job.status in OPEN)
        age = ages.get(job.status)
        if job.status not in OPEN and age is not None:
            start = datetime.combine(job.shelf, time(0), tzinfo=UTC)
            assert job.finished_at + age <= start < job.finished_at + age + timedelta(days=1)
        attempts = set(JobAttempt.objects.filter(job=job).values_list("shelf", flat=True))
        assert attempts <= {job.shelf}, (job.pk, job.status, attempts)
    return jobs


def finish(job: Job, kind: str, **options) -> Job:
    """Write ``job``'s (claimed) attempt as ``kind`` through the engine's finish."""
    now = timezone.now()
    outcome = AttemptOutcome(job=job, kind=kind, started_at=now, finished_at=now, **options)
    assert Job.objects.finish([outcome]) == [outcome]
    row = Job.objects.get(pk=job.pk)
    assert job.shelf == row.shelf  # the instance holds what the row holds
    return row


def test_the_sentinels_and_a_prune_day_read_back_as_they_were_written():
    job = Job.enqueue("noop")
    assert job.shelf == OPEN_SHELF  # the instance the enqueue made
    for day in (OPEN_SHELF, KEPT_SHELF, date(2026, 12, 11)):
        Job.objects.filter(pk=job.pk).update(shelf=day)
        assert Job.objects.get(pk=job.pk).shelf == day
        assert Job.objects.filter(pk=job.pk, shelf__lt=date(2000, 1, 1)).exists() == (
            day == OPEN_SHELF)


def test_an_insert_that_leaves_the_column_out_makes_an_open_row():
    job = Job.enqueue("noop")
    table = connection.ops.quote_name(JobAttempt._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (job_id, number, worker_id, started_at, outcome) "
            "VALUES (%s, 1, 'w', %s, 'released')",
            [job.pk, connection.ops.adapt_datetimefield_value(timezone.now())])
    assert JobAttempt.objects.get(job=job).shelf == OPEN_SHELF
    assert Job.objects.get(pk=job.pk).shelf == OPEN_SHELF


def test_enqueued_jobs_are_open_one_by_one_and_in_bulk():
    Job.enqueue("noop")
    Job.enqueue_many("noop", [{"n": n} for n in range(3)])
    assert {job.shelf for job in assert_shelves()} == {OPEN_SHELF}


def test_a_worker_completes_and_kills_jobs_onto_their_prune_days():
    done = Job.enqueue("noop")
    dead = Job.enqueue("permanent")
    run_burst()
    jobs = {job.pk: job for job in assert_shelves()}
    assert jobs[done.pk].status == COMPLETED and jobs[dead.pk].status == DEAD
    assert jobs[done.pk].shelf > timezone.now().date() + timedelta(days=6)
    assert jobs[dead.pk].shelf > timezone.now().date() + timedelta(days=29)


def test_a_job_dead_after_its_retries_takes_its_earlier_attempts_to_its_day():
    job = run_until_settled(Job.enqueue("always_fails"))  # three attempts
    assert job.status == DEAD and job.attempts.count() == 3
    assert_shelves()


def test_the_finish_moves_the_earlier_attempts_and_a_failure_keeps_them_open():
    Job.enqueue("noop")
    (job,) = claim(1)
    assert finish(job, "failed", error=ERROR).status == FAILED
    assert_shelves()  # failed: open, and its attempt with it
    Job.objects.all().run_now()
    (job,) = claim(1)
    assert finish(job, "completed", result={"ok": 1}).status == COMPLETED
    jobs = assert_shelves()
    assert JobAttempt.objects.filter(job=jobs[0], shelf=jobs[0].shelf).count() == 2


def test_a_finish_with_a_snooze_takes_the_orm_path_and_shelves_the_rest():
    Job.enqueue_many("noop", [1, 2])
    first, second = claim(2)
    now = timezone.now()
    outcomes = [AttemptOutcome(job=first, kind="snoozed", started_at=now, finished_at=now,
                               snooze_seconds=60),
                AttemptOutcome(job=second, kind="canceled", started_at=now, finished_at=now,
                               error=ERROR)]
    assert len(Job.objects.finish(outcomes)) == 2
    statuses = [job.status for job in assert_shelves()]
    assert sorted(statuses) == [CANCELED, PENDING]
    assert second.shelf == Job.objects.get(pk=second.pk).shelf  # the instance took it


def test_the_rescue_of_a_lost_job_that_goes_dead_shelves_it_and_its_attempts():
    with override_settings(DJANGO_JOBS={"ON_CRASH": "fail"}):
        job = Job.enqueue("noop", max_attempts=2)
        (claimed,) = claim(1)
        finish(claimed, "failed", error=ERROR)  # an earlier attempt, on the open shelf
        Job.objects.all().run_now()
        claim(1, lease_seconds=1)
        later = clock.now(Job.objects.db) + timedelta(seconds=5)
        (rescued,) = Job.objects.rescue(now=later)  # the lost attempt was its last
    assert rescued.pk == job.pk and rescued.status == DEAD
    [row] = assert_shelves()
    assert row.shelf == rescued.shelf != OPEN_SHELF
    assert list(row.attempts.values_list("outcome", flat=True)) == ["failed", "lost"]


def test_a_staff_cancel_shelves_the_jobs_and_the_attempts_of_a_failed_one():
    Job.enqueue("noop")
    (failed,) = claim(1)
    finish(failed, "failed", error=ERROR)
    Job.enqueue("noop")
    waiting = Job.enqueue("noop", depends_on=[Job.enqueue("noop", delay=3600)])
    assert waiting.status == WAITING
    # A caller's filter on the status names none of them once they are canceled.
    assert Job.objects.filter(status__in=(PENDING, FAILED, WAITING)).cancel() == 4
    jobs = assert_shelves()
    assert [job.status for job in jobs] == [CANCELED] * 4
    assert JobAttempt.objects.get(job=failed).shelf == jobs[0].shelf != OPEN_SHELF


def test_a_cancel_request_ends_on_the_workers_finish():
    Job.enqueue("noop")
    (job,) = claim(1)
    assert Job.objects.filter(pk=job.pk).cancel() == 1
    assert_shelves()  # still processing: open
    finish(job, "canceled", error=ERROR)
    assert assert_shelves()[0].status == CANCELED


def test_waiting_dependents_canceled_when_their_dependency_dies_are_shelved():
    dependency = Job.enqueue("permanent")
    dependent = Job.enqueue("noop", depends_on=[dependency], on_dependency_failure="cancel")
    chained = Job.enqueue("noop", depends_on=[dependent], on_dependency_failure="cancel")
    run_burst()
    jobs = {job.pk: job for job in assert_shelves()}
    assert jobs[dependency.pk].status == DEAD
    assert jobs[dependent.pk].status == jobs[chained.pk].status == CANCELED


def test_a_retry_of_dead_and_canceled_jobs_reopens_them_and_their_attempts():
    dead = run_until_settled(Job.enqueue("always_fails"))
    Job.enqueue("noop")
    (job,) = claim(1)
    canceled = finish(job, "canceled", error=ERROR)
    assert {dead.status, canceled.status} == {DEAD, CANCELED}
    assert Job.objects.filter(status__in=(DEAD, CANCELED)).retry() == 2
    jobs = assert_shelves()
    assert {job.shelf for job in jobs} == {OPEN_SHELF}
    assert set(JobAttempt.objects.values_list("shelf", flat=True)) == {OPEN_SHELF}
    run_burst()  # and they finish onto a day again
    assert {job.status for job in assert_shelves()} == {DEAD, COMPLETED}


def test_a_retry_with_a_corrected_payload_reopens_the_job():
    job = run_until_settled(Job.enqueue("always_fails"))
    assert Job.objects.filter(pk=job.pk).retry_with_payload({"fixed": True}) == 1
    assert assert_shelves()[0].shelf == OPEN_SHELF


@pytest.mark.parametrize("retention", [
    {"completed": None, "canceled": 60, "dead": timedelta(hours=1)},
    {"completed": 86400, "canceled": None},  # dead left out: kept for ever
])
def test_the_prune_day_follows_retention_and_none_keeps_for_ever(retention):
    ages = {COMPLETED: None, CANCELED: None, DEAD: None}
    ages.update({status: None if age is None else
                 age if isinstance(age, timedelta) else timedelta(seconds=age)
                 for status, age in retention.items()})
    with override_settings(DJANGO_JOBS={"RETENTION": retention}):
        Job.enqueue("noop")
        Job.enqueue("permanent")
        Job.enqueue("noop", delay=3600)
        run_burst()
        assert Job.objects.filter(status=PENDING).cancel() == 1
    jobs = assert_shelves(ages)
    kept = {job.status for job in jobs if job.shelf == KEPT_SHELF}
    assert kept == {status for status, age in ages.items() if age is None}


def test_the_prune_day_is_decided_by_the_databases_clock_not_the_hosts():
    ahead = timedelta(days=3)
    clock._keep(Job.objects.db, ahead)  # the database's clock three days ahead of this host
    try:
        Job.enqueue_many("noop", [1, 2])
        first, second = claim(2)
        finish(first, "completed")
        assert Job.objects.filter(pk=second.pk).cancel() == 1  # a request: still processing
        finish(second, "canceled", error=ERROR)
        Job.enqueue("noop")
        assert Job.objects.filter(status=PENDING).cancel() == 1  # the staff's cancel
    finally:
        clock.forget(Job.objects.db)
    jobs = assert_shelves()
    host_day = datetime.now(UTC).date()
    for job in jobs:
        assert job.shelf >= host_day + ahead + DEFAULT_AGES[job.status]
