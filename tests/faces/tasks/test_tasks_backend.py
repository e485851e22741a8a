"""Conformance: what the Tasks framework documents of a backend, without running a worker.

Run on Django 6.1 (``django.tasks``) and on 5.2 (the ``django_tasks`` backport), SQLite and
PostgreSQL. Behaviour that needs a worker is in test_tasks_worker.py.
"""

import dataclasses
import pickle
from datetime import datetime, timedelta

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import transaction
from django.test import override_settings
from django.utils import timezone

pytestmark = pytest.mark.skipif(
    not settings.HAS_TASKS_FRAMEWORK, reason="needs django.tasks or the django-tasks backport"
)

if settings.HAS_TASKS_FRAMEWORK:
    from django_jobs.backends import DatabaseBackend, JobTask
    from django_jobs.backends.compat import (
        InvalidTask,
        TaskResultDoesNotExist,
        TaskResultMismatch,
        TaskResultStatus,
        default_task_backend,
        task,
        task_backends,
        task_enqueued,
    )
    from django_jobs.models import Job
    from tests import tasks as test_tasks

    OTHER_BACKENDS = {
        **settings.TASKS,
        "any_queue": {"BACKEND": "django_jobs.backends.DatabaseBackend", "QUEUES": []},
    }


def test_default_backend_is_a_database_backend_with_every_feature():
    backend = task_backends["default"]
    assert isinstance(backend, DatabaseBackend)
    assert default_task_backend.alias == "default"
    assert backend.options == {}
    assert backend.queues == {"default", "emails"}
    assert backend.supports_defer is True
    assert backend.supports_async_task is True
    assert backend.supports_get_result is True
    assert backend.supports_priority is True
    assert backend.task_class is JobTask


def test_the_decorator_builds_tasks_of_the_backends_task_class():
    assert isinstance(test_tasks.noop_task, JobTask)
    assert isinstance(test_tasks.noop_task_from_bare_decorator, JobTask)
    assert isinstance(test_tasks.noop_task_async, JobTask)
    assert test_tasks.send_welcome.priority == 10
    assert test_tasks.send_welcome.queue_name == "emails"


@pytest.mark.django_db
def test_enqueue_returns_a_ready_result_backed_by_a_job_row():
    for t in (test_tasks.noop_task, test_tasks.noop_task_async):
        result = t.enqueue(1, two=3)

        assert result.status == TaskResultStatus.READY
        assert result.is_finished is False
        assert result.task == t
        assert result.args == [1]
        assert result.kwargs == {"two": 3}
        assert result.backend == "default"
        assert result.enqueued_at is not None
        assert (result.started_at, result.last_attempted_at, result.finished_at) == (None,) * 3
        assert (result.errors, result.worker_ids, result.attempts) == ([], [], 0)
        assert len(result.id) < 64
        with pytest.raises(ValueError, match="Task has not finished yet"):
            result.return_value  # noqa: B018
        job = Job.objects.get(public_id=result.id)
        assert job.type == f"task:{t.module_path}"
        assert job.payload == {"args": [1], "kwargs": {"two": 3}, "backend": "default"}
        assert job.status == Job.Status.PENDING
        assert job.created_at == result.enqueued_at


@pytest.mark.django_db
def test_aenqueue_and_aget_result():
    async def go():
        enqueued = await test_tasks.noop_task_async.aenqueue("x")
        fetched = await test_tasks.noop_task_async.aget_result(enqueued.id)
        await enqueued.arefresh()
        return enqueued, fetched

    enqueued, fetched = async_to_sync(go)()
    assert enqueued.status == TaskResultStatus.READY
    assert fetched == enqueued
    assert Job.objects.filter(public_id=enqueued.id).exists()


@pytest.mark.django_db
def test_priority_queue_and_run_after_become_the_jobs_fields():
    later = timezone.now() + timedelta(hours=1)
    result = test_tasks.send_welcome.using(priority=-100, run_after=later).enqueue(7)
    job = Job.objects.get(public_id=result.id)
    assert (job.priority, job.queue, job.run_at) == (-100, "emails", later)
    assert result.task.run_after == later


@pytest.mark.django_db
def test_arguments_are_normalised_to_json():
    result = test_tasks.echo_task.enqueue((1, 2), b"bytes", key=("a", "b"))
    assert result.args == [[1, 2], "bytes"]
    assert result.kwargs == {"key": ["a", "b"]}
    assert Job.objects.get(public_id=result.id).payload["args"] == [[1, 2], "bytes"]


