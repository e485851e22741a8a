"""Real ``runworker`` processes at the edges: stray threads, SIGHUP."""

import signal

import pytest

from django_jobs.models import Job, Worker
from tests.api_support import Api, make_token
from tests.conftest import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
S = Job.Status
FAST = ["--lease", "2", "--heartbeat", "0.3", "--poll-interval", "0.1"]


def test_burst_exits_although_a_handler_left_a_non_daemon_thread_running(start_worker):
    stray = Job.enqueue("stray_thread")
    after = Job.enqueue("echo", {"n": 1}, priority="low")
    worker = start_worker("--burst", "--concurrency", "2", *FAST)
    assert worker.wait(timeout=60) == 0, worker.output()
    stray.refresh_from_db()
    after.refresh_from_db()
    assert (stray.status, stray.result) == (S.COMPLETED, {"left": "a thread"})
    assert after.status == S.COMPLETED
    output = worker.output()
    assert "worker finished: 2 job(s) run" in output
    assert "leaving 1 thread(s) that handlers started and did not stop: stray" in output


def test_sighup_drains_like_sigterm(start_worker, tmp_path):
    marker = tmp_path / "started"
    job = Job.enqueue("slow", {"seconds": 1.0, "marker": str(marker)})
    waiting = Job.enqueue("echo", delay=0.5)
    worker = start_worker("--worker-id", "hungup", "--shutdown-timeout", "30", *FAST)
    wait_for(marker.exists)
    worker.signal(signal.SIGHUP)
    assert worker.wait() == 0, worker.output()
    assert Job.objects.get(pk=job.pk).status == S.COMPLETED  # the running job finished
    assert Job.objects.get(pk=waiting.pk).status == S.PENDING  # and nothing new was claimed
    assert not Worker.objects.filter(pk="hungup").exists()
    assert "stopping" in worker.output()


OLD_WORKER = {"DJANGO_JOBS_TEST_OLD_WORKER": "1"}


def test_rolling_deploy_a_type_the_worker_does_not_know_waits_for_one_that_does(
    start_worker, admin_client
):
    job = Job.enqueue("newly_deployed", max_attempts=1)
    old = start_worker("--burst", "--worker-id", "old-code", *FAST, env={
        **OLD_WORKER, "DJANGO_JOBS_TEST_EXTRA": '{"BACKOFF_BASE": 60}'})
    assert old.wait() == 0, old.output()
    job.refresh_from_db()
    assert (job.status, job.attempt, job.max_attempts) == (S.PENDING, 0, 1)
    assert job.error["type"] == "UnknownJobType"
    why = "no handler is registered for job type 'newly_deployed' on worker 'old-code'"
    assert why in job.error["message"] and "waiting for a worker" in job.error["message"]

    token = make_token("read")
    detail = Api(token).get(f"/api/jobs/{job.public_id}").json()
    assert (detail["status"], detail["error"]["type"]) == ("pending", "UnknownJobType")
    assert why in detail["error"]["message"]
    page = admin_client.get(f"/admin/django_jobs/job/{job.pk}/change/")
    assert why.replace("'", "&#x27;") in page.content.decode()

    job.run_now()
    new = start_worker("--burst", "--worker-id", "new-code", *FAST)
    assert new.wait() == 0, new.output()
    job.refresh_from_db()
    assert (job.status, job.attempt, job.result) == (S.COMPLETED, 1, {"ran": True})


def test_rolling_deploy_a_type_no_worker_learns_goes_dead_after_the_grace(start_worker):
    job = Job.enqueue("newly_deployed", max_attempts=1)
    old = start_worker(*FAST, env={
        **OLD_WORKER, "DJANGO_JOBS_TEST_EXTRA": '{"UNKNOWN_TYPE_GRACE": 0.5}'})
    wait_for(lambda: Job.objects.filter(pk=job.pk, status=S.DEAD).exists())
    old.signal(signal.SIGTERM)
    assert old.wait() == 0, old.output()
    job.refresh_from_db()
    assert (job.status, job.attempt) == (S.DEAD, 1)
    assert job.error["type"] == "UnknownJobType"
    assert "no worker ran it in" in job.error["message"]
    outcomes = list(job.attempts.values_list("outcome", flat=True))
    assert outcomes[-1] == "dead" and set(outcomes[:-1]) == {"snoozed"} and len(outcomes) > 1
