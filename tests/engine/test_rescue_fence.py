"""The rescue of a stale job is written fenced on the lease it read, and the job instance takes
the rescue's values only if that write changed the row."""

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from django_jobs.engine import engine_for
from django_jobs.features import crashes
from django_jobs.models import Job, JobAttempt
from tests.admin_helpers import make_job

pytestmark = pytest.mark.django_db
S = Job.Status


def stale_job(crashes_so_far: int = 0) -> Job:
    """A processing job whose lease ran out a minute ago, as a rescuer reads it."""
    now = timezone.now()
    job = make_job("processing", lease_token=uuid.uuid4(), leased_until=now - timedelta(minutes=1),
                   max_attempts=3, crashes=crashes_so_far)
    return Job.objects.stale(timezone.now()).get(pk=job.pk)


def row(job: Job) -> dict:
    return Job.objects.filter(pk=job.pk).values().get()


def fields(job: Job) -> dict:
    return {name: value for name, value in job.__dict__.items() if not name.startswith("_")}


@pytest.mark.parametrize(("on_crash", "crashes_so_far"), [
    ("retry", 0),  # the lost attempt would not count: one more attempt in the budget
    ("fail", 0),  # it would count as a failed attempt
    ("retry", 2),  # alone in its worker at its third crash: it would be quarantined
])
def test_a_rescue_whose_lease_was_taken_over_changes_neither_the_job_nor_its_row(
    settings, on_crash, crashes_so_far
):
    settings.DJANGO_JOBS = {"ON_CRASH": on_crash, "MAX_CRASHES": 3}
    job = stale_job(crashes_so_far)
    # Between the read and the write another rescuer took the job over and claimed it again.
    Job.objects.filter(pk=job.pk).update(
        lease_token=uuid.uuid4(), worker_id="w-2",
        leased_until=timezone.now() + timedelta(seconds=30))
    job_before, row_before = fields(job), row(job)

    assert not crashes.rescue_one(engine_for(job._state.db), job, alone=True,
                                  now=timezone.now())

    assert fields(job) == job_before
    assert row(job) == row_before
    assert not JobAttempt.objects.filter(job_id=job.pk).exists()


@pytest.mark.parametrize(("on_crash", "crashes_so_far", "status", "max_attempts"), [
    ("retry", 0, S.FAILED, 4),
    ("fail", 0, S.FAILED, 3),
    ("retry", 2, S.DEAD, 3),
])
def test_a_rescue_that_holds_the_lease_leaves_the_job_instance_as_its_row(
    settings, on_crash, crashes_so_far, status, max_attempts
):
    settings.DJANGO_JOBS = {"ON_CRASH": on_crash, "MAX_CRASHES": 3}
    job = stale_job(crashes_so_far)

    assert crashes.rescue_one(engine_for(job._state.db), job, alone=True, now=timezone.now())

    stored = row(job)
    assert (stored["status"], stored["max_attempts"], stored["crashes"]) == (
        status, max_attempts, crashes_so_far + 1)
    assert {name: fields(job)[name] for name in stored if name != "unique_key"} == {
        name: value for name, value in stored.items() if name != "unique_key"}
    assert list(JobAttempt.objects.filter(job_id=job.pk).values_list("outcome", flat=True)) == [
        JobAttempt.Outcome.LOST]
