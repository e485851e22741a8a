"""Database-backed background jobs for Django."""

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django_jobs.core.retry import ExponentialBackoff, FixedSchedule
from django_jobs.core.version import __version__
from django_jobs.exceptions import (
    DependencyUnavailable,
    InvalidJob,
    JobCanceled,
    JobConflict,
    JobTimeout,
    PermanentError,
    Snooze,
    UnknownJobType,
)
from django_jobs.features.dependency_results import dependency_results
from django_jobs.features.handler_control import (
    aset_progress,
    enqueue_after_success,
    set_progress,
)
from django_jobs.features.limits.rules import ConcurrencyLimit, RateLimit
from django_jobs.features.unique import Unique
from django_jobs.handlers.registry import handler
from django_jobs.handlers.typed_handler import JobHandler

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from django_jobs.core.json_rules import JSONValue
    from django_jobs.models import Job, JobGroup

__all__ = [
    "ConcurrencyLimit",
    "DependencyUnavailable",
    "ExponentialBackoff",
    "FixedSchedule",
    "InvalidJob",
    "JobCanceled",
    "JobConflict",
    "JobHandler",
    "JobTimeout",
    "PermanentError",
    "RateLimit",
    "Snooze",
    "Unique",
    "UnknownJobType",
    "__version__",
    "aset_progress",
    "current_job",
    "dependency_results",
    "enqueue_after_success",
    "enqueue_group",
    "group_jobs",
    "handler",
    "set_progress",
    "task",
]


def current_job() -> "Job | None":
    """The Job the calling handler is running: in the handler, the ``job_started`` receivers and
    what runs in the handler's context (its calls, ``async_to_sync``, ``sync_to_async``, an
    async handler's tasks). None anywhere else: outside a worker (a view, a shell, a test that
    calls the handler itself), in a thread the handler starts (a new thread begins with an
    empty context; pass the job to it), and in ``job_finished`` receivers (the job has ended:
    they are given it as ``job``)."""
    from django_jobs.core.current import current_job as _current

    return _current.get()


def enqueue_group(name: str, jobs: "Iterable[object]", *, callback: str,
                  callback_payload: "Mapping[str, JSONValue] | None" = None,
                  callback_options: "Mapping[str, JSONValue] | None" = None,
                  using: str | None = None) -> "JobGroup":
    """Enqueue ``jobs`` as one group, with a callback job enqueued once when all have ended;
    see ``django_jobs.features.groups.enqueue_group``."""
    from django_jobs.features.groups import enqueue_group as _enqueue_group

    return _enqueue_group(name, jobs, callback=callback, callback_payload=callback_payload,
                          callback_options=callback_options, using=using)


def group_jobs(group: Any, status: str | None = None, using: str | None = None) -> Any:
    """The jobs of a group (a JobGroup, its public id, as a group's callback gets it, or its
    primary key), of ``status`` if given; see ``django_jobs.features.groups.group_jobs``."""
    from django_jobs.features.groups import group_jobs as _group_jobs

    return _group_jobs(group, status, using)


def task(function: Callable[..., Any] | None = None, **options: Any) -> Any:
    """Define a django.tasks Task with retry options: ``@task(max_attempts=5, timeout=60)``.

    The same as the framework's ``@task`` plus ``max_attempts``, ``backoff``, ``retry_on``,
    ``permanent`` and ``timeout``; see docs/reference-tasks-backend.md.
    """
    from django_jobs.backends.tasks import task as _task

    return _task(function, **options)
