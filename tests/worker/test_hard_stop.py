"""The hard stop: a handler with ``isolation="process"`` runs each job in a child process of its
own, which a real ``runworker`` ends when the handler is still running ``KILL_GRACE`` seconds
after its timeout or its job's cancel (django_jobs/worker/process_isolation.py)."""

import json
import os
import signal
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from django_jobs import handler
from django_jobs.checks.configuration import check_settings
from django_jobs.models import Job, JobAttempt
from tests.conftest import wait_for


def real_process(test):
    """The marks of a test that starts a real worker (the others check options and settings)."""
    return pytest.mark.slow(pytest.mark.django_db(transaction=True)(test))


KILL_GRACE = 1.0
WORKER_ENV = {"DJANGO_JOBS_TEST_EXTRA": json.dumps({"KILL_GRACE": KILL_GRACE})}
# Beyond the timeout and the grace: the SIGTERM's wait, the outcome's write, a loaded machine.
MARGIN = 8.0


def marks(path):
    """The pids of the runs of a handler, one per line of the file it appends to."""
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def gone(pid):
    """The process has ended (a zombie not yet reaped by its new parent has ended too)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


@real_process
@pytest.mark.parametrize("type", ["isolated_socket_read", "isolated_regex"])
def test_a_handler_stuck_in_c_code_is_ended_after_the_grace_and_counted_timed_out(
    start_worker, tmp_path, type
):
    """A socket read that goes back to reading when stopped (the GIL released) and a
    catastrophic regex (the GIL held) ignore the JobTimeout raised at their timeout (0.5 s):
    KILL_GRACE later their process is ended, the one attempt is spent (the job is dead, not
    run again), and the worker runs other jobs meanwhile and after."""
    path = tmp_path / "marks"
    stuck = Job.enqueue(type, {"marks": str(path)})
    worker = start_worker("--concurrency", "2", env=WORKER_ENV)
    wait_for(lambda: marks(path), timeout=60)
    meanwhile = Job.enqueue("echo", {"n": 1})
    wait_for(lambda: Job.objects.get(pk=stuck.pk).status == "dead",
             timeout=0.5 + KILL_GRACE + MARGIN)
    wait_for(lambda: Job.objects.get(pk=meanwhile.pk).status == "completed", timeout=30)
    after = Job.enqueue("echo", {"n": 2})
    wait_for(lambda: Job.objects.get(pk=after.pk).status == "completed", timeout=30)
    assert worker.proc.poll() is None
    worker.stop()
    attempt = JobAttempt.objects.get(job=stuck)
    assert attempt.outcome == "dead" and attempt.error["type"] == "JobTimeout"
    assert "its process was ended" in attempt.error["message"]
    [pid] = marks(path)  # it ran once, in a process of its own, now gone
    assert pid != worker.proc.pid and gone(pid)


@real_process
def test_a_handler_that_lets_the_timeout_stop_it_ends_at_its_timeout(start_worker):
    """A socket read interrupted by the JobTimeout the child raises at the timeout: the
    handler stops by itself, with the usual timeout error, and no kill."""
    job = Job.enqueue("isolated_polite")
    worker = start_worker(env=WORKER_ENV)
    wait_for(lambda: Job.objects.get(pk=job.pk).status == "dead", timeout=60)
    worker.stop()
    attempt = JobAttempt.objects.get(job=job)
    assert attempt.error["type"] == "JobTimeout"
    assert "process was ended" not in attempt.error["message"]


@real_process
def test_a_canceled_handler_stuck_in_c_code_is_ended_after_the_grace(start_worker, tmp_path):
    path = tmp_path / "marks"
    job = Job.enqueue("isolated_cancelable", {"marks": str(path)})
    worker = start_worker("--heartbeat", "0.2", "--lease", "5", env=WORKER_ENV)
    wait_for(lambda: marks(path), timeout=60)
    assert Job.objects.get(pk=job.pk).cancel()
    wait_for(lambda: Job.objects.get(pk=job.pk).status == "canceled",
             timeout=0.2 + KILL_GRACE + MARGIN)
    worker.stop()
    attempt = JobAttempt.objects.get(job=job)
    assert attempt.outcome == "canceled"
    assert "its process was ended" in attempt.error["message"]
    [pid] = marks(path)
    assert gone(pid)


@real_process
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal")
def test_a_child_dies_with_its_worker(start_worker, tmp_path):
    """A worker killed with SIGKILL leaves no handler running: its child is ended with it, and
    the job is the lost worker's, rescued by the lease as any other."""
    path = tmp_path / "marks"
    Job.enqueue("isolated_cancelable", {"marks": str(path)})
    worker = start_worker(env=WORKER_ENV)
    wait_for(lambda: marks(path), timeout=60)
    [pid] = marks(path)
    assert not gone(pid)
    worker.signal(signal.SIGKILL)
    worker.wait()
    wait_for(lambda: gone(pid), timeout=10)


