"""Retries, backoff, permanent errors and timeouts for tasks, with a real worker in a thread."""

import pytest
from django.conf import settings
from django.utils import timezone

from django_jobs.models import Job

pytestmark = [
    pytest.mark.skipif(
        not settings.HAS_TASKS_FRAMEWORK, reason="needs django.tasks or the django-tasks backport"
    ),
    pytest.mark.django_db(transaction=True),
]

if settings.HAS_TASKS_FRAMEWORK:
    from django_jobs.backends import DatabaseBackend
    from django_jobs.backends.compat import TaskResultStatus, default_task_backend
    from django_jobs.exceptions import JobTimeout, PermanentError
    from tests import tasks as test_tasks
    from tests.jobs import Broken, Fragile
    from tests.tasks_support import drain, drain_until_finished, recording_task_signals


@pytest.fixture
def signals():
    with recording_task_signals() as recorder:
        yield recorder


def test_retries_count_attempts_and_keep_every_error(signals):
    result = test_tasks.flaky_task.enqueue(succeed_on=3)
    job = Job.objects.get(public_id=result.id)
    assert job.max_attempts == 4  # from @django_jobs.task(max_attempts=4)
    drain_until_finished(result)

    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == {"attempt": 3}  # the context saw attempt 3
    assert result.attempts == 3
    assert result.worker_ids == ["tasks-worker"] * 3
    assert [e.exception_class for e in result.errors] == [Fragile, Fragile]
    assert "attempt 1 failed" in result.errors[0].traceback
    assert "attempt 2 failed" in result.errors[1].traceback
    assert result.started_at < result.last_attempted_at <= result.finished_at
    # task_started before every attempt; task_finished once, when the result is final.
    assert [(e[0], e[3], e[4]) for e in signals.events] == [
        ("started", TaskResultStatus.RUNNING, 1),
        ("started", TaskResultStatus.RUNNING, 2),
        ("started", TaskResultStatus.RUNNING, 3),
        ("finished", TaskResultStatus.SUCCESSFUL, 3),
    ]
    assert {e[1] for e in signals.events} == {DatabaseBackend}
    assert {e[2] for e in signals.events} == {result.id}


def test_the_result_sent_with_task_finished_is_the_stored_result(signals):
    succeeded = test_tasks.calculate_meaning_of_life.enqueue()
    failed = test_tasks.permanent_task.enqueue()
    retried = test_tasks.flaky_task.enqueue(succeed_on=2)
    drain_until_finished(retried)
    drain()
    for enqueued in (succeeded, failed, retried):
        [sent] = [r for name, r in signals.results if name == "finished" and r.id == enqueued.id]
        assert sent == default_task_backend.get_result(enqueued.id)
    assert [r.status for name, r in signals.results if name == "finished"] == [
        TaskResultStatus.SUCCESSFUL, TaskResultStatus.FAILED, TaskResultStatus.SUCCESSFUL,
    ]


def test_a_task_out_of_attempts_fails_and_sends_task_finished(signals):
    result = test_tasks.flaky_task.enqueue(succeed_on=99)
    drain_until_finished(result)
    assert result.status == TaskResultStatus.FAILED
    assert result.attempts == 4
    assert len(result.errors) == 4
    assert Job.objects.get(public_id=result.id).status == Job.Status.DEAD
    assert signals.events[-1][0] == "finished"
    assert signals.events[-1][3] == TaskResultStatus.FAILED
    assert [e[0] for e in signals.events].count("finished") == 1


def test_a_failed_attempt_waiting_for_retry_reads_as_ready():
    result = test_tasks.slow_retry_task.enqueue(succeed_on=2)
    drain()
    assert Job.objects.get(public_id=result.id).status == Job.Status.FAILED
    result.refresh()
    assert result.status == TaskResultStatus.READY
    assert result.is_finished is False
    assert result.finished_at is None
    assert result.attempts == 1
    assert result.errors[0].exception_class is Fragile
    # get_result (refresh() keeps the task) shows when the retry is due.
    assert test_tasks.slow_retry_task.get_result(result.id).task.run_after > timezone.now()
    drain_until_finished(result)  # run_now() makes the retry due
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.attempts == 2


@pytest.mark.parametrize(("name", "exception"), [
    ("permanent_task", PermanentError),  # PermanentError: never retried
    ("listed_permanent_task", Broken),  # listed in permanent=
    ("retry_only_fragile_task", KeyError),  # not listed in retry_on=
])
def test_permanent_errors_fail_the_task_at_once(name, exception):
    result = getattr(test_tasks, name).enqueue()
    drain()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.attempts == 1
    assert [e.exception_class for e in result.errors] == [exception]


@pytest.mark.parametrize("name", ["hanging_task", "async_hanging_task"])
def test_a_task_past_its_timeout_is_stopped_and_fails(name):
    """An async task's coroutine is cancelled at its ``await``, not abandoned after the
    grace as a task that ignored the timeout."""
    result = getattr(test_tasks, name).enqueue()
    drain()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.errors[0].exception_class is JobTimeout
    assert "abandoned" not in Job.objects.get(public_id=result.id).error["message"]


def test_decorator_options_reach_the_job_where_the_framework_passes_them():
    if test_tasks.decorated_with_options is None:
        pytest.skip("Django 6.0's @task takes no extra options; django_jobs.task is used instead")
    result = test_tasks.decorated_with_options.enqueue()
    job = Job.objects.get(public_id=result.id)
    assert (job.max_attempts, job.queue) == (2, "emails")
    drain_until_finished(result)
    assert result.status == TaskResultStatus.FAILED
    assert result.attempts == 2
