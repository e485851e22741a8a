"""A cancel request is for the attempt that runs: the finish that ends the job (completed,
dead, canceled) clears it in the same write; a job that runs again keeps it, and its next
attempt is stopped. On every database's finish path (PostgreSQL's statement, the ORM's)."""

import pytest

from django_jobs.models import Job
from django_jobs.worker.execution import run_job

pytestmark = pytest.mark.django_db(transaction=True)  # run_job tidies connections


@pytest.mark.parametrize(("handler", "status", "requested"), [
    ("noop", "completed", False),
    ("echo", "completed", False),  # a completion with a result: the finish's other path
    ("permanent", "dead", False),
    ("always_fails", "failed", True),
])
def test_the_finish_that_ends_a_job_clears_its_cancel_request(handler, status, requested):
    job = Job.enqueue(handler, {"n": 1})
    [claimed] = Job.objects.claim(worker_id="w", limit=1, lease_seconds=30)
    assert job.cancel() and job.cancel_requested  # asked while it runs
    [written] = Job.objects.finish([run_job(claimed)])  # the handler ended before it was read
    if not requested:  # the instance holds what the write set
        assert written.job.cancel_requested is False
    job.refresh_from_db()
    assert (job.status, job.cancel_requested) == (status, requested)
