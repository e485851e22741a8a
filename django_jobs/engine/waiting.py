"""Waiting for a job's end (``Job.wait``, ``Job.await_result``): its result, its error, or a
timeout.

A waiter reads the job's row until it has ended (completed, dead or canceled; a failed job
will be retried, so the wait goes on). Between two reads it sleeps, each pause longer than the
last (``FIRST_PAUSE`` growing to ``POLL_CAP``), unless it is woken: where the database can
notify (PostgreSQL reached directly or through a session pooler) one listener per process and
database hears the workers' finishes and wakes the waiters of the jobs that finished
(``engine/postgres/finish_notes.py``), and the pauses then grow to ``NOTIFIED_CAP``, a
safety net for a notification lost (the listener reconnecting, a job ended by an action
rather than a worker). Elsewhere (MariaDB, SQLite, a transaction pooler) the reads are the
wait.

Each read is one primary-key lookup on the job's own database, never a read replica: a
replica behind the primary would hold the job's end back.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from asgiref.sync import sync_to_async
from django.db import connections

from django_jobs.core.states import CANCELED, COMPLETED, DEAD
from django_jobs.exceptions import JobFailed, WaitInTransaction, WaitTimeout

if TYPE_CHECKING:
    from django_jobs.core.json_rules import JSONValue
    from django_jobs.models import Job

ENDED = (COMPLETED, DEAD, CANCELED)
# The first pause between two reads, in seconds; each next one is GROWTH times longer, up to
# POLL_CAP, or NOTIFIED_CAP while a listener hears the finishes.
FIRST_PAUSE = 0.05
GROWTH = 1.5
POLL_CAP = 1.0
NOTIFIED_CAP = 5.0
FIELDS = ("status", "result", "error", "attempt", "started_at", "finished_at", "updated_at")


class Wakeups:
    """The waiters of one process on one database, by job id: ``poke`` wakes those of the
    jobs named (all of them for None). The portable one is never poked: its waiters read on
    their own. ``listening``: whether finishes reach ``poke`` (then reads may be rarer)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watchers: dict[int, set[Callable[[], None]]] = {}

    @property
    def listening(self) -> bool:
        return False

    def started(self) -> None:
        """Called as a waiter begins: a subclass starts hearing finishes here."""

    @contextlib.contextmanager
    def watching(self, job_id: int, poke: Callable[[], None]) -> Iterator[None]:
        with self._lock:
            self._watchers.setdefault(job_id, set()).add(poke)
        try:
            self.started()
            yield
        finally:
            with self._lock:
                pokes = self._watchers.get(job_id)
                if pokes is not None:
                    pokes.discard(poke)
                    if not pokes:
                        del self._watchers[job_id]

    def watched(self) -> int:
        """How many jobs this process waits for."""
        with self._lock:
            return len(self._watchers)

    def poke(self, ids: Iterable[int] | None) -> None:
        with self._lock:
            if ids is None:
                pokes = [p for found in self._watchers.values() for p in found]
            else:
                pokes = [p for i in ids for p in self._watchers.get(i, ())]
        for poke in pokes:
            try:
                poke()
            except Exception:  # noqa: S110 an event loop closed under a waiter: nothing to wake
                pass


def check_timeout(timeout: float | None) -> float | None:
    """``timeout`` as seconds (None: no limit); ValueError for a negative or not-a-number."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or \
            math.isnan(timeout) or timeout < 0:
        raise ValueError(f"timeout must be a number of seconds, 0 or more, or None, "
                         f"not {timeout!r}")
    return float(timeout)


def refuse_in_transaction(job: Job, using: str) -> None:
    """Raise ``WaitInTransaction`` inside an atomic block on ``using`` (see its docstring)."""
    if connections[using].in_atomic_block:
        raise WaitInTransaction(
            f"Job.wait() inside a transaction on database {using!r}: job {job.public_id} "
            "would not be seen by a worker (if this transaction enqueued it) nor its end by "
            "this transaction until it commits; wait after the commit "
            "(transaction.on_commit, or outside atomic())")


def read(job: Job, using: str, first: bool) -> bool:
    """Read the job's row into ``job``; True once it has ended. Raises ``Job.DoesNotExist``
    if the job was deleted."""
    if first:
        refuse_in_transaction(job, using)
    row = type(job).objects.using(using).filter(pk=job.pk).values(*FIELDS).first()
    if row is None:
        raise type(job).DoesNotExist(f"job {job.public_id} was deleted while waited for")
    for name, value in row.items():
        setattr(job, name, value)
    return row["status"] in ENDED


def outcome(job: Job) -> JSONValue:
    """The ended job's result, or ``JobFailed``."""
    if job.status == COMPLETED:
        return job.result
    raise JobFailed(job, job.status, job.error if isinstance(job.error, dict) else None)


def _pauses(wakeups: Wakeups) -> Iterator[float]:
    pause = FIRST_PAUSE
    while True:
        yield pause
        pause = min(pause * GROWTH, NOTIFIED_CAP if wakeups.listening else POLL_CAP)


def wait(job: Job, using: str, timeout: float | None, wakeups: Wakeups) -> JSONValue:
    """Block until ``job`` ends; see ``Job.wait``."""
    limit = check_timeout(timeout)
    deadline = None if limit is None else time.monotonic() + limit
    woken = threading.Event()
    first = True
    with wakeups.watching(job.pk, woken.set):
        for pause in _pauses(wakeups):
            woken.clear()  # before the read: a finish heard during it wakes the next pause
            if read(job, using, first):
                return outcome(job)
            first = False
            left = math.inf if deadline is None else deadline - time.monotonic()
            if left <= 0:
                raise WaitTimeout(f"job {job.public_id} had not ended after {limit:g} s "
                                  f"(it is {job.status})")
            woken.wait(min(pause, left))
    raise AssertionError("unreachable")  # pragma: no cover


async def await_result(job: Job, using: str, timeout: float | None, wakeups: Wakeups
                       ) -> JSONValue:
    """``wait`` for async code: the reads run as Django's async ORM runs queries
    (``sync_to_async``, thread-sensitive, so the transaction check sees the caller's
    connection); between them the coroutine sleeps on the event loop, holding no thread."""
    limit = check_timeout(timeout)
    deadline = None if limit is None else time.monotonic() + limit
    loop = asyncio.get_running_loop()
    woken = asyncio.Event()
    reading = sync_to_async(read)
    first = True

    def poke() -> None:  # from the listener's thread
        loop.call_soon_threadsafe(woken.set)

    with wakeups.watching(job.pk, poke):
        for pause in _pauses(wakeups):
            woken.clear()
            if await reading(job, using, first):
                return outcome(job)
            first = False
            left = math.inf if deadline is None else deadline - time.monotonic()
            if left <= 0:
                raise WaitTimeout(f"job {job.public_id} had not ended after {limit:g} s "
                                  f"(it is {job.status})")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(woken.wait(), min(pause, left))
    raise AssertionError("unreachable")  # pragma: no cover
