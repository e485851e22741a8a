"""A crash is not an error: real worker processes killed by the job they run.

A worker that dies takes every job it held down with it; the rescue must give those jobs
their attempt back, run each alone, and quarantine the job that keeps killing its worker.
"""

import signal

import pytest

from django_jobs.models import Job, JobAttempt
from tests.conftest import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
S = Job.Status
OUT = JobAttempt.Outcome
FAST = ["--lease", "1.5", "--heartbeat", "0.2", "--poll-interval", "0.1"]
FINAL = (S.COMPLETED, S.DEAD, S.CANCELED)


def keep_workers_running(start_worker, jobs, *args, timeout=90.0):
    """Like a supervisor with Restart=always: start a worker for each one that died, until
    every job has ended. Returns the exit codes of the workers that ended."""
    workers, codes = [], []

    def all_ended():
        for worker in list(workers):
            code = worker.proc.poll()
            if code is not None:
                workers.remove(worker)
                codes.append(code)
        while len(workers) < 2:
            workers.append(start_worker("--concurrency", "4", *FAST, *args))
        return not Job.objects.filter(pk__in=[j.pk for j in jobs]).exclude(
            status__in=FINAL).exists()

    wait_for(all_ended, timeout=timeout, interval=0.2)
    return codes


# How the culprit kills its worker, and the exit status the process then has.
DEATHS = {"exit": 1, "sigkill": -signal.SIGKILL, "segfault": -signal.SIGSEGV}


@pytest.mark.parametrize("how", list(DEATHS))
def test_innocent_jobs_that_shared_a_crash_complete_and_the_culprit_is_quarantined(
    start_worker, how
):
    culprit = Job.enqueue("crash_exit", {"how": how, "after": 0.3})  # max_crashes=2
    innocents = [Job.enqueue("innocent", {"seconds": 2.0}) for _ in range(3)]  # max_attempts=1
    first = start_worker("--concurrency", "4", *FAST)  # claims all four in one batch
    # Killed by the culprit, the innocents still running, and died the way it was told to.
    assert first.wait(timeout=60) == DEATHS[how], first.output()
    shared = set(Job.objects.filter(status=S.PROCESSING).values_list("pk", flat=True))
    assert shared == {culprit.pk, *(j.pk for j in innocents)}

    codes = keep_workers_running(start_worker, [culprit, *innocents])
    for job in innocents:
        job.refresh_from_db()
        assert (job.status, job.attempt, job.crashes) == (S.COMPLETED, 2, 1), job.error
        assert job.max_attempts == 2  # the crash it shared did not spend its one attempt
        outcomes = list(job.attempts.values_list("outcome", flat=True))
        assert outcomes[0] == OUT.LOST and outcomes[-1] == OUT.COMPLETED
        assert set(outcomes[1:-1]) <= {OUT.RELEASED}  # handed back while a suspect ran alone
        lost = job.attempts.get(outcome=OUT.LOST)
        assert lost.error["type"] == "WorkerLost" and lost.error["details"]["alone"] is False
    culprit.refresh_from_db()
    assert (culprit.status, culprit.crashes, culprit.attempt) == (S.DEAD, 2, 2)
    assert culprit.error["type"] == "Quarantined"
    assert culprit.error["message"].startswith("killed its worker 2 times (max_crashes 2)")
    lost = list(culprit.attempts.filter(outcome=OUT.LOST).values_list("error", flat=True))
    assert [e["details"]["alone"] for e in lost] == [False, True]
    assert DEATHS[how] in codes  # the worker of the second crash died the same way
    assert all(code != 0 for code in codes)


def test_a_job_that_crashes_alone_goes_dead_only_after_max_crashes(start_worker):
    culprit = Job.enqueue("crash_exit", {"after": 0.05})  # max_attempts=1, max_crashes=2
    keep_workers_running(start_worker, [culprit])
    culprit.refresh_from_db()
    assert (culprit.status, culprit.crashes, culprit.attempt) == (S.DEAD, 2, 2)
    assert culprit.attempts.filter(outcome=OUT.LOST).count() == 2


@pytest.mark.django_db(transaction=True)
def test_a_suspect_runs_alone_and_its_batch_is_handed_back_unspent():
    """In process: a job that was in a crash never runs beside another job of its worker."""
    import threading
    import time

    from django_jobs.handlers.registry import handler, unregister
    from tests.helpers import run_burst

    runs, lock = [], threading.Lock()

    @handler("overlap_probe")
    def probe(payload):
        start = time.monotonic()
        time.sleep(0.05)
        with lock:
            runs.append((payload["n"], start, time.monotonic()))

    try:
        jobs = [Job.enqueue("overlap_probe", {"n": n}) for n in range(6)]
        suspect = jobs[2]
        Job.objects.filter(pk=suspect.pk).update(crashes=1)
        assert run_burst(concurrency=4) >= 6
    finally:
        unregister("overlap_probe")
    assert Job.objects.filter(pk__in=[j.pk for j in jobs], status=S.COMPLETED).count() == 6
    (_, start, end), = [run for run in runs if run[0] == 2]
    others = [run for run in runs if run[0] != 2]
    assert len(others) == 5
    assert all(other_end <= start or other_start >= end for _, other_start, other_end in others)
    suspect.refresh_from_db()
    assert suspect.attempt == 1  # handing the batch back spent nothing
    released = JobAttempt.objects.filter(outcome=OUT.RELEASED).values_list("job_id", flat=True)
    assert set(released) <= {j.pk for j in jobs} - {suspect.pk}
    assert all(job.refresh_from_db() or job.attempt == 1 for job in jobs)


@pytest.mark.django_db(transaction=True)
def test_a_queue_of_suspects_is_claimed_one_at_a_time_after_the_first_batch():
    """Each suspect runs alone; a worker that met one claims one job at a time until a claim
    brings none, so a queue of suspects (every job a dead worker held) is not claimed in
    batches that are handed back whole, one suspect fewer each time."""
    from tests.helpers import run_burst

    jobs = [Job.enqueue("noop") for _ in range(12)]
    Job.objects.filter(pk__in=[j.pk for j in jobs]).update(crashes=1)
    assert run_burst(concurrency=4) >= 12
    assert Job.objects.filter(pk__in=[j.pk for j in jobs], status=S.COMPLETED).count() == 12
    # the first claim took four (its free slots) and handed back three; no claim after it
    # took a batch to hand back
    assert JobAttempt.objects.filter(outcome=OUT.RELEASED).count() <= 3


@pytest.mark.django_db(transaction=True)
def test_admin_and_api_show_the_crashes(admin_client):
    from tests.api_support import Api, make_token

    job = Job.enqueue("echo")
    Job.objects.filter(pk=job.pk).update(crashes=2)
    page = admin_client.get(f"/admin/django_jobs/job/{job.pk}/change/").content.decode()
    assert "0 of 3, 2 crash(es) of its worker" in page
    detail = Api(make_token("read")).get(f"/api/jobs/{job.public_id}").json()
    assert detail["crashes"] == 2
    job.cancel()
    job.retry()  # a person's retry starts the count again
    assert Job.objects.get(pk=job.pk).crashes == 0
