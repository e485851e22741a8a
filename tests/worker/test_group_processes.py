"""A group run by several real ``runworker`` processes, one of them killed with SIGKILL in the
middle of the group: every job is counted once and the callback job runs exactly once."""

import signal

import pytest

from django_jobs import enqueue_group, group_jobs
from django_jobs.models import Job, JobAttempt, JobGroup
from tests.conftest import wait_for
from tests.models import Execution

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
FAST = ["--lease", "2", "--heartbeat", "0.3", "--poll-interval", "0.1", "--concurrency", "2"]
JOBS = 30


def test_a_group_calls_back_exactly_once_under_three_workers_and_a_kill_9(start_worker):
    group = enqueue_group(
        "under fire",
        [*[("record", {"sleep": 0.5, "n": n}) for n in range(JOBS - 2)],
         ("permanent", {}), ("echo", {}, {"delay": 3600})],
        callback="record", callback_payload={"callback": True})
    later = Job.objects.get(group_id=group.pk, type="echo")
    workers = [start_worker("--worker-id", f"w{i}", *FAST) for i in range(3)]
    # Mid-group: some jobs done, w0 holding one (it runs two at a time, 0.5 s each).
    wait_for(lambda: JobGroup.objects.get(pk=group.pk).completed >= 6
             and Job.objects.filter(group_id=group.pk, worker_id="w0",
                                    status="processing").exists(), timeout=60)
    workers[0].signal(signal.SIGKILL)
    assert workers[0].wait() == -signal.SIGKILL
    assert later.cancel()
    wait_for(lambda: JobGroup.objects.get(pk=group.pk).callback_job_id, timeout=90)
    counted = JobGroup.objects.get(pk=group.pk)
    callback = Job.objects.get(pk=counted.callback_job_id)
    wait_for(lambda: Job.objects.get(pk=callback.pk).status == "completed", timeout=60)
    for worker in workers[1:]:
        worker.signal(signal.SIGTERM)
        assert worker.wait() == 0
    # The killed worker's jobs were rescued and run again; each is counted once.
    assert JobAttempt.objects.filter(job__group_id=group.pk, outcome="lost").exists()
    assert (counted.total, counted.completed, counted.dead, counted.canceled) == (JOBS, JOBS - 2,
                                                                                1, 1)
    assert list(Job.objects.filter(payload__callback=True).values_list("pk", flat=True)) == [
        callback.pk]
    assert Execution.objects.filter(job_public_id=callback.public_id).count() == 1
    summary = Job.objects.get(pk=callback.pk).payload["group"]
    assert (summary["completed"], summary["dead"], summary["canceled"]) == (JOBS - 2, 1, 1)
    assert group_jobs(summary["id"], "completed").count() == JOBS - 2
    assert [job.pk for job in group_jobs(summary["id"], "canceled")] == [later.pk]
