"""A worker of two queues, one of them holding nearly every job: its claims take the jobs of both
in claim order (priority, then run_at, then id), across the queues, and none of another queue.

On PostgreSQL such a claim merges one walk of the ready index per queue, each bounded by its
queue (``engine/postgres/statements.py``, ``READY_OF_QUEUES`` and ``ONE_QUEUE``;
``tests/engine/test_queue_plans.py`` reads its plans); elsewhere the ORM's claim runs.
"""

from datetime import timedelta

import pytest
from django.utils import timezone

from django_jobs.core import contract
from django_jobs.core.contract import ClaimRequest
from django_jobs.core.outcomes import AttemptOutcome
from django_jobs.models import Job

pytestmark = pytest.mark.django_db


def turns(queues, limit=4):
    """Claims as a worker's turns make them: each finishes the last batch and claims the next,
    until a claim takes nothing; returns the ids in the order taken."""
    engine, taken, batch = contract.engine("default"), [], []
    while True:
        now = timezone.now()
        outcomes = [AttemptOutcome(job=job, kind="completed", started_at=job.started_at or now,
                                   finished_at=now) for job in batch]
        request = ClaimRequest("w1", limit, 30.0, queues=queues)
        done, batch = engine.finish_and_claim(outcomes, request)
        assert len(done) == len(outcomes)
        if not batch:
            return taken
        assert len(batch) == limit or not engine.claim(request)  # short only at the end
        taken += [job.pk for job in batch]


def in_claim_order(jobs):
    return [job.pk for job in sorted(jobs, key=lambda job: (-job.priority, job.run_at, job.pk))]


def test_a_worker_of_two_queues_takes_their_jobs_in_priority_order_across_both():
    now = timezone.now()
    bulk = [Job.enqueue("noop", queue="bulk", run_at=now - timedelta(seconds=n % 7))
            for n in range(30)]
    mail = [  # fewer, enqueued later: higher, equal and lower priorities, due before and after
        Job.enqueue("noop", queue="mail", priority=10, run_at=now - timedelta(seconds=1)),
        Job.enqueue("noop", queue="mail", priority=10, run_at=now - timedelta(seconds=9)),
        Job.enqueue("noop", queue="mail", run_at=now - timedelta(seconds=8)),
        Job.enqueue("noop", queue="mail", run_at=now - timedelta(seconds=3)),
        Job.enqueue("noop", queue="mail", priority=-10, run_at=now - timedelta(seconds=20)),
    ]
    other = Job.enqueue("noop", queue="sms", priority=20)
    later = Job.enqueue("noop", queue="mail", priority=20, delay=60)
    expected = in_claim_order(Job.objects.filter(pk__in=[j.pk for j in bulk + mail]))
    assert expected[:2] == [mail[1].pk, mail[0].pk] and expected[-1] == mail[4].pk
    assert turns(["bulk", "mail"]) == expected
    assert set(Job.objects.ready().values_list("pk", flat=True)) == {other.pk}
    assert Job.objects.get(pk=later.pk).status == "pending"


@pytest.mark.parametrize("queues", [["empty", "bulk"], ["bulk", "empty"]])
def test_a_worker_of_an_empty_and_a_full_queue_takes_the_full_ones_jobs_in_order(queues):
    now = timezone.now()
    jobs = [Job.enqueue("noop", queue="bulk", priority=[0, 10, -10][n % 3],
                        run_at=now - timedelta(seconds=n % 5)) for n in range(24)]
    Job.enqueue("noop", queue="other")
    assert turns(queues, limit=5) == in_claim_order(jobs)
