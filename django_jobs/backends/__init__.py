"""The backend for Django's Tasks framework (``django.tasks``, or ``django_tasks`` on 5.2).

``DatabaseBackend``, ``JobTask`` and ``task`` load lazily: importing this package needs neither
framework, so ``setup()`` can run from ``AppConfig.ready`` on every site.
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["DatabaseBackend", "JobTask", "setup", "task"]

_LAZY = {
    "DatabaseBackend": "database",
    "JobTask": "tasks",
    "task": "tasks",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def setup() -> None:
    """Let workers resolve ``task:`` job types and send ``task_finished``; called from ready().

    Also imports the framework when TASKS names this backend, so on Django 5.2 the backport's
    checks and settings receivers are connected even if ``django_tasks`` is not an installed app.
    """
    from django.conf import settings

    from django_jobs.handlers.registry import register_resolver

    register_resolver("task:", _resolve)
    configured = getattr(settings, "TASKS", None) or {}
    if isinstance(configured, dict) and any(
        isinstance(params, dict) and str(params.get("BACKEND", "")).startswith(f"{__name__}.")
        for params in configured.values()
    ):
        from django_jobs.backends import database  # noqa: F401


def _resolve(type: str) -> Any:
    from django.core.exceptions import ImproperlyConfigured

    try:
        from django_jobs.backends.runner import resolve
    except ImproperlyConfigured:  # no Tasks framework installed: no task can exist
        return None
    found = resolve(type)
    if found is not None:
        _send_task_finished()
    return found


@functools.cache
def _send_task_finished() -> None:
    """Connect the receiver that sends ``task_finished``, once a task has been resolved here.

    A worker resolves every job's handler when it claims it, so this is connected before any
    task's outcome is written. Until then job_finished has no receiver of ours, and a worker
    that runs no tasks does not call one for every job it finishes.
    """
    from django_jobs.models import Job
    from django_jobs.signals import job_finished

    job_finished.connect(_job_finished, sender=Job, dispatch_uid="django_jobs.task_finished")


def _job_finished(sender: Any, **kwargs: Any) -> None:
    if not str(getattr(kwargs.get("job"), "type", "")).startswith("task:"):
        return
    from django_jobs.backends.runner import send_task_finished

    send_task_finished(sender, **kwargs)
