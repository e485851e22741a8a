"""A stop never lets a job run twice at once, and children a handler forks are its own.

Real ``runworker`` processes and real signals: a job whose handler outlives the stop is handed
back only as its process ends, before any exit hook runs; a child a handler forks has the
default dispositions of the stop signals, not the worker's handlers.
"""

import os
import signal

import pytest

from django_jobs.models import Job
from tests.conftest import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
S = Job.Status
FAST = ["--lease", "2", "--heartbeat", "0.3", "--poll-interval", "0.1"]


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_fork_pool_that_a_handler_terminates_leaves_no_child(start_worker):
    job = Job.enqueue("fork_pool")
    worker = start_worker(*FAST)
    wait_for(lambda: Job.objects.get(pk=job.pk).status == S.COMPLETED, timeout=40)
    job.refresh_from_db()
    pids = job.result["pids"]
    assert len(pids) == 2 and worker.proc.pid not in pids
    wait_for(lambda: not any(alive(pid) for pid in pids), timeout=10)
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()


def test_a_child_forked_by_a_handler_has_the_default_stop_dispositions(start_worker):
    job = Job.enqueue("fork_dispositions")
    worker = start_worker("--burst", *FAST)
    assert worker.wait() == 0, worker.output()
    job.refresh_from_db()
    assert job.status == S.COMPLETED, job.error
    assert job.result == {"SIGTERM": "SIG_DFL", "SIGINT": "default_int_handler",
                          "SIGHUP": "SIG_DFL"}
