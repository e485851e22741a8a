"""Handler timeouts, with real ``runworker`` subprocesses, for sync and ``async def`` handlers
(an async handler's task is cancelled at its timeout: worker/async_jobs.py)."""

import pytest

from django_jobs.models import Job, JobAttempt
from tests.conftest import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.mark.parametrize("type", ["timeout_short", "async_timeout_short"])
def test_a_job_past_its_timeout_is_stopped_counted_failed_and_retried(start_worker, type):
    """``timeout_short`` (0.3 s, 2 attempts) loops for 10 s, ``async_timeout_short`` awaits
    for 10 s: each attempt is stopped with JobTimeout, the first is retried, the second buries
    the job, and the worker carries on."""
    job = Job.enqueue(type)
    worker = start_worker("--concurrency", "2")
    wait_for(lambda: Job.objects.get(pk=job.pk).status == "dead", timeout=60)
    after = Job.enqueue("echo", {"still": "working"})
    wait_for(lambda: Job.objects.get(pk=after.pk).status == "completed", timeout=30)
    worker.stop()
    job.refresh_from_db()
    attempts = list(JobAttempt.objects.filter(job=job).order_by("number"))
    assert [a.outcome for a in attempts] == ["failed", "dead"]
    assert all(a.error["type"] == "JobTimeout" for a in attempts)
    assert "timeout" in attempts[0].error["message"]
    assert job.attempt == 2 and job.error["type"] == "JobTimeout"


@pytest.mark.parametrize("type", ["timeout_blocking", "async_timeout_blocking"])
def test_a_handler_blocked_in_c_code_is_abandoned_after_the_grace_and_the_worker_goes_on(
    start_worker, type
):
    """``time.sleep(60)`` (in a sync handler, or blocking an async one's event loop) never
    sees the injected exception or the cancel: after the grace period the worker records a
    timeout failure, replaces the thread and runs the next job."""
    stuck = Job.enqueue(type)
    worker = start_worker("--concurrency", "1")
    wait_for(lambda: Job.objects.get(pk=stuck.pk).status == "dead", timeout=60)
    after = Job.enqueue("echo", {"n": 1})
    wait_for(lambda: Job.objects.get(pk=after.pk).status == "completed", timeout=30)
    worker.stop()
    attempt = JobAttempt.objects.get(job=stuck)
    assert attempt.outcome == "dead"
    assert attempt.error["type"] == "JobTimeout"
    assert "abandoned" in attempt.error["message"]


