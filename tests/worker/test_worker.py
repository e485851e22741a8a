"""The worker in-process: outcomes, retries, dead jobs, errors of every kind, signals, logs."""

import json
import logging
import threading

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connections
from django.test import override_settings

from django_jobs.core.log_format import JSONFormatter
from django_jobs.handlers.registry import handler, unregister
from django_jobs.models import Job, JobAttempt
from django_jobs.signals import job_finished, job_started
from tests.conftest import wait_for
from tests.helpers import run_burst, run_until_settled

pytestmark = pytest.mark.django_db(transaction=True)
S = Job.Status
OUT = JobAttempt.Outcome


def test_success_stores_result_and_one_completed_attempt():
    job = Job.enqueue("echo", {"a": 1})
    assert run_burst() == 1
    job.refresh_from_db()
    assert job.status == S.COMPLETED
    assert job.result == {"echo": {"a": 1}}
    assert job.error is None and job.leased_until is None
    assert job.started_at <= job.finished_at
    (attempt,) = job.attempts.all()
    assert (attempt.number, attempt.outcome) == (1, OUT.COMPLETED)
    assert attempt.cpu_time is not None and attempt.cpu_time >= 0
    assert attempt.peak_memory > 0
    assert attempt.worker_id == job.worker_id != ""


def test_async_handler_result_is_stored():
    job = Job.enqueue("async_echo", {"b": 2})
    run_burst()
    job.refresh_from_db()
    assert (job.status, job.result) == (S.COMPLETED, {"async": {"b": 2}})


def test_async_orm_queries_run_in_the_slots_own_thread_whose_connection_closes_with_it():
    """Not in asgiref's one thread for the whole process, whose connection nothing checks."""
    seen = []

    def where():
        seen.append((threading.current_thread(), connections["default"]))

    @handler("async_where")
    async def async_where(payload):
        await Job.objects.acount()
        await sync_to_async(where)()

    try:
        job = Job.enqueue("async_where")
        run_burst(concurrency=1)
    finally:
        unregister("async_where")
    job.refresh_from_db()
    assert job.status == S.COMPLETED
    ((thread, conn),) = seen
    assert thread.name == "django-jobs-0-queries"
    assert thread.daemon  # never holds up the process's exit, as the slot thread it serves
    wait_for(lambda: conn.connection is None and not thread.is_alive(), timeout=30)


def test_failures_retry_then_go_dead_with_every_attempt_recorded():
    job = run_until_settled(Job.enqueue("always_fails", {"n": 7}))
    assert job.status == S.DEAD and job.attempt == 3
    assert job.error["type"] == "RuntimeError"
    assert job.error["message"] == "boom 7"
    assert "Traceback" in job.error["traceback"] and "always_fails" in job.error["traceback"]
    outcomes = list(job.attempts.values_list("number", "outcome"))
    assert outcomes == [(1, OUT.FAILED), (2, OUT.FAILED), (3, OUT.DEAD)]
    assert all(a.error["message"] == "boom 7" for a in job.attempts.all())


def test_failed_job_waits_for_its_backoff(settings):
    settings.DJANGO_JOBS = {"BACKOFF_BASE": 60, "BACKOFF_CAP": 60}
    job = Job.enqueue("always_fails")
    run_burst()
    job.refresh_from_db()
    assert job.status == S.FAILED and job.attempt == 1
    assert job.run_at > job.updated_at
    assert run_burst() == 0  # not due yet


def test_flaky_job_is_retried_then_completes():
    job = run_until_settled(Job.enqueue("flaky", {"fail_times": 2}))
    assert (job.status, job.result, job.error) == (S.COMPLETED, {"succeeded_on": 3}, None)
    assert [a.outcome for a in job.attempts.all()] == [OUT.FAILED, OUT.FAILED, OUT.COMPLETED]


@pytest.mark.parametrize(("type", "error_type"), [
    ("permanent", "PermanentError"),
    ("listed_permanent", "Broken"),
    ("retry_only_fragile", "KeyError"),
])
def test_permanent_errors_go_dead_without_retry(type, error_type):
    job = Job.enqueue(type)
    run_burst()
    job.refresh_from_db()
    assert (job.status, job.attempt, job.error["type"]) == (S.DEAD, 1, error_type)


@pytest.mark.parametrize(("type", "error_type", "status"), [
    ("system_exit", "SystemExit", S.FAILED),
    ("keyboard_interrupt", "KeyboardInterrupt", S.FAILED),
    # a result no job can hold: permanent, since a rerun would repeat the work for nothing
    ("bad_result", "InvalidResult", S.DEAD),
])
def test_any_exception_fails_the_job_and_the_worker_carries_on(type, error_type, status, settings):
    settings.DJANGO_JOBS = {"BACKOFF_BASE": 60}
    bad = Job.enqueue(type)
    good = Job.enqueue("echo", {"after": type}, priority="low")
    assert run_burst(concurrency=1) == 2
    bad.refresh_from_db()
    good.refresh_from_db()
    assert bad.status == status and bad.error["type"] == error_type
    assert good.status == S.COMPLETED


