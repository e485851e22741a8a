"""Running tasks in the worker: the ``task:`` handler resolver and the task signals.

A task job is an ordinary Job whose type is ``task:<module path>`` and whose payload is
``{"args": [...], "kwargs": {...}, "backend": alias}``. The resolver turns the type back into a
Handler that calls the task function, so ``runworker`` runs tasks beside typed handlers, with the
same claims, leases, retries, timeouts and dead jobs.
"""

from __future__ import annotations

import logging
from inspect import iscoroutinefunction
from typing import Any

from django_jobs.backends.compat import (
    DEFAULT_TASK_BACKEND_ALIAS,
    Task,
    TaskContext,
    normalize_json,
    task_finished,
    task_started,
)
from django_jobs.backends.results import attempts_of, build_result, import_task, rebuild_task
from django_jobs.core.current import current_job
from django_jobs.exceptions import PermanentError
from django_jobs.handlers.registry import Handler
from django_jobs.models import Job
from django_jobs.worker.execution import run_coroutine

logger = logging.getLogger("django_jobs.tasks")

# Job outcomes after which a task will not run again (unless a person retries it).
FINAL_OUTCOMES = {Job.Status.COMPLETED, Job.Status.DEAD, Job.Status.CANCELED}

_handlers: dict[str, Handler] = {}


class ReturnValueNotJSON(TypeError):
    """A task returned a value that JSON cannot hold; retrying would not change that."""


def resolve(type: str) -> Handler | None:
    """The Handler for a ``task:`` job type, or None if it names no importable Task."""
    cached = _handlers.get(type)
    if cached is not None:
        return cached
    found = import_task(type)
    if found is None:
        return None
    handler = Handler(
        type=type,
        func=_runner(found),
        max_attempts=getattr(found, "max_attempts", None),
        backoff=getattr(found, "backoff", None),
        retry_on=getattr(found, "retry_on", None),
        permanent=(*getattr(found, "permanent", ()), ReturnValueNotJSON),
        timeout=getattr(found, "timeout", None),
    )
    _handlers[type] = handler
    return handler


def _runner(task: Task) -> Any:
    def run_task(payload: Any) -> Any:
        from django_jobs.backends.database import DatabaseBackend

        job = current_job.get()
        if job is None:  # the worker sets it before it calls a handler
            raise RuntimeError("a task's runner was called outside a job")
        args, kwargs, alias = unpack(payload)
        result = build_result(rebuild_task(task, job, alias), job, attempts_of(job), alias)
        task_started.send(sender=DatabaseBackend, task_result=result)
        if task.takes_context:
            args = [TaskContext(task_result=result), *args]
        if iscoroutinefunction(task.func):
            # As the worker runs async handlers: on the slot thread's event loop, where a
            # timeout or cancel cancels it and its queries run in the slot's query thread.
            value = run_coroutine(task.func(*args, **kwargs))
        else:
            value = task.func(*args, **kwargs)
        try:
            return normalize_json(value)
        except (TypeError, ValueError) as exc:
            raise ReturnValueNotJSON(f"{task.module_path} returned {exc}") from exc

    run_task.__qualname__ = run_task.__name__ = f"run_task[{task.module_path}]"
    return run_task


def unpack(payload: Any) -> tuple[list[Any], dict[str, Any], str]:
    """Arguments and backend alias from a task job's payload; PermanentError if malformed."""
    if not isinstance(payload, dict):
        raise PermanentError("a task job's payload must be an object with args and kwargs")
    args, kwargs = payload.get("args", []), payload.get("kwargs", {})
    alias = payload.get("backend", DEFAULT_TASK_BACKEND_ALIAS)
    if not isinstance(args, list) or not isinstance(kwargs, dict) or not isinstance(alias, str):
        raise PermanentError("a task job's payload needs a list 'args' and an object 'kwargs'")
    return args, kwargs, alias


def send_task_finished(sender: Any, job: Job, outcome: str, **kwargs: Any) -> None:
    """Receiver of ``job_finished``: send ``task_finished`` once a task's result is final.

    Not sent after an attempt that will be retried: the task has not finished then. Never
    raises, since it runs in the worker's main loop; receivers' errors are logged.
    """
    if not job.type.startswith("task:") or outcome not in FINAL_OUTCOMES:
        return
    from django_jobs.backends.database import DatabaseBackend

    try:
        found = import_task(job.type)
        if found is None:
            return
        _, _, alias = unpack(job.payload)
        attempts = attempts_of(job, finished_outcome=outcome)
        result = build_result(rebuild_task(found, job, alias), job, attempts, alias)
        responses = task_finished.send_robust(sender=DatabaseBackend, task_result=result)
    except Exception:  # the worker loop must go on
        logger.exception("could not send task_finished for job %s", job.public_id)
        return
    for receiver, response in responses:
        if isinstance(response, Exception):
            logger.error("task_finished receiver %r failed for %s", receiver, job.public_id,
                         exc_info=response)
