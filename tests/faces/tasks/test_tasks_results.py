"""TaskResult built faithfully from Job rows: status mapping, attempts, errors, timestamps.

Rows are moved through their states with the real write path (claim, finish, rescue, release,
retry, cancel), as a worker or the admin would.
"""

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from django_jobs.core.outcomes import AttemptOutcome
from django_jobs.core.stored_errors import error_dict
from django_jobs.models import Job, JobAttempt
from tests.helpers import claim

pytestmark = [
    pytest.mark.skipif(
        not settings.HAS_TASKS_FRAMEWORK, reason="needs django.tasks or the django-tasks backport"
    ),
    pytest.mark.django_db,
]

if settings.HAS_TASKS_FRAMEWORK:
    from django_jobs.backends.compat import TaskResultStatus, default_task_backend
    from django_jobs.exceptions import WorkerLost
    from tests import tasks as test_tasks


def finish(job, kind, **fields):
    now = timezone.now()
    [written] = Job.objects.finish([AttemptOutcome(
        job=job, kind=kind, started_at=job.started_at, finished_at=now, **fields
    )])
    return written


def get(result):
    return default_task_backend.get_result(result.id)


def test_pending_reads_as_ready():
    result = test_tasks.noop_task.enqueue()
    assert get(result).status == TaskResultStatus.READY


def test_processing_reads_as_running_with_the_current_attempt_counted():
    result = test_tasks.noop_task.enqueue()
    [job] = claim(1, worker_id="w-1")
    running = get(result)
    assert running.status == TaskResultStatus.RUNNING
    assert running.worker_ids == ["w-1"]
    assert running.attempts == 1
    assert running.started_at == running.last_attempted_at == job.started_at
    assert running.finished_at is None
    with pytest.raises(ValueError, match="not finished"):
        running.return_value  # noqa: B018


def test_completed_reads_as_successful_with_the_stored_result():
    result = test_tasks.calculate_meaning_of_life.enqueue()
    [job] = claim(1, worker_id="w-1")
    finish(job, "completed", result=42)
    done = get(result)
    assert done.status == TaskResultStatus.SUCCESSFUL
    assert done.return_value == 42
    assert done.finished_at == Job.objects.get(pk=job.pk).finished_at
    assert done.errors == []


def test_a_failed_attempt_reads_as_ready_and_a_dead_job_as_failed():
    result = test_tasks.failing_task_value_error.enqueue()
    Job.objects.filter(public_id=result.id).update(max_attempts=2)
    [job] = claim(1, worker_id="w-1")
    finish(job, "failed", error=error_dict(ValueError("first")))
    after_one = get(result)
    assert after_one.status == TaskResultStatus.READY
    assert after_one.finished_at is None
    assert after_one.attempts == 1

    Job.objects.filter(public_id=result.id).run_now()
    [job] = claim(1, worker_id="w-2")
    finish(job, "failed", error=error_dict(ValueError("second")))
    dead = get(result)
    assert Job.objects.get(public_id=result.id).status == Job.Status.DEAD
    assert dead.status == TaskResultStatus.FAILED
    assert dead.worker_ids == ["w-1", "w-2"]
    assert [e.exception_class for e in dead.errors] == [ValueError, ValueError]
    assert "ValueError: second" in dead.errors[1].traceback
    assert dead.started_at < dead.last_attempted_at <= dead.finished_at


def test_retrying_a_dead_task_makes_it_ready_and_keeps_its_history():
    result = test_tasks.failing_task_value_error.enqueue()
    Job.objects.filter(public_id=result.id).update(max_attempts=1)
    [job] = claim(1, worker_id="w-1")
    finish(job, "failed", error=error_dict(ValueError("x")))
    assert get(result).status == TaskResultStatus.FAILED
    Job.objects.filter(public_id=result.id).retry()
    again = get(result)
    assert again.status == TaskResultStatus.READY
    assert again.finished_at is None
    assert again.attempts == 1
    assert len(again.errors) == 1


def test_a_lost_worker_counts_as_an_attempt_with_a_worker_lost_error():
    result = test_tasks.noop_task.enqueue()
    [_gone] = claim(1, worker_id="w-gone", lease_seconds=-1)  # its lease has already run out
    [rescued] = Job.objects.rescue(now=timezone.now() + timedelta(seconds=1))
    assert rescued.public_id == result.id
    lost = get(result)
    assert lost.status == TaskResultStatus.READY  # failed, to be retried
    assert lost.worker_ids == ["w-gone"]
    assert lost.errors[0].exception_class is WorkerLost
    assert "w-gone" in lost.errors[0].traceback


def test_an_attempt_handed_back_at_shutdown_does_not_count():
    result = test_tasks.noop_task.enqueue()
    [job] = claim(1, worker_id="w-stopping")
    assert Job.objects.release([job]) == 1
    assert JobAttempt.objects.filter(job=job, outcome=JobAttempt.Outcome.RELEASED).exists()
    back = get(result)
    assert back.status == TaskResultStatus.READY
    assert (back.worker_ids, back.attempts, back.started_at) == ([], 0, None)


def test_canceling_a_running_task_reads_as_failed_once_the_worker_stops_it():
    result = test_tasks.noop_task.enqueue()
    [job] = claim(1, worker_id="w-1")
    Job.objects.filter(pk=job.pk).cancel()
    assert get(result).status == TaskResultStatus.RUNNING  # cancel requested, still running
    finish(job, "canceled", error=error_dict(type="JobCanceled", message="canceled"))
    canceled = get(result)
    assert canceled.status == TaskResultStatus.FAILED
    assert canceled.errors[0].exception_class.__name__ == "JobCanceled"


def test_errors_recorded_from_exceptions_carry_their_class_path():
    from tests.jobs import Fragile

    assert error_dict(Fragile("x"))["class_path"] == "tests.jobs.Fragile"
    assert error_dict(KeyError("k"))["class_path"] == "builtins.KeyError"
    assert "class_path" not in error_dict(type="WorkerLost", message="gone")
