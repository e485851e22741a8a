"""Runs one claimed job once, as a short chain of steps, and says what came of it.

record start -> resolve handler -> call -> normalise result -> record outcome -> tidy up.
Nothing the handler raises escapes: ``SystemExit`` and ``KeyboardInterrupt`` included.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import queue
import resource
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Executor, Future
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import connections
from django.db.backends.signals import connection_created

from django_jobs.core import observers
from django_jobs.core.current import current_job
from django_jobs.core.json_rules import stored_result
from django_jobs.core.outcomes import AttemptOutcome, micros, now_us
from django_jobs.core.states import Outcome
from django_jobs.core.stored_errors import error_dict
from django_jobs.exceptions import JobCanceled, JobTimeout, Snooze
from django_jobs.handlers.registry import get_handler
from django_jobs.models import Job
from django_jobs.signals import job_started
from django_jobs.worker.unknown_types import unknown_type_outcome

if TYPE_CHECKING:
    from django_jobs.handlers.registry import Handler
    from django_jobs.worker.slot_loop import SlotLoop

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
    if tidy and _seen.get(threading.get_ident(), 0) != _lost:
        _drop_suspect_connections(found)
    span = _traced(job)  # None unless the job or this process traces
    outcome = None
    try:
        if found is None:  # a rolling deploy: wait for a worker that knows the type
            outcome = unknown_type_outcome(job, started)  # (unknown_types.py)
        else:
            outcome = _call(found, job, started)
    finally:
        if span is not None:
            span.end(outcome)
    outcome.finished = now_us()
    outcome.cpu_ns = time.thread_time_ns() - cpu_start
    outcome.peak_memory = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if tidy and _connected:
        _tidy_thread()
    return outcome


def _traced(job: Job) -> Any:
    """The span of ``job``'s attempt (``worker/tracing.py``), or None without looking there
    when nothing can be traced: the job carries no trace context and no code of this process
    has imported OpenTelemetry, so no tracer is configured."""
    if job.trace_context is None and "opentelemetry.trace" not in sys.modules:
        return None
    from django_jobs.worker import tracing

    return tracing.start(job)


def _tidy_thread() -> None:
    """After a job: this thread's connections, and those of its coroutine's queries."""
    if threading.get_ident() in _connected:
        _tidy_connections()
    queries = _query_threads.get(threading.get_ident())
    if queries is not None and queries.ran:  # the job ran a coroutine (run_coroutine)
        queries.ran = False
        queries.tidy()


def _call(found: Handler, job: Job, started_at) -> AttemptOutcome:
    token = current_job.set(job)
    try:
        if job_started.receivers and job_started.has_listeners(Job):
            # A receiver's error is reported, not the job's (a timeout or cancel still is)
            observers.send(job_started, "job_started", sender=Job, job=job, attempt=job.attempt)
        if found.isolation is not None and not isolation_off.get():  # (process_isolation.py)
            result = _run_isolated(found, job)
        elif found.arguments is None:
            result = _invoke(found.func, (job.payload,), _NO_KEYWORDS)
        else:  # PermanentError if the stored payload does not fit the arguments
            args, kwargs = found.arguments.call(job.payload)
            result = _invoke(found.func, args, kwargs)
        result = stored_result(result)
    except BaseException as exc:
        return outcome_for_exception(job, exc, started_at, found)
    finally:
        current_job.reset(token)
    return AttemptOutcome(
        job=job, kind=Outcome.COMPLETED, result=result, started_at=started_at,
        finished_at=started_at,
    )


_NO_KEYWORDS: dict[str, Any] = {}
# True in ``django_jobs.testing.run_jobs``: a handler with ``isolation="process"`` runs in the
# caller's thread, in the test's transaction, as every other handler does there.
isolation_off: ContextVar[bool] = ContextVar("django_jobs_isolation_off", default=False)


def _run_isolated(found: Handler, job: Job) -> Any:
    from django_jobs.worker.process_isolation import run_isolated

    return run_isolated(found, job)


def _invoke(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if _is_async(func):
        return run_coroutine(func(*args, **kwargs))
    return func(*args, **kwargs)


def run_coroutine(coro: Any) -> Any:
    """Run ``coro`` to its end in this thread as the worker runs an async handler: in a slot
    thread, on its event loop (a cancel or timeout cancels it, its queries run in the slot's
    ``QueryThread``); elsewhere with ``asyncio.run``."""
    queries = _query_threads.get(threading.get_ident())
    if queries is None:
        return asyncio.run(coro)
    return queries.run(coro)


@functools.lru_cache(maxsize=1024)
def _is_async(func: Any) -> bool:
    """``inspect.iscoroutinefunction``, asked once per handler rather than once per job."""
    return inspect.iscoroutinefunction(func)


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
            finished_at=started_at, exception=exc,
        )
    permanent = not isinstance(exc, JobTimeout) and found is not None and found.is_permanent(exc)
    return _failure(job, started_at, error_dict(exc), permanent=permanent, exception=exc)


def _failure(job: Job, started_at, error: dict, *, permanent: bool,
             exception: BaseException | None = None) -> AttemptOutcome:
    return AttemptOutcome(
        job=job, kind=Outcome.FAILED, error=error, permanent=permanent, started_at=started_at,
        finished_at=started_at, exception=exception,
    )


# The threads that have opened a database connection (by ident; a new thread given a dead
# one's ident only tidies once for nothing). A set, not a thread-local: reading a
# thread-local's attribute cost a no-op job a tenth of its time.
_connected: set[int] = set()


def _note_connection(sender: Any, connection: Any, **kwargs: Any) -> None:
    """This thread has opened a database connection: tidy its connections after each job.
    Until then there is nothing to tidy, and looking costs more than a no-op job."""
    _connected.add(threading.get_ident())


connection_created.connect(_note_connection, dispatch_uid="django_jobs.worker.execution.connected")


# How many times the worker saw the database go away (``connections_lost``), and how many of
# those each thread has answered (by thread ident). A connection the database ended while it sat
# idle is not marked as failed until a query fails on it, which would be the handler's query,
# failing its attempt; so after an outage each thread closes its connections before its next
# job, and the handler's first query opens a new one.
_lost = 0
_seen: dict[int, int] = {}


def connections_lost() -> None:
    """The database went away or came back (the worker's outage handling): every thread's
    connections may be dead. Safe from any thread; costs nothing until a thread's next job."""
    global _lost
    _lost += 1


def _drop_suspect_connections(found: Handler | None) -> None:
    ident = threading.get_ident()
    _seen[ident] = _lost
    if ident in _connected:
        _close_connections()
    queries = _query_threads.get(ident)
    if queries is not None and queries.started:
        queries.submit(_close_connections).result()


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


class QueryThread(Executor):
    """The thread where a slot's async handlers run their synchronous database code.

    The async ORM (``acount``, ``aget``...) runs its queries through
    ``sync_to_async(thread_sensitive=True)``: in a thread of its own, not the one running the
    handler's event loop, and outside any ``async_to_sync`` that thread would be asgiref's one
    thread for the whole process, whose connections nothing ever checks. Each slot thread has
    one of these instead, registered for the event loop of each of its async jobs: the
    queries of its handlers run there one after another, and that thread's connections are
    tidied before and after each job as the slot's own are after it (a connection the
    database ended is closed, the next query opens a new one), and closed with the slot.

    An executor of one daemon thread, started at the first async job, rather than a
    ``ThreadPoolExecutor`` (whose threads are not daemons): like the slot thread it serves,
    it never holds up the process's exit, nor counts as a thread a handler left running.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._calls: queue.SimpleQueue[tuple[Future, Any, tuple, dict] | None] = \
            queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.loop: SlotLoop | None = None  # made at the first async job; closed by ``shutdown``
        self.ran = False  # a coroutine ran since the last job ended: tidy after it

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future:
        future: Future = Future()
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name=self.name, daemon=True)
                self._thread.start()
            self._calls.put((future, fn, args, kwargs))
        return future

    def _work(self) -> None:
        while (call := self._calls.get()) is not None:
            future, fn, args, kwargs = call
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:  # handed to the caller, as a ThreadPoolExecutor does
                future.set_exception(exc)
            else:
                future.set_result(result)
            del call, future, fn, args, kwargs

    def run(self, coro: Any) -> Any:
        """``asyncio.run(coro)``, with this thread for the loop's thread-sensitive code, on
        the slot's event loop (``worker/slot_loop.py``)."""
        self.tidy()
        self.ran = True
        if self.loop is None:
            from django_jobs.worker.slot_loop import SlotLoop

            self.loop = SlotLoop(self)
        return self.loop.run(coro)

    @property
    def started(self) -> bool:
        return self._thread is not None

    def tidy(self) -> None:
        self.submit(_tidy_if_connected).result()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Close the slot's event loop (from the slot thread), then the thread's connections,
        and end it (nothing to do if it never started)."""
        if self.loop is not None:
            self.loop.close()
        with self._lock:
            thread, self._thread = self._thread, None
            if thread is None:
                return
            self._calls.put((Future(), _close_connections, (), {}))
            self._calls.put(None)
        if wait:
            thread.join()


_query_threads: dict[int, QueryThread] = {}  # by the ident of the slot thread they serve


@contextmanager
def query_thread(name: str) -> Iterator[QueryThread]:
    """For the calling (slot) thread's life: its async handlers' queries run in a
    ``QueryThread`` of its own, closed with its connections on exit."""
    ident = threading.get_ident()
    queries = _query_threads[ident] = QueryThread(name)
    try:
        yield queries
    finally:
        _query_threads.pop(ident, None)
        queries.shutdown()


def _tidy_if_connected() -> None:
    if threading.get_ident() in _connected:
        _tidy_connections()


def _close_connections() -> None:
    for conn in connections.all(initialized_only=True):
        conn.close()
