"""How many jobs a worker claims at once (claimsize.py), what becomes of claimed jobs that wait,
and the worker's default log lines."""

import logging
import os
import signal
import time
from collections import Counter

import pytest

from django_jobs.core.outcomes import AttemptOutcome
from django_jobs.handlers.registry import handler, unregister
from django_jobs.models import Job, JobAttempt
from django_jobs.signals import job_started
from django_jobs.worker.producer import ClaimSize
from tests.conftest import wait_for
from tests.helpers import run_burst

pytestmark = pytest.mark.django_db(transaction=True)


def claims_of(run) -> Counter:  # type: ignore[no-untyped-def]
    """Run ``run()``; count the jobs each claim gave (one lease token per claim)."""
    tokens: Counter = Counter()

    def started(sender, job, attempt, **kwargs):
        tokens[job.lease_token] += 1

    job_started.connect(started)
    try:
        run()
    finally:
        job_started.disconnect(started)
    return tokens


@pytest.fixture
def sleepy():
    """Handlers that sleep: ``sleepy`` for payload["s"] seconds, ``stopper`` signals first."""

    @handler("sleepy")
    def sleep(payload):
        time.sleep(payload["s"])

    @handler("stopper")
    def stop(payload):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(payload["s"])

    @handler("overstays", timeout=0.1)
    def overstays(payload):
        for _ in range(40):  # 2 s in short sleeps: a timeout interrupts it between two
            time.sleep(0.05)

    yield
    for name in ("sleepy", "stopper", "overstays"):
        unregister(name)


def test_a_default_worker_claims_quick_jobs_many_at_a_time():
    jobs = Job.enqueue_many("echo", [{"n": n} for n in range(60)])
    claims = claims_of(lambda: run_burst(concurrency=1))
    assert sum(claims.values()) == 60
    assert len(claims) < 60 and max(claims.values()) > 1
    statuses = Job.objects.filter(pk__in=[j.pk for j in jobs]).values_list("status", "attempt")
    assert set(statuses) == {("completed", 1)}


def test_prefetch_zero_claims_only_the_free_slots():
    Job.enqueue_many("echo", [{"n": n} for n in range(8)])
    claims = claims_of(lambda: run_burst(concurrency=1, prefetch=0))
    assert sorted(claims.values()) == [1] * 8


def test_jobs_slower_than_the_horizon_are_claimed_one_per_slot(sleepy):
    Job.enqueue_many("sleepy", [{"s": 0.2}] * 3)
    claims = claims_of(lambda: run_burst(concurrency=1))
    assert sorted(claims.values()) == [1, 1, 1]


def test_the_claim_size_follows_the_durations_and_its_bounds():
    def outcomes(micros: int, count: int) -> list[AttemptOutcome]:
        return [AttemptOutcome(Job(), "completed", 0, micros) for _ in range(count)]

    size = ClaimSize(concurrency=2, horizon=0.05, most=100)
    assert size.limit(held=0) == 2  # no duration known: the free slots only
    size.observe([])
    assert size.limit(held=1) == 1
    size.observe(outcomes(2000, 4))  # 2 ms each: two threads start 50 in 50 ms
    assert size.prefetch() == 50 and size.limit(held=10) == 42
    size.observe(outcomes(10, 4))  # the average halves toward 10 us: capped at ``most``
    assert size.prefetch() == 98 and size.limit(held=0) == 100
    size.observe(outcomes(10_000_000, 1))  # a 10 s job: no prefetch
    assert size.prefetch() == 0 and size.limit(held=2) == 0
    size.observe(outcomes(10, 1))
    size.forget()  # after a hand-back: free slots only until the next outcome
    assert size.prefetch() == 0


def test_claimed_jobs_behind_a_slow_job_go_back_to_the_queue_unspent(sleepy):
    Job.enqueue("echo", priority="high")  # its duration: quick, so a prefetch follows
    slow = Job.enqueue("sleepy", {"s": 1.5})
    quick = Job.enqueue_many("echo", [{"n": n} for n in range(5)])
    run_burst(concurrency=1, prefetch=5.0)
    assert Job.objects.get(pk=slow.pk).status == "completed"
    for job in quick:
        job.refresh_from_db()
        assert (job.status, job.attempt) == ("completed", 1)
        outcomes = list(JobAttempt.objects.filter(job=job).order_by("id")
                        .values_list("outcome", "number"))
        assert outcomes == [("released", 1), ("completed", 1)]


def test_a_stopping_worker_hands_back_the_jobs_it_has_not_started(sleepy):
    Job.enqueue("echo", priority="high")
    stopper = Job.enqueue("stopper", {"s": 1.0})
    waiting = Job.enqueue_many("echo", [{"n": n} for n in range(3)])
    run_burst(concurrency=1, prefetch=5.0)
    assert Job.objects.get(pk=stopper.pk).status == "completed"
    for job in waiting:
        job.refresh_from_db()
        assert (job.status, job.attempt) == ("pending", 0)
        assert list(JobAttempt.objects.filter(job=job).values_list("outcome", flat=True)) == [
            "released"]


def test_a_timeout_counts_from_the_start_not_the_claim(sleepy):
    """The job waits behind a slow one longer than its timeout; it is still interrupted a
    timeout after it starts, not left to run because its deadline passed while it waited."""
    Job.enqueue("echo", priority="high")
    Job.enqueue("sleepy", {"s": 0.25})
    job = Job.enqueue("overstays")
    run_burst(concurrency=1, prefetch=5.0)
    job.refresh_from_db()
    assert job.status in ("pending", "failed") and job.error["type"] == "JobTimeout"
    assert "abandoned" not in job.error["message"]


def test_default_logging_summarises_completed_jobs_and_names_each_failure(caplog):
    caplog.set_level(logging.INFO, logger="django_jobs")
    Job.enqueue_many("echo", [{"n": n} for n in range(3)])
    failing = Job.enqueue("always_fails")
    run_burst(worker_id="w-log")
    per_job = [r for r in caplog.records if getattr(r, "job_id", None)]
    assert per_job  # its retry may come due in the same burst: a line per failed attempt
    assert {(r.job_id, r.levelname, r.outcome) for r in per_job} == {
        (failing.public_id, "WARNING", "failed")}
    summaries = [r for r in caplog.records if getattr(r, "event", None) == "jobs_summary"]
    assert sum(r.jobs for r in summaries) == 3 + len(per_job)
    assert sum(r.outcomes.get("completed", 0) for r in summaries) == 3
    assert all(r.levelname == "INFO" and r.worker_id == "w-log" for r in summaries)


def test_runworker_prints_the_summary_and_at_v2_a_line_per_job(start_worker):
    Job.enqueue_many("echo", [{"n": n} for n in range(3)])
    default = start_worker("--burst", "--poll-interval", "0.05")
    assert default.wait() == 0
    out = default.output()
    assert "3 job(s) finished" in out and "3 completed" in out
    assert "job completed:" not in out and "job started:" not in out
    Job.enqueue("echo")
    verbose = start_worker("--burst", "--poll-interval", "0.05", "-v", "2")
    assert verbose.wait() == 0
    out = wait_for(verbose.output)
    assert "job started:" in out and "job completed:" in out
