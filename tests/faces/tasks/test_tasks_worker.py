"""Conformance with a real worker: what running a task does, and what comes back.

The real ``Worker`` loop runs in a thread of this process in burst mode (tests/tasks_support.py),
so the task signals can be observed. Retries are in test_tasks_retries.py, real ``runworker``
processes in test_tasks_processes.py.
"""

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from django_jobs.models import Job, JobAttempt

pytestmark = [
    pytest.mark.skipif(
        not settings.HAS_TASKS_FRAMEWORK, reason="needs django.tasks or the django-tasks backport"
    ),
    pytest.mark.django_db(transaction=True),
]

if settings.HAS_TASKS_FRAMEWORK:
    from django_jobs.backends.compat import TaskResultStatus, default_task_backend
    from tests import tasks as test_tasks
    from tests.tasks_support import drain


def test_an_async_tasks_queries_run_in_the_slots_query_thread():
    """As an async handler's: the thread the worker keeps for its slot, whose connections it
    tidies, not asgiref's one thread for the whole process."""
    result = test_tasks.async_query_thread_task.enqueue()
    assert drain() == 1
    result.refresh()
    assert result.return_value.startswith("django-jobs-")
    assert result.return_value.endswith("-queries")


def test_sync_and_async_tasks_run_and_return_values_come_back():
    sync = test_tasks.echo_task.enqueue(1, [2, 3], key="v")
    async_ = test_tasks.async_echo_task.enqueue("a", n=1)
    meaning = test_tasks.calculate_meaning_of_life.enqueue()
    assert drain() == 3

    for result in (sync, async_, meaning):
        result.refresh()
        assert result.status == TaskResultStatus.SUCCESSFUL
        assert result.is_finished is True
        assert result.attempts == 1
        assert result.worker_ids == ["tasks-worker"]
        assert result.errors == []
        assert result.enqueued_at <= result.started_at <= result.finished_at
        assert result.last_attempted_at == result.started_at
    assert sync.return_value == {"args": [1, [2, 3]], "kwargs": {"key": "v"}}
    assert async_.return_value == {"async": True, "args": ["a"], "kwargs": {"n": 1}}
    assert default_task_backend.get_result(meaning.id).return_value == 42


def test_the_frameworks_log_lines_follow_the_task(caplog):
    """Django's own signal receivers log enqueued, RUNNING and the final state, with the id."""
    from django_jobs.backends.compat import FRAMEWORK

    logger_name = "django.tasks" if FRAMEWORK == "django.tasks" else "django_tasks"
    caplog.set_level("DEBUG", logger=logger_name)
    result = test_tasks.noop_task.enqueue()
    failed = test_tasks.failing_task_value_error.enqueue()
    Job.objects.filter(public_id=failed.id).update(max_attempts=1)
    drain()
    lines = [r.getMessage() for r in caplog.records if r.name == logger_name]
    mine = [line for line in lines if result.id in line]
    assert len(mine) == 3
    assert "enqueued" in mine[0]
    assert "state=RUNNING" in mine[1]
    assert "state=SUCCESSFUL" in mine[2]
    assert "state=FAILED" in [line for line in lines if failed.id in line][-1]


def test_a_task_returning_none_is_successful_with_none():
    result = test_tasks.noop_task.enqueue()
    drain()
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value is None


def test_return_values_are_normalised_to_json():
    result = test_tasks.tuple_return_value.enqueue()
    drain()
    assert test_tasks.tuple_return_value.get_result(result.id).return_value == [1, ["two", "three"]]
    assert Job.objects.get(public_id=result.id).result == [1, ["two", "three"]]


def test_a_return_value_json_cannot_hold_fails_the_task_without_retry():
    result = test_tasks.complex_return_value.enqueue()
    drain()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.attempts == 1  # permanent: running it again would return the same value
    with pytest.raises(ValueError, match="Task failed"):
        result.return_value  # noqa: B018
    assert issubclass(result.errors[0].exception_class, TypeError)
    assert "Unsupported type" in result.errors[0].traceback


