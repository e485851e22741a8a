"""Database-backed background jobs for Django."""

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .control import enqueue_after_success, set_progress
from .exceptions import (
    InvalidJob,
    JobCanceled,
    JobTimeout,
    PermanentError,
    Snooze,
    UnknownJobType,
)
from .limits.rules import ConcurrencyLimit, RateLimit
from .registry import handler
from .retry import ExponentialBackoff, FixedSchedule
from .unique import Unique

if TYPE_CHECKING:
    from .models import Job

__all__ = [
    "ConcurrencyLimit",
    "ExponentialBackoff",
    "FixedSchedule",
    "InvalidJob",
    "JobCanceled",
    "JobTimeout",
    "PermanentError",
    "RateLimit",
    "Snooze",
    "Unique",
    "UnknownJobType",
    "current_job",
    "enqueue_after_success",
    "handler",
    "set_progress",
    "task",
]
__version__ = "0.1.0.dev0"


def current_job() -> "Job | None":
    """The Job the calling handler is running, or None outside a worker."""
    from .execution import current_job as _current

    return _current.get()


def task(function: Callable[..., Any] | None = None, **options: Any) -> Any:
    """Define a django.tasks Task with retry options: ``@task(max_attempts=5, timeout=60)``.

    The same as the framework's ``@task`` plus ``max_attempts``, ``backoff``, ``retry_on``,
    ``permanent`` and ``timeout``; see docs/reference-tasks-backend.md.
    """
    from .backends.tasks import task as _task

    return _task(function, **options)
