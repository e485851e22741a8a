"""Reading a task's Job row (and its attempts) back as a ``TaskResult``.

Status: pending and failed -> READY (failed is waiting for its retry), processing -> RUNNING,
completed -> SUCCESSFUL, dead and canceled -> FAILED. ``worker_ids`` and ``errors`` come from the
attempts; an attempt handed back at shutdown ("released") did not count and is left out.
"""

from __future__ import annotations

import builtins
import re
import sys
from collections.abc import Sequence
from dataclasses import fields
from datetime import datetime
from typing import Any

from django.apps import apps
from django.utils.module_loading import import_string

from django_jobs import exceptions as jobs_exceptions
from django_jobs.backends.compat import Task, TaskError, TaskResult, TaskResultStatus
from django_jobs.models import Job, JobAttempt

TYPE_PREFIX = "task:"
# Job.type is a CharField(100): the module path of a task function gets 95 characters.
MAX_PATH_LENGTH = 100 - len(TYPE_PREFIX)
RESULT_ID_RE = re.compile(r"^j-[0-9a-f]{20}$")

STATUS: dict[str, TaskResultStatus] = {
    Job.Status.PENDING: TaskResultStatus.READY,
    Job.Status.FAILED: TaskResultStatus.READY,
    Job.Status.PROCESSING: TaskResultStatus.RUNNING,
    Job.Status.COMPLETED: TaskResultStatus.SUCCESSFUL,
    Job.Status.DEAD: TaskResultStatus.FAILED,
    Job.Status.CANCELED: TaskResultStatus.FAILED,
}


def job_type(task: Task) -> str:
    return TYPE_PREFIX + task.module_path


def import_task(type: str) -> Task | None:
    """The Task a ``task:<module path>`` job type names, or None.

    Only modules already imported or inside an installed app are imported: a job type arriving
    through the API cannot make the process import an arbitrary module. The path must name a
    Task object; a plain function is refused, so only decorated tasks can ever be run.
    """
    if not type.startswith(TYPE_PREFIX):
        return None
    path = type[len(TYPE_PREFIX):]
    module = path.rpartition(".")[0]
    if not module or not _may_import(module):
        return None
    try:
        found = import_string(path)
    except ImportError:
        return None
    return found if isinstance(found, Task) else None


def _may_import(module: str) -> bool:
    if module in sys.modules:
        return True
    return any(
        module == app.name or module.startswith(app.name + ".") for app in apps.get_app_configs()
    )


def rebuild_task(base: Task, job: Job, alias: str) -> Task:
    """``base`` with the priority, queue, run_after and backend the job was enqueued with.

    Built without the backend's validation on purpose: a stored job must read back even if
    QUEUES has changed since it was enqueued. ``run_after`` is the job's run_at when that
    differs from its enqueue time (a deferred task, or one waiting for its retry).
    """
    values = {f.name: getattr(base, f.name) for f in fields(base)}
    values.update(
        priority=job.priority,
        queue_name=job.queue,
        backend=alias,
        run_after=job.run_at if job.run_at != job.created_at else None,
    )
    rebuilt = object.__new__(type(base))
    for name, value in values.items():
        object.__setattr__(rebuilt, name, value)
    return rebuilt


def build_result(
    task: Task, job: Job, attempts: Sequence[JobAttempt], alias: str
) -> TaskResult:
    """The TaskResult of ``job`` as it stands in the database."""
    counted = [a for a in attempts if a.outcome != JobAttempt.Outcome.RELEASED]
    starts = _starts(job, counted)
    payload = job.payload if isinstance(job.payload, dict) else {}
    result: TaskResult = TaskResult(
        task=task,
        id=job.public_id,
        status=STATUS[job.status],
        enqueued_at=job.created_at,
        started_at=min(starts, default=None),
        last_attempted_at=job.started_at or max(starts, default=None),
        finished_at=job.finished_at if job.status in FINISHED else None,
        args=payload.get("args", []),
        kwargs=payload.get("kwargs", {}),
        backend=alias,
        errors=_errors(job, counted),
        worker_ids=_worker_ids(job, counted),
    )
    if job.status == Job.Status.COMPLETED:
        object.__setattr__(result, "_return_value", job.result)
    return result


def _starts(job: Job, counted: Sequence[JobAttempt]) -> list[datetime]:
    """When each counted attempt started. job.started_at is when the latest counted attempt
    was claimed (a hand-back clears it); an attempt row starts a moment later, when its thread
    picks it up."""
    starts = [a.started_at for a in counted]
    if job.started_at:
        starts.append(job.started_at)
    return starts


def _worker_ids(job: Job, counted: Sequence[JobAttempt]) -> list[str]:
    """The workers of the counted attempts, and of the one running now."""
    worker_ids = [a.worker_id for a in counted]
    if job.status == Job.Status.PROCESSING:
        worker_ids.append(job.worker_id)
    return worker_ids


def _errors(job: Job, counted: Sequence[JobAttempt]) -> list[TaskError]:
    """The counted attempts' errors; a job canceled without one has the cancel's."""
    errors = [task_error(a.error) for a in counted if a.error]
    if job.status == Job.Status.CANCELED and not errors:
        errors.append(task_error(job.error or {
            "type": "JobCanceled", "message": "canceled before it ran",
            "traceback": "django_jobs.exceptions.JobCanceled: canceled before it ran\n",
        }))
    return errors


FINISHED = (Job.Status.COMPLETED, Job.Status.DEAD, Job.Status.CANCELED)


def attempts_of(job: Job, finished_outcome: str | None = None) -> list[JobAttempt]:
    """The job's attempt rows, without a query when the job is on its first attempt.

    A job on attempt 1 has no earlier counted attempt. With ``finished_outcome``, the attempt
    that just finished is part of the list: on attempt 1 it is rebuilt from the job itself, as
    the worker wrote it (same worker, the job's error).
    """
    if job.attempt > 1:
        return list(JobAttempt.objects.filter(job=job))
    if finished_outcome is None or job.attempt < 1:
        return []
    error = job.error if finished_outcome != Job.Status.COMPLETED else None
    # An unsaved row, only read: started_at may be None when the claim was handed back.
    return [JobAttempt(job=job, number=1, worker_id=job.worker_id,  # type: ignore[misc]
                       started_at=job.started_at,
                       outcome=finished_outcome, error=error)]


def task_error(error: dict[str, Any]) -> TaskError:
    """A TaskError from the error stored on an attempt."""
    return TaskError(
        exception_class_path=exception_path(error),
        traceback=error.get("traceback") or f"{error.get('type')}: {error.get('message')}\n",
    )


def exception_path(error: dict[str, Any]) -> str:
    """The dotted path of the exception class an error was recorded from.

    Errors recorded from an exception carry ``class_path``. Those the worker writes itself
    (a lost worker, an abandoned timeout, an unknown type) name a django-jobs exception.
    """
    if error.get("class_path"):
        return error["class_path"]
    name = str(error.get("type") or "Exception")
    if isinstance(getattr(jobs_exceptions, name, None), type):
        return f"django_jobs.exceptions.{name}"
    if isinstance(getattr(builtins, name, None), type):
        return f"builtins.{name}"
    return "builtins.Exception"