@pytest.mark.django_db
def test_unsupported_argument_raises_type_error_and_writes_nothing():
    with pytest.raises(TypeError, match="Unsupported type"):
        test_tasks.noop_task.enqueue(datetime.now())
    with pytest.raises(TypeError, match="Unsupported type"):
        async_to_sync(test_tasks.noop_task.aenqueue)(object())
    assert not Job.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_enqueue_is_part_of_the_callers_transaction():
    with pytest.raises(RuntimeError), transaction.atomic():
        test_tasks.noop_task.enqueue()
        assert Job.objects.count() == 1
        raise RuntimeError("roll back")
    assert not Job.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_task_enqueued_is_sent_when_the_transaction_commits():
    seen = []

    def receiver(sender, task_result, **kwargs):
        seen.append((sender, task_result.id, task_result.status))

    task_enqueued.connect(receiver)
    try:
        with transaction.atomic():
            result = test_tasks.noop_task.enqueue()
            assert seen == []
        assert seen == [(DatabaseBackend, result.id, TaskResultStatus.READY)]
        with pytest.raises(RuntimeError), transaction.atomic():
            test_tasks.noop_task.enqueue()
            raise RuntimeError("roll back")
        assert len(seen) == 1
    finally:
        task_enqueued.disconnect(receiver)


@pytest.mark.django_db
def test_get_result_reads_back_what_enqueue_returned():
    result = test_tasks.echo_task.using(priority=5).enqueue(1, b=2)
    fetched = default_task_backend.get_result(result.id)
    assert fetched == result
    assert fetched is not result
    assert test_tasks.echo_task.get_result(result.id) == result
    deferred = test_tasks.echo_task.using(run_after=timezone.now() + timedelta(days=1)).enqueue()
    assert test_tasks.echo_task.get_result(deferred.id) == deferred


@pytest.mark.django_db
def test_refresh_keeps_an_unchanged_result_equal():
    result = test_tasks.noop_task.enqueue()
    before = dataclasses.asdict(result)
    result.refresh()
    assert dataclasses.asdict(result) == before
    async_to_sync(result.arefresh)()
    assert dataclasses.asdict(result) == before


@pytest.mark.django_db
def test_refresh_sees_changes_made_in_the_database():
    result = test_tasks.noop_task.enqueue()
    Job.objects.filter(public_id=result.id).cancel()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.is_finished is True
    assert result.finished_at is not None
    assert result.errors[0].exception_class.__name__ == "JobCanceled"


@pytest.mark.django_db
@pytest.mark.parametrize("result_id", [
    "123",  # not our id format at all
    "j-00000000000000000000",  # well formed, no such job
    "J-ABCDEF",  # malformed
    "",  # empty
    123,  # not a string
    None,
])
def test_unknown_or_malformed_ids_raise_task_result_does_not_exist(result_id):
    test_tasks.noop_task.enqueue()
    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result(result_id)
    with pytest.raises(TaskResultDoesNotExist):
        async_to_sync(default_task_backend.aget_result)(result_id)
    with pytest.raises(TaskResultDoesNotExist):
        test_tasks.noop_task.get_result(result_id)


@pytest.mark.django_db
def test_the_id_of_a_plain_job_is_not_a_task_result():
    job = Job.enqueue("noop")
    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result(job.public_id)


@pytest.mark.django_db
def test_a_task_that_can_no_longer_be_imported_has_no_result():
    result = test_tasks.noop_task.enqueue()
    Job.objects.filter(public_id=result.id).update(type="task:tests.tasks.removed_task")
    with pytest.raises(TaskResultDoesNotExist, match="cannot be imported"):
        default_task_backend.get_result(result.id)


@pytest.mark.django_db
def test_get_result_of_another_task_raises_mismatch():
    result = test_tasks.noop_task_async.enqueue()
    with pytest.raises(TaskResultMismatch, match="Task does not match"):
        test_tasks.noop_task.get_result(result.id)
    with pytest.raises(TaskResultMismatch):
        async_to_sync(test_tasks.noop_task.aget_result)(result.id)


@pytest.mark.django_db
def test_results_and_tasks_pickle():
    """Tasks pickle by path, as on Django 6.1, on the backport too; so do their results."""
    result = test_tasks.flaky_task.enqueue(succeed_on=2)
    assert pickle.loads(pickle.dumps(test_tasks.flaky_task)) == test_tasks.flaky_task
    assert pickle.loads(pickle.dumps(result)) == result


