"""The worker's log records, handed to a thread of their own while it runs: a log handler that
blocks (a socket to a dead collector, a full disk) or raises cannot stall nor break the loop
that claims, beats the heart and writes the outcomes, nor a slot thread.

The package's loggers (``LOGGERS``) get a filter that puts each record on a bounded queue and
drops it where it was made; the ``django-jobs-log`` thread hands each to its logger's handlers,
in order, as the logger would have. The site's logging configuration is not changed, and
records of other loggers (the handlers' own) are left where they are made. A queue that is full
(the handlers take less than the worker makes) drops what comes, rather than wait, and says so
once on standard error; a handler that raises is reported once (``core/observers.py``). At the
worker's end the records still queued are written, for at most ``FLUSH_SECONDS``.
"""

from __future__ import annotations

import logging
import queue
import threading

from django_jobs.core import observers

LOGGERS = ("django_jobs.worker", "django_jobs.clock", "django_jobs.pooler",
           "django_jobs.observers")
CAPACITY = 10_000  # records queued at most: some seconds of a busy worker's lines
FLUSH_SECONDS = 5.0


class LogHandoff(logging.Filter):
    """The filter and its thread; ``start`` and ``stop`` pair up (workers in one process
    share it: the last ``stop`` ends the thread)."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        super().__init__()
        self.capacity = capacity
        self.records: queue.Queue[logging.LogRecord | None] = queue.Queue(capacity)
        self.thread: threading.Thread | None = None
        self.users = 0
        self.dropped = 0
        self.lock = threading.Lock()

    def start(self) -> None:
        with self.lock:
            self.users += 1
            if self.users > 1:
                return
            self.records = queue.Queue(self.capacity)
            self.thread = threading.Thread(target=self._write, args=(self.records,),
                                           name="django-jobs-log", daemon=True)
            self.thread.start()
            for name in LOGGERS:
                logging.getLogger(name).addFilter(self)

    def stop(self, timeout: float = FLUSH_SECONDS) -> None:
        """Stop handing records off, and write those queued, for at most ``timeout``."""
        with self.lock:
            if self.users == 0:
                return
            self.users -= 1
            if self.users:
                return
            for name in LOGGERS:
                logging.getLogger(name).removeFilter(self)
            thread, records, self.thread = self.thread, self.records, None
        if thread is None:
            return
        try:
            records.put(None, timeout=timeout)
        except queue.Full:
            pass
        thread.join(timeout)
        if thread.is_alive():
            observers.write_stderr(
                f"django-jobs: {records.qsize()} log record(s) of the worker not written: its "
                f"log handlers did not take them within {timeout:.0f} s")

    def filter(self, record: logging.LogRecord) -> bool:
        if threading.current_thread() is self.thread:
            return True  # the thread writing it: on to the logger's handlers
        try:
            self.records.put_nowait(record)
        except queue.Full:
            self.dropped += 1
            if self.dropped == 1:
                observers.write_stderr(
                    f"django-jobs: the worker's log handlers take less than it logs "
                    f"({self.capacity} records queued): its log records are dropped until they "
                    "catch up (said once per process)")
        return False

    def _write(self, records: queue.Queue[logging.LogRecord | None]) -> None:
        while (record := records.get()) is not None:
            try:
                logging.getLogger(record.name).handle(record)
            except Exception as exc:
                observers.report(f"logging (a handler of the {record.name} logger)", exc,
                                 "the record is lost; the worker goes on")
            del record


handoff = LogHandoff()