@real_process
def test_results_errors_and_the_orm_round_trip_through_the_child(start_worker):
    """The result comes back as JSON; the child sees its job through current_job(), reads
    through the ORM and writes progress; an error comes back as its own class, with the
    child's traceback, and is classified as in a thread (retried, dead if permanent, snoozed);
    a child that dies without a word fails its attempt."""
    done = Job.enqueue("isolated_result", {"x": [1, "a", None]})
    awaited = Job.enqueue("isolated_async", {"n": 5})
    failing = Job.enqueue("isolated_raises", {"n": 1})
    permanent = Job.enqueue("isolated_raises", {"n": 2, "permanent": True})
    snoozed = Job.enqueue("isolated_raises", {"n": 3, "snooze": True})
    exits = Job.enqueue("isolated_raises", {"n": 4, "exit": True})
    worker = start_worker("--concurrency", "2")
    wait_for(lambda: Job.objects.get(pk=done.pk).status == "completed", timeout=60)
    wait_for(lambda: Job.objects.get(pk=permanent.pk).status == "dead", timeout=60)
    wait_for(lambda: Job.objects.get(pk=awaited.pk).status == "completed", timeout=60)
    wait_for(lambda: JobAttempt.objects.filter(job=failing).exists(), timeout=60)
    wait_for(lambda: JobAttempt.objects.filter(job=snoozed).exists(), timeout=60)
    wait_for(lambda: JobAttempt.objects.filter(job=exits).exists(), timeout=60)
    worker.stop()
    done.refresh_from_db()
    assert done.result["payload"] == {"x": [1, "a", None]}
    assert done.result["job"] == done.public_id and done.result["status"] == "processing"
    assert done.result["pid"] != worker.proc.pid
    assert done.progress_fraction == 0.5
    assert Job.objects.get(pk=awaited.pk).result == {"async": 5}
    first = JobAttempt.objects.filter(job=failing).order_by("number").first()
    assert first.outcome == "failed" and first.error["type"] == "ValueError"
    assert "went wrong in" in first.error["message"]
    assert "isolated_raises" in first.error["traceback"]  # the child's own frames
    dead = JobAttempt.objects.get(job=permanent)
    assert dead.outcome == "dead" and dead.error["type"] == "PermanentError"
    assert dead.error["message"] == "bad input 2"
    snoozed.refresh_from_db()  # Snooze(3600), rebuilt without its __init__: run later, unspent
    assert [a.outcome for a in JobAttempt.objects.filter(job=snoozed)] == ["snoozed"]
    assert snoozed.status == "pending" and snoozed.attempt == 0
    died = JobAttempt.objects.filter(job=exits).order_by("number").first()
    assert died.outcome == "failed" and died.error["type"] == "HandlerProcessDied"
    assert "exit status 3" in died.error["message"]


def test_an_unknown_isolation_is_refused_at_registration():
    with pytest.raises(ImproperlyConfigured, match="isolation for 'isolated_bad'"):
        handler("isolated_bad", isolation="thread")(lambda payload: None)


@pytest.mark.parametrize("value", ["10", -1, True, None])
def test_a_bad_kill_grace_is_refused_by_the_system_check(value):
    with override_settings(DJANGO_JOBS={"KILL_GRACE": value}):
        assert [e.id for e in check_settings()] == ["django_jobs.E008"]
    for fine in (0, 10, 0.5):
        with override_settings(DJANGO_JOBS={"KILL_GRACE": fine}):
            assert check_settings() == []


@pytest.mark.django_db
def test_run_jobs_runs_an_isolated_handler_in_the_tests_own_thread_and_data():
    """``django_jobs.testing.run_jobs`` runs the handler here, inside the test's transaction
    (a child process would not see the job's row)."""
    from django_jobs.testing import run_jobs

    job = Job.enqueue("isolated_result", {"x": 1})
    [done] = run_jobs()
    assert done.pk == job.pk and done.status == "completed"
    assert done.result["pid"] == os.getpid() and done.result["status"] == "processing"
