"""Executor threads that run claimed jobs, and the means to interrupt one of them."""

from __future__ import annotations

import ctypes
import logging
import queue
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from django.db import connections
from django.utils import timezone

from .execution import outcome_for_exception, run_job
from .outcomes import AttemptOutcome

if TYPE_CHECKING:
    from .models import Job

logger = logging.getLogger("django_jobs.worker")


class Slot(threading.Thread):
    """One executor thread: takes jobs from ``inbox`` and hands each outcome to ``on_done``."""

    def __init__(
        self,
        inbox: queue.SimpleQueue[Job | None],
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
        while not self.abandoned:
            job = self.inbox.get()
            if job is None:
                break
            self._run_one(job)
        for conn in connections.all(initialized_only=True):
            conn.close()

    def _run_one(self, job: Job) -> None:
        started_at = timezone.now()
        try:
            with self.lock:
                self.current = job.pk
            self.on_start(job)
            outcome = run_job(job)
        except BaseException as exc:
            outcome = outcome_for_exception(job, exc, started_at)
            outcome.finished_at = timezone.now()
        finally:
            with self.lock:
                self.current = None
        if not self.abandoned:
            self.on_done(outcome)

    def interrupt(self, job_id: int, exc_class: type[BaseException]) -> bool:
        """Raise ``exc_class`` inside this thread if it is still running ``job_id``.

        CPython delivers it at the thread's next bytecode: a handler blocked in C code (a
        socket read, ``time.sleep``) sees it only when that call returns.
        """
        with self.lock:
            if self.current != job_id or self.ident is None:
                return False
            done = ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(self.ident), ctypes.py_object(exc_class)
            )
        return done == 1
