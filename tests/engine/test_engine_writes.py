"""Every write to the jobs table goes through the engine.

While the package's verbs run once each (enqueue, unique and dependent inserts, the claim and
finish of ``run_jobs``, a group's count and callback, retries, cancels (a dependent's policy's
too), run now, discard, rescue, release of waiting jobs, progress, pruning), every statement
that inserts, updates or deletes rows of the jobs table is checked: a call in
``django_jobs/engine/`` must be on the stack that sent it.
"""

import re
import traceback
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

import django_jobs
from django_jobs import enqueue_group, testing
from django_jobs.features import retention
from django_jobs.models import Job, JobGroup

pytestmark = pytest.mark.django_db(transaction=True)

ENGINE = str(Path(django_jobs.__file__).parent / "engine") + "/"
PACKAGE = str(Path(django_jobs.__file__).parent) + "/"
# INSERT INTO / UPDATE / DELETE FROM the jobs table (quoted as PostgreSQL, SQLite or MariaDB
# quote it), anywhere in the statement: the finish is an UPDATE inside a WITH.
WRITE = re.compile(r"(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+[`\"]?django_jobs_job[`\"]?(?![\w])",
                   re.IGNORECASE)


class Writes(list):
    seen = 0


@pytest.fixture
def writes_outside_engine():
    """The jobs-table writes sent with no engine frame on the stack, and where from; its
    ``seen`` counts every jobs-table write."""
    found = Writes()

    def check(execute, sql, params, many, context):
        if WRITE.search(sql):
            found.seen += 1
            stack = traceback.extract_stack()
            if not any(frame.filename.startswith(ENGINE) for frame in stack):
                ours = [f for f in stack if f.filename.startswith(PACKAGE)]
                where = f"{ours[-1].filename}:{ours[-1].lineno}" if ours else "outside the package"
                found.append(f"{sql[:80]!r} from {where}")
        return execute(sql, params, many, context)

    with connection.execute_wrapper(check):
        yield found


def test_the_check_sees_a_write_that_bypasses_the_engine(writes_outside_engine):
    job = Job.enqueue("echo")
    Job.objects.filter(pk=job.pk).update(priority=5)  # what no module may do
    assert len(writes_outside_engine) == 1
    assert "UPDATE" in writes_outside_engine[0].upper()


def test_every_verb_writes_the_jobs_table_through_the_engine(writes_outside_engine):
    done = Job.enqueue("echo", {"n": 1})
    Job.enqueue_many("echo", [{"n": 2}, {"n": 3}])
    Job.enqueue("echo", {"n": 4}, unique_key="order-42")
    Job.enqueue("echo", {"n": 5}, unique_key="order-42")  # the duplicate
    Job.enqueue("echo", {"n": 6}, depends_on=[done])
    Job.enqueue("fidelity_progress", {"message": "half way"})
    group = enqueue_group("counted", [("echo", {"n": 10})], callback="echo")
    failing = Job.enqueue("always_fails", max_attempts=2)
    testing.run_jobs()
    Job.objects.release_waiting()
    testing.run_jobs()
    failing.refresh_from_db()
    assert failing.status in (Job.Status.FAILED, Job.Status.DEAD)
    testing.run_jobs(include_delayed=True)
    failing.refresh_from_db()
    assert failing.status == Job.Status.DEAD
    canceled = Job.enqueue("echo", {"n": 9}, depends_on=[failing], on_dependency_failure="cancel")
    assert canceled.status == Job.Status.CANCELED  # by its policy, at enqueue
    assert failing.retry()
    pending = Job.enqueue("echo", {"n": 8})
    assert pending.cancel()
    later = Job.enqueue("echo", {"n": 7}, run_at=timezone.now() + timedelta(hours=1))
    assert later.run_now()
    Job.objects.filter(pk=failing.pk).discard()
    Job.objects.rescue()
    retention.prune({"completed": timedelta(0), "canceled": timedelta(0)})
    assert Job.objects.filter(status=Job.Status.COMPLETED).count() == 0
    assert JobGroup.objects.get(pk=group.pk).callback_job_id is not None
    assert writes_outside_engine == []
    assert writes_outside_engine.seen >= 15  # the scenario wrote through every verb above
