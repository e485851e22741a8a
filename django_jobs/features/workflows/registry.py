"""``@workflow("checkout")``: a plain function registered as the handler of jobs of that type,
run by replay.

Each run of the job calls the function from its start with the run's history loaded
(``history.start``): the steps it finished before return their stored results, and it goes
on from the first step not yet finished. A query the function makes outside its steps is
logged once per run: a replay would run it again. What the function returns is the job's result; a
sleep or a wait ends the run with ``Snooze``; any other exception is the attempt's error, as
a handler's is (a step's error is retried with the workflow's attempts and backoff).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any, ParamSpec, TypeVar

from django.core.exceptions import ImproperlyConfigured
from django.db import connections

from django_jobs.core.current import current_job
from django_jobs.core.retry import Backoff
from django_jobs.features.workflows.history import current_run, start
from django_jobs.handlers.registry import handler
from django_jobs.handlers.typed_handler import JobHandler

P = ParamSpec("P")
R = TypeVar("R")

_workflows: set[str] = set()


def workflow(
    type: str,
    *,
    max_attempts: int | None = None,
    backoff: Backoff | Sequence[float] | None = None,
    timeout: float | None = None,
    queue: str | None = None,
) -> Callable[[Callable[P, R]], JobHandler[P, R]]:
    """Register ``func`` as the workflow of jobs of ``type``: ``func.enqueue(...)`` starts one
    in the caller's transaction, with the function's own arguments, as ``@handler``'s verbs
    do. ``max_attempts`` counts the runs that raised (a step's error, a crash), not the runs
    a sleep or a wait ended; ``timeout`` bounds each run."""

    def register(func: Callable[P, R]) -> JobHandler[P, R]:
        if inspect.iscoroutinefunction(func):
            raise ImproperlyConfigured(f"workflow {type!r}: a workflow function is a plain "
                                       f"def, not async def")

        @functools.wraps(func)
        def replay(*args: Any, **kwargs: Any) -> Any:
            job = current_job.get()
            if job is None:
                raise RuntimeError(f"workflow {type!r} runs in a worker: start it with "
                                   f"{func.__name__}.enqueue(...)")
            run = start(job)
            token = current_run.set(run)
            try:
                with connections[run.using].execute_wrapper(run.watch):
                    result = func(*args, **kwargs)
                run.replayed_all()
                return result
            finally:
                current_run.reset(token)

        registered = handler(type, max_attempts=max_attempts, backoff=backoff, timeout=timeout,
                             queue=queue)(replay)
        _workflows.add(type)
        return JobHandler(type, func, registered.spec)

    return register


def is_workflow(type: str) -> bool:
    """True for a job type ``@workflow`` registered."""
    return type in _workflows
