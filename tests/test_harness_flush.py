"""The test harness's ``flush`` (``tests/management/commands/flush.py``), which empties the test
database after each transactional test, on PostgreSQL: it truncates the tables and partitions
that hold rows, and only those, and sends ``post_migrate`` as Django's flush does."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from django.db.models.signals import post_migrate
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_jobs.core.outcomes import AttemptOutcome
from django_jobs.models import Job, JobAttempt
from tests.conftest import requires_postgres
from tests.helpers import claim
from tests.partitioned import day_partition, partition_of

pytestmark = [requires_postgres, pytest.mark.django_db(transaction=True)]


def test_the_harness_flush_empties_the_tables_and_partitions_that_hold_rows():
    Job.enqueue("noop")
    (done,) = claim(1)
    now = timezone.now()
    assert Job.objects.finish(
        [AttemptOutcome(job=done, kind="completed", started_at=now, finished_at=now)])
    waiting = Job.enqueue("noop")
    get_user_model().objects.create(username="kept-until-the-flush")
    day = day_partition(done)
    assert partition_of(done) == day and partition_of(waiting) == "django_jobs_job_open"
    sent: list[str] = []

    def migrated(app_config, using: str, **kwargs: object) -> None:
        sent.append(f"{app_config.label} on {using}")

    post_migrate.connect(migrated, weak=False)
    try:
        with CaptureQueriesContext(connection) as queries:
            # as Django's TransactionTestCase calls it after each test
            call_command("flush", verbosity=0, interactive=False, database=connection.alias,
                         reset_sequences=False, allow_cascade=False,
                         inhibit_post_migrate=False)
    finally:
        post_migrate.disconnect(migrated)

    (truncate,) = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("TRUNCATE")]
    named = set(re.findall(r"[a-z_0-9]+", truncate.removeprefix("TRUNCATE")))
    assert {day, "django_jobs_job_open", "auth_user"} <= named
    assert "django_jobs_job_kept" not in named  # it held no row
    assert (Job.objects.count(), JobAttempt.objects.count(),
            get_user_model().objects.count()) == (0, 0, 0)
    assert f"django_jobs on {connection.alias}" in sent  # once for each app, as Django does
