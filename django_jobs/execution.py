"""Runs one claimed job once, as a short chain of steps, and says what came of it.

record start -> resolve handler -> call -> normalise result -> record outcome -> tidy up.
Nothing the handler raises escapes: ``SystemExit`` and ``KeyboardInterrupt`` included.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import resource
import threading
import time
from contextvars import ContextVar
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import connections
from django.db.backends.signals import connection_created

from .conf import jobs_settings
from .exceptions import InvalidResult, JobCanceled, JobTimeout, Snooze
from .jsonvalues import NotStorable, storable_json
from .models import Job, error_dict
from .outcomes import AttemptOutcome, micros, now_us
from .registry import get_handler
from .signals import job_started
from .states import Outcome
from .unknown import unknown_type_outcome

if TYPE_CHECKING:
    from .registry import Handler

current_job: ContextVar[Job | None] = ContextVar("django_jobs_current_job", default=None)


def run_job(
    job: Job, started_at: datetime | int | None = None, *, tidy: bool = True
) -> AttemptOutcome:
    """Run ``job`` once in this thread and return its outcome; never raises.

    ``started_at`` (a datetime, or microseconds since the epoch) defaults to now. ``tidy``
    rolls back a transaction the handler left open; ``django_jobs.testing`` turns it off, as
    its handlers run inside the test's own transaction."""
    started = now_us() if started_at is None else micros(started_at)
    cpu_start = time.thread_time_ns()
    found = get_handler(job.type)
    if found is None:  # a rolling deploy: wait for a worker that knows the type (unknown.py)
        outcome = unknown_type_outcome(job, started)
    else:
        outcome = _call(found, job, started)
    outcome.finished = now_us()
    outcome.cpu_ns = time.thread_time_ns() - cpu_start
    outcome.peak_memory = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if tidy and _connected and threading.get_ident() in _connected:
        _tidy_connections()
    return outcome


def _call(found: Handler, job: Job, started_at) -> AttemptOutcome:
    token = current_job.set(job)
    try:
        if job_started.receivers and job_started.has_listeners(Job):
            job_started.send(sender=Job, job=job, attempt=job.attempt)
        result = _invoke(found.func, job.payload)
        result = normalise_result(result)
    except BaseException as exc:
        return outcome_for_exception(job, exc, started_at, found)
    finally:
        current_job.reset(token)
    return AttemptOutcome(
        job=job, kind=Outcome.COMPLETED, result=result, started_at=started_at,
        finished_at=started_at,
    )


def _invoke(func: Any, payload: Any) -> Any:
    if _is_async(func):
        return asyncio.run(func(payload))
    return func(payload)


@functools.lru_cache(maxsize=1024)
def _is_async(func: Any) -> bool:
    """``inspect.iscoroutinefunction``, asked once per handler rather than once per job."""
    return inspect.iscoroutinefunction(func)


def normalise_result(result: Any) -> Any:
    """The result as it will read back from the database: plain JSON types.

    A result follows the payload's rule (``jsonvalues``) within MAX_RESULT_BYTES; anything else
    raises InvalidResult, which fails the attempt for good (the job goes dead)."""
    if result is None or result is True or result is False:
        return result
    try:
        text = storable_json(result, jobs_settings.MAX_RESULT_BYTES, "MAX_RESULT_BYTES")
    except NotStorable as exc:
        raise InvalidResult(f"the handler's result {exc}") from None
    if result.__class__ is str or result.__class__ is int:
        return result
    return json.loads(text)


def outcome_for_exception(
    job: Job, exc: BaseException, started_at, found: Handler | None = None
) -> AttemptOutcome:
    """Classify what a handler raised: cancel, timeout (retryable), permanent or retryable."""
    if isinstance(exc, Snooze):  # run again later, the attempt does not count
        return AttemptOutcome(
            job=job, kind=Outcome.SNOOZED, started_at=started_at, finished_at=started_at,
            snooze_seconds=exc.seconds,
        )
    if isinstance(exc, JobCanceled):
        return AttemptOutcome(
            job=job, kind=Outcome.CANCELED, error=error_dict(exc), started_at=started_at,
            finished_at=started_at,
        )
    permanent = not isinstance(exc, JobTimeout) and found is not None and found.is_permanent(exc)
    return _failure(job, started_at, error_dict(exc), permanent=permanent)


def _failure(job: Job, started_at, error: dict, *, permanent: bool) -> AttemptOutcome:
    return AttemptOutcome(
        job=job, kind=Outcome.FAILED, error=error, permanent=permanent, started_at=started_at,
        finished_at=started_at,
    )


# The threads that have opened a database connection (by ident; a new thread given a dead
# one's ident only tidies once for nothing). A set, not a thread-local: reading a
# thread-local's attribute cost a no-op job a tenth of its time.
_connected: set[int] = set()


def _note_connection(sender: Any, connection: Any, **kwargs: Any) -> None:
    """This thread has opened a database connection: tidy its connections after each job.
    Until then there is nothing to tidy, and looking costs more than a no-op job."""
    _connected.add(threading.get_ident())


connection_created.connect(_note_connection, dispatch_uid="django_jobs.execution.connected")


def _tidy_connections() -> None:
    """Leave this thread's connections as a handler found them: no open transaction."""
    for conn in connections.all(initialized_only=True):
        try:
            if conn.connection is not None and not conn.get_autocommit():
                conn.rollback()
                conn.set_autocommit(True)
            if conn.errors_occurred and not conn.is_usable():
                conn.close()
        except Exception:
            conn.close()
