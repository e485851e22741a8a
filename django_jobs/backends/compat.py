"""One set of names for the Tasks framework, wherever it comes from.

Django 6.0+ ships it as ``django.tasks``; on Django 5.2 the ``django-tasks`` package (0.12 or
later, import name ``django_tasks``) backports the same API. Everything in django-jobs imports
the framework from here, so no other module needs to know which one is installed.

``django.tasks`` wins when both are importable: on Django 6 the framework's own ``task_backends``
is the one ``@task`` uses, and mixing the two registries would make two backend instances.

The type checker reads the ``django.tasks`` branch (django-stubs types it); the backport has the
same API under the same names, but its classes are other classes to a type checker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import django
from django.core.exceptions import ImproperlyConfigured

if TYPE_CHECKING or django.VERSION >= (6, 0):
    from django import tasks as _framework
    from django.tasks import checks as _checks  # registers check_tasks
    from django.tasks import exceptions as _exceptions
    from django.tasks import signals as _signals
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import (
        Task,
        TaskContext,
        TaskError,
        TaskResult,
        TaskResultStatus,
    )
    from django.tasks.exceptions import InvalidTask, InvalidTaskBackend
    from django.utils.json import normalize_json

    FRAMEWORK = "django.tasks"
else:  # Django 5.2: the backport
    try:
        import django_tasks as _framework
    except ImportError as exc:
        raise ImproperlyConfigured(
            "django_jobs.backends needs Django 6 or, on Django 5.2, the django-tasks package: "
            "pip install 'django-tasks>=0.12' (the tasks extra of django-db-jobs)"
        ) from exc
    from django_tasks import checks as _checks
    from django_tasks import exceptions as _exceptions
    from django_tasks import signals as _signals
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import (
        Task,
        TaskContext,
        TaskError,
        TaskResult,
        TaskResultStatus,
    )
    from django_tasks.exceptions import InvalidTaskBackendError as InvalidTaskBackend
    from django_tasks.exceptions import InvalidTaskError as InvalidTask
    from django_tasks.utils import normalize_json

    FRAMEWORK = "django_tasks"

# The priority range is the framework's contract (and the job's own scale).
DEFAULT_TASK_PRIORITY, TASK_MIN_PRIORITY, TASK_MAX_PRIORITY = 0, -100, 100

# Whether ``@task(...)`` hands unknown keyword arguments to the backend's ``task_class``:
# Django 6.1+ and the backport do, Django 6.0 does not (use ``django_jobs.task`` there).
DECORATOR_PASSES_OPTIONS: bool = FRAMEWORK == "django_tasks" or django.VERSION >= (6, 1)

DEFAULT_TASK_BACKEND_ALIAS: str = _framework.DEFAULT_TASK_BACKEND_ALIAS
DEFAULT_TASK_QUEUE_NAME: str = _framework.DEFAULT_TASK_QUEUE_NAME
task_backends: Any = _framework.task_backends
default_task_backend: Any = _framework.default_task_backend
task = _framework.task

TaskResultDoesNotExist: type[Exception] = _exceptions.TaskResultDoesNotExist
TaskResultMismatch: type[Exception] = _exceptions.TaskResultMismatch

check_tasks = _checks.check_tasks  # the framework's system check: every backend's check()
task_enqueued = _signals.task_enqueued
task_started = _signals.task_started
task_finished = _signals.task_finished

__all__ = [
    "DECORATOR_PASSES_OPTIONS",
    "DEFAULT_TASK_BACKEND_ALIAS",
    "DEFAULT_TASK_PRIORITY",
    "DEFAULT_TASK_QUEUE_NAME",
    "FRAMEWORK",
    "TASK_MAX_PRIORITY",
    "TASK_MIN_PRIORITY",
    "BaseTaskBackend",
    "InvalidTask",
    "InvalidTaskBackend",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultMismatch",
    "TaskResultStatus",
    "check_tasks",
    "default_task_backend",
    "normalize_json",
    "task",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]
