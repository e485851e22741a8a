"""Executor threads that run claimed jobs, and the means to interrupt one of them."""

from __future__ import annotations

import ctypes
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from django.db import connections

from django_jobs.core.outcomes import AttemptOutcome, now_us
from django_jobs.worker.execution import outcome_for_exception, query_thread, run_job

if TYPE_CHECKING:
    from django_jobs.models import Job

logger = logging.getLogger("django_jobs.worker")


class Inbox:
    """Claimed jobs waiting for a slot thread.

    A batch wakes one idle thread, not one per job: that thread runs the batch's jobs one after
    another while they are quick, and every wake of a thread the batch is spared costs more
    than a no-op job (a thread switch, the GIL handed over and back). If the jobs still waiting
    have seen no thread take one for ``DISPATCH_DELAY_SECONDS`` (the thread is in a slow job),
    the worker's loop calls ``spread`` and they go to as many idle threads, so ``--concurrency``
    jobs still run at once, each started at most that much later. Jobs that wait longer still
    (every thread is in a slow job) the loop takes back with ``take_waiting`` and hands back to
    the queue (``worker/producer.py``).
    """

    def __init__(self) -> None:
        self._jobs: deque[Job | None] = deque()
        self._ready = threading.Condition(threading.Lock())
        self._taken = 0.0  # when a thread last took a job, or jobs came to an empty inbox
        self._spread = 0.0  # when the loop last spread the waiting jobs

    def put(self, jobs: list[Job]) -> None:
        if not jobs:  # an empty claim: no thread to wake
            return
        with self._ready:
            if not self._jobs:
                self._taken = time.monotonic()
            self._jobs.extend(jobs)
            self._ready.notify()

    def get(self) -> Job | None:
        """The next job for a slot thread (None: stop); waits for one."""
        try:
            job = self._jobs.popleft()  # one waits: no lock needed, a deque's pop is atomic
        except IndexError:
            with self._ready:
                while not self._jobs:
                    self._ready.wait()
                job = self._jobs.popleft()
        self._taken = time.monotonic()
        return job

    def waiting(self) -> bool:
        """True if jobs wait for a thread (read without the lock: a hint, not a promise)."""
        return bool(self._jobs)

    def stalled_for(self, now: float) -> float | None:
        """How long the waiting jobs have seen no job taken nor spread; None if none waits."""
        return now - max(self._taken, self._spread) if self._jobs else None

    def first(self) -> Job | None:
        """The job that has waited longest (None if none waits)."""
        try:
            return self._jobs[0]
        except IndexError:
            return None

    def spread(self) -> None:
        """Wake an idle thread for each job still waiting."""
        with self._ready:
            self._spread = time.monotonic()  # the next spread, if need be, a delay later
            self._ready.notify(len(self._jobs))

    def take_waiting(self) -> list[Job]:
        """Remove and return the jobs no thread has taken (each goes to a thread or here)."""
        taken: list[Job] = []
        with self._ready:
            while self._jobs and self._jobs[0] is not None:
                try:
                    job = self._jobs.popleft()  # a thread's lock-free pop may win the last one
                except IndexError:
                    break
                if job is None:  # a stop marker: leave it
                    self._jobs.appendleft(job)
                    break
                taken.append(job)
        return taken

    def close(self, threads: int) -> None:
        """Stop ``threads`` slot threads once they are done with their jobs; jobs no thread
        took are dropped (the worker has handed them back)."""
        with self._ready:
            self._jobs.clear()
            self._jobs.extend([None] * threads)
            self._ready.notify_all()


DISPATCH_DELAY_SECONDS = 0.001


class Slot(threading.Thread):
    """One executor thread: takes jobs from ``inbox`` and hands each outcome to ``on_done``."""

    def __init__(
        self,
        inbox: Inbox,
        on_start: Callable[[Job], None],
        on_done: Callable[[AttemptOutcome], None],
        name: str,
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.inbox, self.on_start, self.on_done = inbox, on_start, on_done
        self.lock = threading.Lock()
        self.current: int | None = None
        self.abandoned = False

    def run(self) -> None:
        with query_thread(f"{self.name}-queries"):  # async handlers' queries (execution.py)
            while not self.abandoned:
                job = self.inbox.get()
                if job is None:
                    break
                self._run_one(job)
        for conn in connections.all(initialized_only=True):
            conn.close()

    def _run_one(self, job: Job) -> None:
        started = now_us()
        try:
            with self.lock:
                self.current = job.id
            self.on_start(job)
            outcome = run_job(job, started)
        except BaseException as exc:
            outcome = outcome_for_exception(job, exc, started)
            outcome.finished = now_us()
        finally:
            with self.lock:
                self.current = None
        if not self.abandoned:
            self.on_done(outcome)

    def interrupt(self, job_id: int, exc_class: type[BaseException]) -> bool:
        """Raise ``exc_class`` inside this thread if it is still running ``job_id``.

        CPython delivers it at the thread's next bytecode: a handler blocked in C code (a
        socket read, ``time.sleep``) sees it only when that call returns. An async handler's
        task is cancelled instead (``worker/async_jobs.py``).
        """
        from django_jobs.worker import async_jobs  # an async handler's, if one runs

        with self.lock:
            if self.current != job_id or self.ident is None:
                return False
            if async_jobs.interrupt(self.ident, exc_class):
                return True
            from django_jobs.worker import process_isolation  # its waits, if any

            if process_isolation.interrupt(self.ident, exc_class):
                return True
            done = ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(self.ident), ctypes.py_object(exc_class)
            )
        return done == 1
