"""A claim that committed although the worker saw it fail (the reply was lost) is handed back."""

import uuid

import pytest
from django.db import OperationalError, connection

from django_jobs.models import Job, JobAttempt
from django_jobs.worker import turn
from django_jobs.worker.loop import Worker
from django_jobs.worker.options import WorkerOptions
from tests.conftest import requires_postgres

pytestmark = pytest.mark.django_db(transaction=True)
S = Job.Status


def test_release_claim_hands_back_what_one_claim_holds_and_nothing_else():
    Job.enqueue_many("echo", [{"n": n} for n in range(3)])
    token = uuid.uuid4()
    mine = Job.objects.claim(worker_id="w", limit=2, lease_seconds=30, lease_token=token)
    (other,) = Job.objects.claim(worker_id="w", limit=1, lease_seconds=30)
    assert {job.lease_token for job in mine} == {token}
    assert Job.objects.release_claim(token) == 2
    for job in mine:
        job.refresh_from_db()
        assert (job.status, job.attempt) == (S.PENDING, 0)  # the attempt is unspent
        assert list(job.attempts.values_list("outcome", flat=True)) == [
            JobAttempt.Outcome.RELEASED]
    other.refresh_from_db()
    assert other.status == S.PROCESSING
    assert Job.objects.release_claim(token) == 0  # nothing is held under it any more


@requires_postgres
def test_a_claim_whose_reply_is_lost_is_handed_back_by_the_next_turn():
    """The claim statement runs and commits, then the connection fails before its reply
    arrives: the worker holds none of the jobs it claimed, so the next turn hands them back
    (and may claim them again under a new token) instead of leaving them processing until
    their lease runs out."""
    jobs = Job.enqueue_many("echo", [{"n": n} for n in range(3)])
    worker = Worker(WorkerOptions(concurrency=4))

    def lose_the_reply(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if "lease_token = %s" in sql and "RETURNING" in sql:
            raise OperationalError("server closed the connection unexpectedly")
        return result

    with connection.execute_wrapper(lose_the_reply), pytest.raises(OperationalError):
        turn.claim(worker)
    assert not worker.executor.running and len(worker.producer.in_doubt) == 1
    (lost,) = worker.producer.in_doubt
    assert Job.objects.filter(status=S.PROCESSING, lease_token=lost).count() == 3

    claimed = turn.claim(worker)
    assert worker.producer.in_doubt == []
    assert not Job.objects.filter(lease_token=lost).exists()
    assert claimed == len(worker.executor.running) >= 1
    for job in jobs:
        outcomes = list(JobAttempt.objects.filter(job=job).values_list("outcome", flat=True))
        assert outcomes == [JobAttempt.Outcome.RELEASED]
    held = Job.objects.filter(status=S.PROCESSING)
    assert set(held.values_list("pk", flat=True)) == set(worker.executor.running)
