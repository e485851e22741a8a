"""A worker's rescue looks at the leases that ran out since its last look, and from the lease
index's front at least once per lease (``worker/heartbeat.py``, ``rescue``)."""

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from django_jobs.core import clock
from django_jobs.models import Job
from django_jobs.worker.heartbeat import rescue
from django_jobs.worker.loop import Worker
from django_jobs.worker.options import WorkerOptions
from tests.helpers import claim

pytestmark = pytest.mark.django_db(transaction=True)


def lease_ran_out(seconds_ago: float) -> Job:
    """A job claimed by a worker that is gone, its lease run out ``seconds_ago``."""
    job = Job.enqueue("echo")
    claim(worker_id="gone")
    Job.objects.filter(pk=job.pk).update(leased_until=clock.now() - timedelta(seconds=seconds_ago))
    return job


def test_a_look_that_found_nothing_bounds_the_next_one_until_a_lease_has_passed():
    worker = Worker(WorkerOptions(lease_seconds=30))
    assert rescue(worker) == []  # from the front: nothing ran out
    looked = worker.watchman.rescued_until
    assert looked is not None and worker.watchman.full_rescue_at > time.monotonic()
    job = lease_ran_out(60)  # ran out before that look: no bounded look reads it
    assert rescue(worker) == []
    assert worker.watchman.rescued_until > looked
    worker.watchman.full_rescue_at = time.monotonic()  # a lease has passed: from the front again
    assert [j.pk for j in rescue(worker)] == [job.pk]
    # it found one: the next look is from the front too
    assert worker.watchman.rescued_until is None


def test_a_lease_that_runs_out_after_a_look_is_found_by_the_next():
    worker = Worker(WorkerOptions(lease_seconds=30))
    worker.watchman.rescued_until = timezone.now() - timedelta(seconds=5)
    worker.watchman.full_rescue_at = time.monotonic() + 60
    job = lease_ran_out(1)
    assert [j.pk for j in rescue(worker)] == [job.pk]