@pytest.mark.parametrize(("name", "exception", "message"), [
    ("failing_task_value_error", ValueError, "This task failed due to ValueError"),
    ("failing_task_system_exit", SystemExit, "This task failed due to SystemExit"),
])
def test_exceptions_become_task_errors(name, exception, message):
    task = getattr(test_tasks, name)
    result = task.using(priority=1).enqueue()
    Job.objects.filter(public_id=result.id).update(max_attempts=1)
    drain()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.is_finished is True
    assert len(result.errors) == 1
    assert result.errors[0].exception_class is exception
    assert result.errors[0].traceback.endswith(f"{exception.__name__}: {message}\n")
    assert result.enqueued_at <= result.started_at <= result.finished_at


def test_a_complex_exception_is_recorded_whole():
    result = test_tasks.complex_exception.enqueue()
    Job.objects.filter(public_id=result.id).update(max_attempts=1)
    drain()
    result.refresh()
    assert result.errors[0].exception_class is ValueError
    assert 'ValueError(ValueError("This task failed"))' in result.errors[0].traceback


def test_takes_context_gets_the_running_result_and_attempt():
    result = test_tasks.context_snapshot.enqueue()
    own_id = test_tasks.get_task_id.enqueue()
    drain()
    assert default_task_backend.get_result(own_id.id).return_value == own_id.id
    seen = default_task_backend.get_result(result.id).return_value
    assert seen == {
        "is_context": True, "attempt": 1, "id": result.id, "status": "RUNNING",
        "worker_ids": ["tasks-worker"], "job_attempt": 1,
    }


def test_higher_priority_tasks_run_first():
    low = test_tasks.noop_task.using(priority=-50).enqueue()
    high = test_tasks.noop_task.using(priority=100).enqueue()
    normal = test_tasks.noop_task.enqueue()
    drain(concurrency=1)
    order = list(JobAttempt.objects.order_by("id").values_list("job__public_id", flat=True))
    assert order == [high.id, normal.id, low.id]


def test_a_deferred_task_does_not_run_before_run_after():
    later = test_tasks.noop_task.using(run_after=timezone.now() + timedelta(hours=1)).enqueue()
    past = test_tasks.noop_task.using(run_after=timezone.now() - timedelta(minutes=1)).enqueue()
    assert drain() == 1
    later.refresh()
    past.refresh()
    assert later.status == TaskResultStatus.READY
    assert later.attempts == 0
    assert past.status == TaskResultStatus.SUCCESSFUL


def test_a_worker_serving_other_queues_leaves_the_task_alone():
    result = test_tasks.send_welcome.enqueue(5)
    assert drain(queues=["default"]) == 0
    result.refresh()
    assert result.status == TaskResultStatus.READY
    assert drain(queues=["emails"]) == 1
    result.refresh()
    assert result.return_value == {"sent_to": 5}


def test_a_canceled_task_reads_as_failed():
    result = test_tasks.noop_task.enqueue()
    Job.objects.filter(public_id=result.id).cancel()
    assert drain() == 0
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.attempts == 0


def test_a_malformed_payload_fails_the_job_permanently():
    result = test_tasks.noop_task.enqueue()
    Job.objects.filter(public_id=result.id).update(payload=["not", "an", "object"])
    drain()
    job = Job.objects.get(public_id=result.id)
    assert job.status == Job.Status.DEAD
    assert job.attempt == 1
    assert "payload" in job.error["message"]


def test_task_jobs_run_beside_plain_jobs():
    plain = Job.enqueue("echo", {"x": 1})
    result = test_tasks.calculate_meaning_of_life.enqueue()
    assert drain() == 2
    plain.refresh_from_db()
    assert plain.result == {"echo": {"x": 1}}
    assert test_tasks.calculate_meaning_of_life.get_result(result.id).return_value == 42
