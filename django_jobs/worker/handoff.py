"""What the worker hands to a thread of its own while it runs: its log records and the
``job_finished`` signal. A log handler or a receiver that blocks (a socket to a dead collector,
a full disk) or raises cannot stall nor break the loop that claims, beats the heart and writes
the outcomes, nor a slot thread: observability cannot cost a lease.

The package's loggers (``LOGGERS``) get a filter that puts each record on a bounded queue and
drops it where it was made; the ``django-jobs-observe`` thread hands each to its logger's
handlers, in order, as the logger would have. The site's logging configuration is not changed,
and records of other loggers (the handlers' own) are left where they are made. The loop's
``job_finished`` sends go on the same queue (``call``), one item per turn, and reach their
receivers in the order the outcomes were written, on that thread (whose database connections
are closed when unusable, as a request's are). A queue that is full (the handlers or receivers
take less than the worker makes) drops what comes, rather than wait, and says so once on
standard error; a handler or receiver that raises is reported once (``core/observers.py``). At
the worker's end what is still queued is handled, for at most ``FLUSH_SECONDS``.

The ends of the worker's spans have a thread of their own (``span_ends.py``), started and
stopped with this one when OpenTelemetry is loaded as the worker starts (a site that traces sets
its SDK up before): an exporter that waits holds neither the log records nor the sends.
"""

from __future__ import annotations

import logging
import queue
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import connections

from django_jobs.core import observers

if TYPE_CHECKING:
    from django_jobs.worker.span_ends import SpanEnds

LOGGERS = ("django_jobs.worker", "django_jobs.clock", "django_jobs.pooler",
           "django_jobs.observers")
CAPACITY = 10_000  # records and calls queued at most: some seconds of a busy worker's
FLUSH_SECONDS = 5.0

Item = logging.LogRecord | tuple[Callable[..., Any], tuple[Any, ...]] | None


class Handoff(logging.Filter):
    """The filter and its thread; ``start`` and ``stop`` pair up (workers in one process
    share it: the last ``stop`` ends the thread)."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        super().__init__()
        self.capacity = capacity
        self.records: queue.Queue[Item] = queue.Queue(capacity)
        self.thread: threading.Thread | None = None
        self.users = 0
        self.dropped = 0
        self.lock = threading.Lock()
        self.spans: SpanEnds | None = None  # started with the thread (span_ends.py)

    def start(self) -> None:
        with self.lock:
            self.users += 1
            if self.users > 1:
                return
            self.records = queue.Queue(self.capacity)
            self.thread = threading.Thread(target=self._work, args=(self.records,),
                                           name="django-jobs-observe", daemon=True)
            self.thread.start()
            for name in LOGGERS:
                logging.getLogger(name).addFilter(self)
            if "opentelemetry.trace" in sys.modules:  # spans can be made (span_ends.py)
                from django_jobs.worker.span_ends import span_ends

                self.spans = span_ends
                span_ends.start()

    def stop(self, timeout: float = FLUSH_SECONDS) -> None:
        """Stop handing records and span ends off, and write and end those queued, for at
        most ``timeout`` in all."""
        deadline = time.monotonic() + timeout
        with self.lock:
            if self.users == 0:
                return
            self.users -= 1
            if self.users:
                return
            for name in LOGGERS:
                logging.getLogger(name).removeFilter(self)
            thread, records, self.thread = self.thread, self.records, None
            spans, self.spans = self.spans, None
        if thread is None:
            return
        try:
            records.put(None, timeout=max(0.0, deadline - time.monotonic()))
        except queue.Full:
            pass
        if spans is not None:
            spans.stop(deadline)  # meanwhile, the records are written
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            observers.write_stderr(
                f"django-jobs: {records.qsize()} log record(s) or job_finished send(s) of the "
                f"worker left: its log handlers or receivers did not take them within "
                f"{timeout:.0f} s")

    def filter(self, record: logging.LogRecord) -> bool:
        if threading.current_thread() is self.thread:
            return True  # the thread writing it: on to the logger's handlers
        self._put(record)
        return False

    def call(self, func: Callable[..., Any], *args: Any) -> None:
        """Call ``func(*args)`` on the thread, after what is queued (at once, here, while no
        worker runs); what it raises is its own to report."""
        if self.thread is None:
            func(*args)
        else:
            self._put((func, args))

    def _put(self, item: Item) -> None:
        try:
            self.records.put_nowait(item)
        except queue.Full:
            self.dropped += 1
            if self.dropped == 1:
                observers.write_stderr(
                    f"django-jobs: the worker's log handlers or job_finished receivers take "
                    f"less than it makes ({self.capacity} queued): what comes is dropped until "
                    "they catch up (said once per process)")

    def _work(self, records: queue.Queue[Item]) -> None:
        try:
            while (item := records.get()) is not None:
                if isinstance(item, logging.LogRecord):
                    try:
                        logging.getLogger(item.name).handle(item)
                    except Exception as exc:
                        observers.report(f"logging (a handler of the {item.name} logger)", exc,
                                         "the record is lost; the worker goes on")
                else:
                    func, args = item
                    try:
                        func(*args)
                    except Exception as exc:
                        observers.report(f"{observers.receiver_name(func)}, handed off the "
                                         "worker's loop", exc, "the worker goes on")
                    for conn in connections.all(initialized_only=True):
                        conn.close_if_unusable_or_obsolete()
                del item
        finally:
            if settings.configured:  # what the thread opened, if a receiver or handler did
                for conn in connections.all(initialized_only=True):
                    conn.close()


handoff = Handoff()