@override_settings(DJANGO_JOBS={**settings.DJANGO_JOBS, "UNKNOWN_TYPE_GRACE": 0})
def test_job_without_a_handler_goes_dead_at_once_without_grace_and_the_worker_lives():
    @handler("ephemeral")
    def ephemeral(payload):
        return 1

    job = Job.enqueue("ephemeral")
    unregister("ephemeral")
    other = Job.enqueue("echo", priority="low")
    assert run_burst(concurrency=1) == 2
    job.refresh_from_db()
    assert job.status == S.DEAD and job.error["type"] == "UnknownJobType"
    assert "ephemeral" in job.error["message"]
    assert Job.objects.get(pk=other.pk).status == S.COMPLETED


@override_settings(DJANGO_JOBS={**settings.DJANGO_JOBS, "BACKOFF_BASE": 60})
def test_job_without_a_handler_waits_for_one_without_spending_its_attempt():
    @handler("ephemeral")
    def ephemeral(payload):
        return 1

    job = Job.enqueue("ephemeral", max_attempts=1)
    unregister("ephemeral")
    run_burst(concurrency=1)
    job.refresh_from_db()
    assert (job.status, job.attempt) == (S.PENDING, 0)
    assert job.run_at > job.updated_at  # backing off
    assert job.error["type"] == "UnknownJobType"
    assert "waiting for a worker that has one" in job.error["message"]
    assert job.error["details"]["tries"] == 1
    assert job.attempts.get().outcome == OUT.SNOOZED


def test_future_job_waits_until_due():
    job = Job.enqueue("echo", delay=3600)
    assert run_burst() == 0
    assert Job.objects.get(pk=job.pk).status == S.PENDING
    job.run_now()
    assert run_burst() == 1
    assert Job.objects.get(pk=job.pk).status == S.COMPLETED


def test_queues_option_limits_what_a_worker_takes():
    mail = Job.enqueue("echo", queue="emails")
    other = Job.enqueue("echo", queue="reports")
    assert run_burst(queues=["emails"]) == 1
    assert Job.objects.get(pk=mail.pk).status == S.COMPLETED
    assert Job.objects.get(pk=other.pk).status == S.PENDING


def test_paused_queue_is_skipped_until_resumed():
    from django_jobs.models import QueueState

    QueueState.objects.create(name="emails", paused=True)
    job = Job.enqueue("echo", queue="emails")
    assert run_burst() == 0
    QueueState.objects.filter(name="emails").update(paused=False)
    assert run_burst() == 1
    assert Job.objects.get(pk=job.pk).status == S.COMPLETED


def test_max_jobs_stops_after_that_many():
    Job.enqueue_many("noop", [{}] * 5)
    assert run_burst(max_jobs=3, concurrency=2) == 3
    assert Job.objects.filter(status=S.COMPLETED).count() == 3


def test_timeout_stops_a_job_and_counts_a_failed_attempt(settings):
    settings.DJANGO_JOBS = {"BACKOFF_BASE": 60}
    job = Job.enqueue("timeout_short")
    other = Job.enqueue("echo", priority="low")
    run_burst(concurrency=1)
    job.refresh_from_db()
    assert job.status == S.FAILED and job.error["type"] == "JobTimeout"
    assert Job.objects.get(pk=other.pk).status == S.COMPLETED


def test_started_and_finished_signals_are_sent():
    seen = []

    def started(sender, job, attempt, **kwargs):
        seen.append(("started", job.public_id, attempt))

    def finished(sender, job, outcome, **kwargs):
        seen.append(("finished", job.public_id, outcome))

    job_started.connect(started)
    job_finished.connect(finished)
    try:
        job = Job.enqueue("echo")
        run_burst()
    finally:
        job_started.disconnect(started)
        job_finished.disconnect(finished)
    assert seen == [("started", job.public_id, 1), ("finished", job.public_id, "completed")]


def test_log_lines_for_start_and_end_carry_job_fields(caplog):
    caplog.set_level(logging.DEBUG, logger="django_jobs")  # per job at DEBUG (worklog.py)
    job = Job.enqueue("echo")
    run_burst(worker_id="w-test")
    records = [r for r in caplog.records if getattr(r, "job_id", None) == job.public_id]
    assert [r.event for r in records] == ["job_started", "job_finished"]
    end = records[1]
    assert (end.worker_id, end.job_type, end.attempt, end.outcome) == (
        "w-test", "echo", 1, "completed")
    assert end.duration_ms >= 0
    line = json.loads(JSONFormatter().format(end))
    assert line["job_id"] == job.public_id and line["level"] == "debug"
    assert line["timestamp"].endswith("Z") and line["outcome"] == "completed"


def _end_line(caplog, job):
    """The worker's end line for ``job``, as its record and as the JSON formatter writes it."""
    [end] = [r for r in caplog.records
             if getattr(r, "job_id", None) == job.public_id and r.event == "job_finished"]
    return end, json.loads(JSONFormatter().format(end))


