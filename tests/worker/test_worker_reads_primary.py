"""A worker never reads the replica the admin and the API read (``READ_REPLICA``): a real
``runworker`` whose replica alias names a database no connection can open still drains the
queue and exits cleanly (reading that alias raises ``OperationalError``)."""

import json
import os

import pytest
from django.db import connection

from django_jobs.models import Job

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def unreachable_replica() -> str:
    """A database name the test's backend cannot open."""
    if connection.vendor == "sqlite":
        return os.path.join(os.sep, "nonexistent-django-jobs-dir", "replica.sqlite3")
    return "django_jobs_no_such_replica"


def test_a_worker_drains_the_queue_with_a_replica_it_cannot_open(start_worker):
    jobs = [Job.enqueue("echo", {"n": n}) for n in range(3)]
    failing = Job.enqueue("always_fails", max_attempts=1)
    worker = start_worker("--burst", env={
        "DJANGO_JOBS_TEST_EXTRA": json.dumps({"READ_REPLICA": "replica"}),
        "DJANGO_JOBS_TEST_REPLICA_NAME": unreachable_replica(),
    })
    assert worker.wait(timeout=120) == 0, worker.output()
    assert all(Job.objects.get(pk=job.pk).status == Job.Status.COMPLETED for job in jobs)
    assert Job.objects.get(pk=failing.pk).status == Job.Status.DEAD
    output = worker.output()
    assert unreachable_replica() not in output and "OperationalError" not in output, output
