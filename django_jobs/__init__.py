"""Database-backed background jobs for Django."""

from .control import enqueue_after_success, set_progress
from .exceptions import (
    InvalidJob,
    JobCanceled,
    JobTimeout,
    PermanentError,
    Snooze,
    UnknownJobType,
)
from .limits import ConcurrencyLimit, RateLimit
from .registry import handler
from .retry import ExponentialBackoff, FixedSchedule
from .unique import Unique

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
]
__version__ = "0.1.0.dev0"


def current_job():  # type: ignore[no-untyped-def]
    """The Job the calling handler is running, or None outside a worker."""
    from .execution import current_job as _current

    return _current.get()