# A backoff longer than the burst: one attempt, one end line.
@override_settings(DJANGO_JOBS={**settings.DJANGO_JOBS, "BACKOFF_BASE": 60, "BACKOFF_CAP": 600})
def test_a_job_of_a_type_without_handler_logs_why_and_until_when_it_waits(caplog):
    caplog.set_level(logging.INFO, logger="django_jobs")
    job = Job.objects.create(type="not_in_this_worker")
    run_burst()
    end, line = _end_line(caplog, job)
    assert end.outcome == "snoozed" and end.attempt == 1  # the attempt that ran
    assert end.reason == "no handler for type 'not_in_this_worker' in this worker"
    assert end.next.startswith("waiting for a worker that has it until ")
    assert " UTC; tried again at " in end.next
    message = end.getMessage()
    assert "attempt 1" in message and end.reason in message and end.next in message
    assert (line["reason"], line["next"]) == (end.reason, end.next)


# A backoff longer than the burst: one attempt, one end line.
@override_settings(DJANGO_JOBS={**settings.DJANGO_JOBS, "BACKOFF_BASE": 60, "BACKOFF_CAP": 600})
def test_a_failure_that_is_retried_logs_the_error_and_when_it_runs_again(caplog):
    caplog.set_level(logging.INFO, logger="django_jobs")
    job = Job.enqueue("always_fails")
    run_burst()
    end, line = _end_line(caplog, job)
    assert end.outcome == "failed"
    assert end.reason == "RuntimeError: boom"
    assert end.next.startswith("retried at ") and end.next.endswith("(attempt 2 of 3)")
    assert end.reason in end.getMessage() and end.next in end.getMessage()
    assert (line["reason"], line["next"]) == (end.reason, end.next)


def test_a_permanent_failure_logs_that_the_job_is_dead(caplog):
    caplog.set_level(logging.INFO, logger="django_jobs")
    job = Job.enqueue("permanent")
    run_burst()
    end, line = _end_line(caplog, job)
    assert end.outcome == "dead"
    assert "cannot ever work" in end.reason
    assert end.next == "dead: the error is not retried"
    assert line["next"] == end.next and end.next in end.getMessage()


def test_a_rescued_job_logs_why_and_what_happens_next(caplog):
    from datetime import timedelta

    from django.utils import timezone

    caplog.set_level(logging.INFO, logger="django_jobs")
    job = Job.enqueue("echo", queue="held")
    Job.objects.claim(worker_id="gone", limit=1, lease_seconds=30, queues=["held"])
    Job.objects.filter(pk=job.pk).update(leased_until=timezone.now() - timedelta(minutes=5))
    run_burst(worker_id="rescuer", queues=["other"])
    [line] = [r for r in caplog.records if getattr(r, "event", None) == "job_rescued"]
    assert line.job_id == job.public_id
    assert line.reason == "the lease of worker gone ran out"
    assert line.next.startswith(("pending, runs again at ", "failed, runs again at "))
    assert "its lease ran out; " + line.next in line.getMessage()
    assert json.loads(JSONFormatter().format(line))["next"] == line.next


def test_a_real_worker_says_why_it_leaves_a_job_of_a_type_it_has_no_handler_for(start_worker):
    job = Job.objects.create(type="not_in_this_worker")
    # A backoff longer than the burst: the job is handed back once, and has one line.
    worker = start_worker("--burst", env={
        "DJANGO_JOBS_TEST_EXTRA": '{"BACKOFF_BASE": 60.0, "BACKOFF_CAP": 600.0}'})
    assert worker.wait(timeout=120) == 0, worker.output()
    [line] = [text for text in worker.output().splitlines() if job.public_id in text]
    assert "WARNING" in line and "job snoozed:" in line and "attempt 1 " in line, line
    assert ("no handler for type 'not_in_this_worker' in this worker; waiting for a worker "
            "that has it until ") in line, line
    assert " UTC; tried again at " in line and line.endswith(" UTC"), line


def test_a_job_whose_lease_is_lost_logs_why_and_what_happens_next(caplog):
    import uuid

    caplog.set_level(logging.INFO, logger="django_jobs")
    job = Job.enqueue("slow", {"seconds": 1.5})

    def take_over():
        wait_for(lambda: Job.objects.filter(pk=job.pk, status=S.PROCESSING).exists())
        Job.objects.filter(pk=job.pk).update(lease_token=uuid.uuid4())  # another worker's now
        connections.close_all()

    thief = threading.Thread(target=take_over)
    thief.start()
    run_burst(heartbeat_seconds=0.1)
    thief.join()
    lines = [r for r in caplog.records if getattr(r, "event", None) == "lease_lost"]
    assert lines
    line = lines[0]
    assert line.reason == "the job is no longer held under this worker's lease"
    assert line.next == "its handler runs on here, and its outcome is not written"
    assert line.reason in line.getMessage() and line.next in line.getMessage()
    assert json.loads(JSONFormatter().format(line))["reason"] == line.reason
