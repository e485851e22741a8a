"""``async def`` handlers in real ``runworker`` subprocesses: snooze, progress, follow-ups, a
cancel and a timeout that unwind the handler from its ``await``. The sync handlers' versions,
and the async twins of the timeout and stop tests, are in tests/features/test_control.py,
tests/worker/test_timeouts.py and tests/worker/test_processes.py."""

import signal
from pathlib import Path

import pytest

from django_jobs.models import Job
from tests.conftest import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
FAST = ["--heartbeat", "0.2", "--lease", "5", "--poll-interval", "0.1"]


def status(job):
    return Job.objects.values_list("status", flat=True).get(pk=job.pk)


def test_snooze_progress_and_follow_ups_in_a_real_worker(start_worker):
    snoozer = Job.enqueue("async_snoozer", {"times": 2})
    progressing = Job.enqueue("async_progressing", {"fraction": 0.75, "message": "most"})
    followed = Job.enqueue("async_with_followup", {"then": "async_echo"})
    failing = Job.enqueue("async_with_followup", {"fail": True})
    chained = Job.enqueue("async_echo", {"n": 2}, depends_on=[followed])
    worker = start_worker("--concurrency", "2", *FAST)
    finished = [snoozer, progressing, followed, failing, chained]
    wait_for(lambda: all(status(job) in ("completed", "dead") for job in finished), timeout=60)
    follow_up = wait_for(lambda: Job.objects.filter(payload__after=followed.public_id).first())
    wait_for(lambda: status(follow_up) == "completed", timeout=60)
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()
    for job in finished:
        job.refresh_from_db()
    assert snoozer.status == "completed" and snoozer.result == {"snoozed": 2, "attempt": 1}
    assert list(snoozer.attempts.values_list("outcome", flat=True)) == [
        "snoozed", "snoozed", "completed"]
    assert progressing.result == {"recorded": [True, True]}
    assert progressing.progress == {"fraction": 0.75, "message": "most"}
    assert followed.status == "completed" and follow_up.type == "async_echo"
    assert failing.status == "dead"
    assert not Job.objects.filter(payload__after=failing.public_id).exists()
    assert chained.status == "completed" and chained.started_at >= followed.finished_at


@pytest.mark.parametrize("how", ["cancel", "timeout"])
def test_a_cancel_or_timeout_unwinds_an_async_handler_from_its_await(start_worker, tmp_path, how):
    """The handler's ``finally`` runs (it writes ``<marker>.finally``), the attempt ends with
    JobCanceled or JobTimeout, and the worker goes on to the next job."""
    marker = tmp_path / "started"
    if how == "cancel":
        job = Job.enqueue("async_slow", {"seconds": 60, "marker": str(marker)})
    else:
        job = Job.enqueue("async_timeout_short")
    worker = start_worker("--concurrency", "1", *FAST)
    if how == "cancel":
        wait_for(marker.exists, timeout=60)
        assert job.cancel()  # a cancel request: the job is running
    wait_for(lambda: status(job) in ("canceled", "dead"), timeout=60)
    after = Job.enqueue("async_echo", {"n": 1})
    wait_for(lambda: status(after) == "completed", timeout=30)
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()
    job.refresh_from_db()
    attempt = job.attempts.order_by("number").last()
    if how == "cancel":
        assert (job.status, attempt.outcome, attempt.error["type"]) == (
            "canceled", "canceled", "JobCanceled")
        assert Path(f"{marker}.finally").read_text() == "1"
    else:
        assert [a.error["type"] for a in job.attempts.all()] == ["JobTimeout", "JobTimeout"]
        assert job.status == "dead"
    # Stopped by the cancel, not abandoned after the grace as a handler that ignored it.
    assert not any("abandoned" in a.error["message"] for a in job.attempts.all())
