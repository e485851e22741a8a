"""Real ``runworker`` processes at the edges: stray threads, SIGHUP."""

import signal

import pytest

from django_jobs.models import Job, Worker
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
