"""Fixture tasks for the Tasks-framework conformance suite
(``tests/faces/tasks/test_tasks_*.py``)."""

import time
from datetime import date
from pathlib import Path

import django_jobs
from django_jobs import PermanentError
from django_jobs.backends.compat import DECORATOR_PASSES_OPTIONS, TaskContext, task

from .jobs import Broken, Fragile


@task()
def noop_task(*args, **kwargs):
    return None


@task
def noop_task_from_bare_decorator(*args, **kwargs):
    return None


@task()
async def noop_task_async(*args, **kwargs):
    return None


@task()
def calculate_meaning_of_life():
    return 42


@task()
def identity_task(value):
    return value


@task()
def echo_task(*args, **kwargs):
    return {"args": list(args), "kwargs": kwargs}


@task()
async def async_echo_task(*args, **kwargs):
    return {"async": True, "args": list(args), "kwargs": kwargs}


@task(priority=10, queue_name="emails")
def send_welcome(user_id):
    return {"sent_to": user_id}


@task()
def failing_task_value_error():
    raise ValueError("This task failed due to ValueError")


@task()
def failing_task_system_exit():
    raise SystemExit("This task failed due to SystemExit")


@task()
def complex_exception():
    raise ValueError(ValueError("This task failed"))


@task()
def complex_return_value():
    return date(2020, 1, 1)  # not JSON: the task fails with TypeError "Unsupported type"


@task()
def tuple_return_value():
    return (1, ("two", b"three"))


@task(takes_context=True)
def get_task_id(context):
    return context.task_result.id


@task(takes_context=True)
def context_snapshot(context):
    """What the running task sees of itself."""
    return {
        "is_context": isinstance(context, TaskContext),
        "attempt": context.attempt,
        "id": context.task_result.id,
        "status": str(context.task_result.status),
        "worker_ids": context.task_result.worker_ids,
        "job_attempt": django_jobs.current_job().attempt,
    }


@django_jobs.task(takes_context=True, max_attempts=4, backoff=[0.01])
def flaky_task(context, succeed_on):
    """Fails until attempt ``succeed_on``, then returns the attempt it succeeded on."""
    if context.attempt < succeed_on:
        raise Fragile(f"attempt {context.attempt} failed")
    return {"attempt": context.attempt}


@django_jobs.task(takes_context=True, max_attempts=3, backoff=[3600])
def slow_retry_task(context, succeed_on):
    """Like flaky_task, but its retry waits an hour (tests make it due with run_now)."""
    if context.attempt < succeed_on:
        raise Fragile(f"attempt {context.attempt} failed")
    return {"attempt": context.attempt}


@django_jobs.task(max_attempts=5, backoff=[0.01])
def permanent_task():
    raise PermanentError("cannot ever work")


@django_jobs.task(max_attempts=5, backoff=[0.01], permanent=[Broken])
def listed_permanent_task():
    raise Broken("listed as permanent")


@django_jobs.task(max_attempts=5, backoff=[0.01], retry_on=[Fragile])
def retry_only_fragile_task():
    raise KeyError("not in retry_on")


@django_jobs.task(max_attempts=1, timeout=0.3)
def hanging_task():
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        time.sleep(0.01)


@django_jobs.task(max_attempts=1, timeout=0.3)
async def async_hanging_task():
    import asyncio

    await asyncio.sleep(30)


@task()
async def async_query_thread_task():
    """The name of the thread where this async task's synchronous database code runs."""
    import threading

    from asgiref.sync import sync_to_async

    return await sync_to_async(lambda: threading.current_thread().name)()


@task()
def write_marker(path, text):
    Path(path).write_text(text)
    return text


if DECORATOR_PASSES_OPTIONS:

    @task(max_attempts=2, backoff=[0.01], queue_name="emails")
    def decorated_with_options():
        raise RuntimeError("always")

else:  # Django 6.0: the framework's decorator takes no extra options
    decorated_with_options = None


@django_jobs.task(takes_context=True, max_attempts=3, backoff=[0.01])
def stalls_on_first_attempt(context, marker):
    """Attempt 1 marks a file and hangs (the test kills its worker); later attempts return."""
    if context.attempt == 1:
        Path(marker).write_text("started")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            time.sleep(0.01)
    return {"attempt": context.attempt}