def test_invalid_tasks_are_refused_when_defined():
    with pytest.raises(InvalidTask, match="priority must be a whole number"):
        test_tasks.noop_task.using(priority=101)
    with pytest.raises(InvalidTask, match="priority must be a whole number"):
        test_tasks.noop_task.using(priority=3.1)
    if settings.USE_TZ:  # Django asks for an aware run_after under USE_TZ only
        with pytest.raises(InvalidTask, match="run_after must be an aware datetime"):
            test_tasks.noop_task.using(run_after=datetime.now())
    with pytest.raises(InvalidTask, match="Queue 'elsewhere' is not valid for backend"):
        test_tasks.noop_task.using(queue_name="elsewhere")
    with pytest.raises(InvalidTask, match="module level"):
        task()(lambda: None)
    with pytest.raises(InvalidTask, match="first argument of 'context'"):
        task(takes_context=True)(test_tasks.calculate_meaning_of_life.func)


@override_settings(TASKS=OTHER_BACKENDS if settings.HAS_TASKS_FRAMEWORK else {})
def test_empty_queues_allow_any_queue_name_a_job_can_have():
    any_queue = test_tasks.noop_task.using(backend="any_queue", queue_name="anything-goes")
    assert any_queue.queue_name == "anything-goes"
    with pytest.raises(InvalidTask, match="must match"):
        test_tasks.noop_task.using(backend="any_queue", queue_name="no spaces")


@pytest.mark.django_db
def test_a_task_not_importable_by_its_path_is_refused_at_enqueue():
    """A worker finds a task by its path: a Task not stored under its function's name can't run."""
    hidden = JobTask(func=_hidden_function)  # the module holds the function, not this Task
    with pytest.raises(InvalidTask, match="cannot be imported"):
        hidden.enqueue()
    assert not Job.objects.exists()


def _hidden_function():
    return None


def test_job_task_options_are_validated():
    func = test_tasks.calculate_meaning_of_life.func
    for options, message in [
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_attempts": True}, "max_attempts"),
        ({"timeout": -1}, "timeout"),
        ({"backoff": "soon"}, "backoff"),
        ({"backoff": [-1]}, "backoff"),
        ({"retry_on": [KeyError, "x"]}, "retry_on"),
        ({"permanent": [int]}, "permanent"),
    ]:
        with pytest.raises(InvalidTask, match=message):
            JobTask(func=func, **options)


@pytest.mark.django_db
def test_a_task_type_cannot_make_the_process_import_an_arbitrary_module():
    """Job types arrive through the API too: ``task:`` only imports installed apps' modules."""
    import sys

    from django_jobs.exceptions import UnknownJobType

    assert "this" not in sys.modules  # importing it prints the Zen of Python
    with pytest.raises(UnknownJobType):
        Job.enqueue("task:this.s", {"args": [], "kwargs": {}})
    assert "this" not in sys.modules
    with pytest.raises(UnknownJobType):  # importable, but a plain function, not a Task
        Job.enqueue("task:os.getcwd", {"args": [], "kwargs": {}})
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_a_task_job_enqueued_like_any_job_is_a_task_result():
    job = Job.enqueue(f"task:{test_tasks.echo_task.module_path}", {"args": [1], "kwargs": {}})
    result = test_tasks.echo_task.get_result(job.public_id)
    assert (result.status, result.args, result.backend) == (TaskResultStatus.READY, [1], "default")


@pytest.mark.django_db
def test_a_value_json_cannot_store_is_refused_and_writes_nothing():
    with pytest.raises(InvalidTask, match="JSON"):
        test_tasks.noop_task.enqueue(float("nan"))
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_max_attempts_comes_from_the_task_then_options_then_settings():
    with_options = {"default": {**settings.TASKS["default"], "OPTIONS": {"MAX_ATTEMPTS": 1}}}
    with override_settings(TASKS=with_options):
        from_options = test_tasks.noop_task.enqueue()
        from_task = test_tasks.flaky_task.enqueue(succeed_on=1)  # max_attempts=4 on the task
    from_settings = test_tasks.noop_task.enqueue()
    attempts = dict(Job.objects.values_list("public_id", "max_attempts"))
    assert attempts[from_options.id] == 1
    assert attempts[from_task.id] == 4
    assert attempts[from_settings.id] == 3  # DJANGO_JOBS["MAX_ATTEMPTS"] default
