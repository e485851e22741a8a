"""``JobTask``: a Task that also carries django-jobs' retry options, and ``django_jobs.task``.

On Django 6.1 and the django-tasks backport, ``@task(max_attempts=5, ...)`` reaches this class
through ``DatabaseBackend.task_class``. On Django 6.0 the decorator refuses unknown options, so
``@django_jobs.task(...)`` builds a ``JobTask`` itself; it works with any backend (other
backends ignore the extra options, which keeps the Dummy backend usable in tests).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from inspect import isclass
from typing import Any

from django.utils.module_loading import import_string

from django_jobs.backends.compat import (
    DEFAULT_TASK_BACKEND_ALIAS,
    DEFAULT_TASK_PRIORITY,
    DEFAULT_TASK_QUEUE_NAME,
    InvalidTask,
    Task,
)
from django_jobs.core.retry import Backoff, as_backoff
from django_jobs.core.validation import MAX_ATTEMPTS_LIMIT

ExceptionTypes = tuple[type[BaseException], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class JobTask(Task):
    """A Task with retry options; ``None`` means "use the backend's or the site's settings"."""

    # Attempts before the task's job goes dead (1 = never retried).
    max_attempts: int | None = None
    # Seconds between attempts: an ExponentialBackoff, a FixedSchedule or a list of delays.
    backoff: Backoff | None = None
    # Only these exceptions are retried; any other goes dead at once.
    retry_on: ExceptionTypes | None = None
    # These exceptions go dead at once (besides django_jobs.PermanentError).
    permanent: ExceptionTypes = ()
    # Seconds an attempt may run before the worker interrupts it with JobTimeout.
    timeout: float | None = None

    def __post_init__(self) -> None:
        if self.max_attempts is not None and not _whole_in(self.max_attempts, 1,
                                                           MAX_ATTEMPTS_LIMIT):
            raise InvalidTask(f"max_attempts must be an integer from 1 to {MAX_ATTEMPTS_LIMIT}.")
        if self.timeout is not None and not _positive(self.timeout):
            raise InvalidTask("timeout must be a positive number of seconds.")
        if self.backoff is not None:
            object.__setattr__(self, "backoff", _backoff(self.backoff))
        if self.retry_on is not None:
            object.__setattr__(self, "retry_on", _exception_types("retry_on", self.retry_on))
        object.__setattr__(self, "permanent", _exception_types("permanent", self.permanent))
        # Zero-argument super() does not work in a slotted dataclass, hence the explicit call.
        Task.__post_init__(self)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle by module path, as Django 6.1 does, on the backport as well."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values["func"] = self.module_path
        return (_unpickle, (type(self), values))


def _unpickle(cls: type[JobTask], values: dict[str, Any]) -> JobTask:
    found = import_string(values["func"])
    if not isinstance(found, Task):
        raise ValueError(f"Expected {values['func']!r} to point to a Task instance.")
    return cls(**{**values, "func": found.func})


def _whole_in(value: object, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _positive(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def _backoff(value: object) -> Backoff:
    """A task's ``backoff`` as a Backoff; InvalidTask if it is none."""
    try:
        backoff = as_backoff(value)  # type: ignore[arg-type]  # checked here
    except (TypeError, ValueError) as exc:
        raise InvalidTask(f"backoff is not valid: {exc}") from None
    if not callable(getattr(backoff, "delay", None)):
        raise InvalidTask("backoff must be a Backoff (with .delay()) or a list of seconds.")
    return backoff


def _exception_types(name: str, value: Any) -> ExceptionTypes:
    items = tuple(value) if isinstance(value, Sequence) else (value,)
    if not all(isclass(item) and issubclass(item, BaseException) for item in items):
        raise InvalidTask(f"{name} must be exception classes.")
    return items


def task(
    function: Callable[..., Any] | None = None,
    *,
    priority: int = DEFAULT_TASK_PRIORITY,
    queue_name: str = DEFAULT_TASK_QUEUE_NAME,
    backend: str = DEFAULT_TASK_BACKEND_ALIAS,
    takes_context: bool = False,
    max_attempts: int | None = None,
    backoff: Backoff | Sequence[float] | None = None,
    retry_on: Sequence[type[BaseException]] | None = None,
    permanent: Sequence[type[BaseException]] = (),
    timeout: float | None = None,
) -> Any:
    """Define a task like ``django.tasks.task``, with django-jobs' retry options.

    ``@task`` and ``@task(...)`` both work. Raises the framework's InvalidTask on bad options.
    """

    def wrapper(func: Callable[..., Any]) -> JobTask:
        return JobTask(
            func=func,
            priority=priority,
            queue_name=queue_name,
            backend=backend,
            takes_context=takes_context,
            max_attempts=max_attempts,
            backoff=backoff,  # type: ignore[arg-type]  # a list becomes a FixedSchedule
            retry_on=retry_on,  # type: ignore[arg-type]
            permanent=permanent,  # type: ignore[arg-type]
            timeout=timeout,
        )

    if function is not None:
        return wrapper(function)
    return wrapper
