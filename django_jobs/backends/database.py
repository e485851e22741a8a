"""``DatabaseBackend``: the Tasks framework's backend contract, on django-jobs' queue.

    TASKS = {"default": {"BACKEND": "django_jobs.backends.DatabaseBackend",
                         "QUEUES": ["default", "emails"],
                         "OPTIONS": {"MAX_ATTEMPTS": 5}}}

``enqueue`` inserts one Job row in the caller's transaction; ``runworker`` runs it; ``get_result``
reads the row and its attempts back as a TaskResult. See docs/reference-tasks-backend.md.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from django.apps import apps
from django.core import checks
from django.db import transaction

from django_jobs.backends.compat import (
    BaseTaskBackend,
    InvalidTask,
    Task,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_enqueued,
)
from django_jobs.backends.results import (
    MAX_PATH_LENGTH,
    RESULT_ID_RE,
    TYPE_PREFIX,
    build_result,
    import_task,
    job_type,
    rebuild_task,
)
from django_jobs.backends.tasks import JobTask
from django_jobs.core.validation import MAX_ATTEMPTS_LIMIT, QUEUE_RE
from django_jobs.exceptions import InvalidJob
from django_jobs.handlers.registry import get_handler
from django_jobs.models import Job, JobAttempt

# OPTIONS the backend reads, with what each does.
KNOWN_OPTIONS = {
    # Attempts for this backend's tasks when the task itself does not say (overrides
    # DJANGO_JOBS["MAX_ATTEMPTS"]); 1 gives the at-most-once runs of the development backends.
    "MAX_ATTEMPTS",
}


class DatabaseBackend(BaseTaskBackend):
    # @task(...) builds this class, so the decorator accepts max_attempts, backoff, retry_on,
    # permanent and timeout (Django 6.1+ and the django-tasks backport).
    task_class = JobTask

    # run_after becomes the job's run_at; the worker never claims a job before it.
    supports_defer = True
    # async def tasks run in an event loop in the worker's executor thread.
    supports_async_task = True
    # Results are rows: any thread or process can read them back.
    supports_get_result = True
    # Priorities -100..100 are the job's own priority scale; higher is claimed first.
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self._queues_setting = params.get("QUEUES")

    def validate_task(self, task: Task) -> None:
        super().validate_task(task)
        if not isinstance(task.queue_name, str) or not QUEUE_RE.fullmatch(task.queue_name):
            raise InvalidTask(f"Queue name {task.queue_name!r} must match {QUEUE_RE.pattern}.")
        if len(task.module_path) > MAX_PATH_LENGTH:
            raise InvalidTask(
                f"Task path {task.module_path!r} is longer than {MAX_PATH_LENGTH} characters."
            )

    def enqueue(self, task: Task, args: Any, kwargs: Any) -> TaskResult:
        """Insert the task's job in the caller's transaction and return its READY result.

        Arguments are normalised to JSON first (TypeError for unsupported types, nothing
        written); what a job cannot hold (NaN, a NUL, a lone surrogate) is InvalidTask naming
        where it is. ``task_enqueued`` is sent when the transaction commits.
        """
        self.validate_task(task)
        result: TaskResult = TaskResult(
            task=task, id="", status=TaskResultStatus.READY, enqueued_at=None, started_at=None,
            last_attempted_at=None, finished_at=None, args=args, kwargs=kwargs,
            backend=self.alias, errors=[], worker_ids=[],
        )
        jtype = job_type(task)
        if get_handler(jtype) is None:
            raise InvalidTask(
                f"Task {task.module_path!r} cannot be imported by that path, so no worker could "
                "run it: define it at module level in an installed app, under its own name."
            )
        options = self.options if isinstance(self.options, dict) else {}  # else E004 says so
        max_attempts = getattr(task, "max_attempts", None) or options.get("MAX_ATTEMPTS")
        try:
            job = Job.objects.enqueue(
                jtype,
                {"args": result.args, "kwargs": result.kwargs, "backend": self.alias},
                priority=int(task.priority),
                queue=task.queue_name,
                run_at=task.run_after,
                max_attempts=max_attempts,
            )
        except InvalidJob as exc:  # named as the job's fields: payload ['args'][0], priority...
            raise InvalidTask("; ".join(
                f"{field}: {' '.join(messages)}" for field, messages in exc.message_dict.items()
            )) from exc
        object.__setattr__(result, "id", job.public_id)
        object.__setattr__(result, "enqueued_at", job.created_at)
        transaction.on_commit(
            partial(task_enqueued.send, type(self), task_result=result), using=job._state.db
        )
        return result

    def get_result(self, result_id: str) -> TaskResult:
        """The task's result as it stands in the database.

        Raises TaskResultDoesNotExist for an unknown or malformed id, for the id of a job that
        is not a task, and for a task whose function can no longer be imported.
        """
        if not isinstance(result_id, str) or not RESULT_ID_RE.fullmatch(result_id):
            raise TaskResultDoesNotExist(result_id)
        try:
            job = Job.objects.get(public_id=result_id, type__startswith=TYPE_PREFIX)
        except Job.DoesNotExist:
            raise TaskResultDoesNotExist(result_id) from None
        found = import_task(job.type)
        if found is None:
            raise TaskResultDoesNotExist(
                f"{result_id}: its task {job.type[len(TYPE_PREFIX):]!r} cannot be imported"
            )
        attempts = list(JobAttempt.objects.filter(job=job))
        return build_result(rebuild_task(found, job, self.alias), job, attempts, self.alias)

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        where = f"TASKS[{self.alias!r}]"
        problems: list[checks.CheckMessage] = []
        if not apps.is_installed("django_jobs"):
            problems.append(checks.Error(
                f"{where} uses django_jobs.backends.DatabaseBackend but 'django_jobs' is not in "
                "INSTALLED_APPS", id="django_jobs.tasks.E001",
            ))
        if self._queues_setting is not None and not isinstance(self._queues_setting, list | tuple):
            problems.append(checks.Error(
                f"{where}['QUEUES'] must be a list of queue names", id="django_jobs.tasks.E002",
            ))
        else:
            for name in sorted(self.queues, key=str):
                if not isinstance(name, str) or not QUEUE_RE.fullmatch(name):
                    problems.append(checks.Error(
                        f"{where}['QUEUES'] has a bad queue name {name!r}",
                        hint=f"queue names must match {QUEUE_RE.pattern}",
                        id="django_jobs.tasks.E003",
                    ))
        problems += self._check_options(where)
        return problems

    def _check_options(self, where: str) -> list[checks.CheckMessage]:
        if not isinstance(self.options, dict):
            return [checks.Error(f"{where}['OPTIONS'] must be a dict", id="django_jobs.tasks.E004")]
        problems: list[checks.CheckMessage] = [
            checks.Error(
                f"{where}['OPTIONS'] has an unknown key {key!r}",
                hint=f"known keys: {', '.join(sorted(KNOWN_OPTIONS))}",
                id="django_jobs.tasks.E005",
            )
            for key in sorted(set(self.options) - KNOWN_OPTIONS, key=str)
        ]
        max_attempts = self.options.get("MAX_ATTEMPTS")
        if max_attempts is not None and (
            not isinstance(max_attempts, int)
            or isinstance(max_attempts, bool)
            or not 1 <= max_attempts <= MAX_ATTEMPTS_LIMIT
        ):
            problems.append(checks.Error(
                f"{where}['OPTIONS']['MAX_ATTEMPTS'] must be an integer from 1 to "
                f"{MAX_ATTEMPTS_LIMIT}", id="django_jobs.tasks.E006",
            ))
        return problems
