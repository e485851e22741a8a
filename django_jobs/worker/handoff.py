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
stopped with this one as its companion when OpenTelemetry is loaded as the worker starts (a site
that traces sets its SDK up before): an exporter that waits holds neither the log records nor
the sends. Both are a ``PairedThread``.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import connections

from django_jobs.core import observers

LOGGERS = ("django_jobs.worker", "django_jobs.clock", "django_jobs.pooler",
           "django_jobs.observers")
CAPACITY = 10_000  # records and calls queued at most: some seconds of a busy worker's
FLUSH_SECONDS = 5.0

Item = logging.LogRecord | tuple[Callable[..., Any], tuple[Any, ...]] | None


class PairedThread:
    """A daemon thread of the worker's, fed by a bounded queue (``offer``). ``start`` and
    ``stop`` pair up: the workers of a process share it, the first ``start`` makes the thread
    (``started`` routes work to it) and the last ``stop`` ends it (``stopping`` routes work back)
    after what is queued, until a deadline. ``work`` takes the items until ``None``."""

    thread_name = "django-jobs"

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.items: queue.Queue[Any] = queue.Queue(capacity)
        self.thread: threading.Thread | None = None
        self.users = 0
        self.dropped = 0  # items the full queue refused
        self.lock = threading.RLock()

    def start(self) -> None:
        with self.lock:
            self.users += 1
            if self.users > 1:
                return
            self.items = queue.Queue(self.capacity)
            self.thread = threading.Thread(target=self.work, args=(self.items,),
                                           name=self.thread_name, daemon=True)
            self.thread.start()
            self.started()

    def started(self) -> None:
        """Route work to the thread (under the lock, at the first ``start``)."""

    def stopping(self) -> None:
        """Route work back (under the lock, at the last ``stop``)."""

    def work(self, items: queue.Queue[Any]) -> None:
        raise NotImplementedError

    def release(self, deadline: float) -> tuple[threading.Thread, queue.Queue[Any]] | None:
        """The last ``stop``'s first half: route nothing more to the thread and queue its end
        (waiting until ``deadline``, ``time.monotonic()``, for room); the thread and its queue,
        for ``finish``. None for another ``stop``."""
        with self.lock:
            if self.users == 0:
                return None
            self.users -= 1
            if self.users:
                return None
            self.stopping()
            thread, items, self.thread = self.thread, self.items, None
        if thread is None:
            return None
        try:
            items.put(None, timeout=max(0.0, deadline - time.monotonic()))
        except queue.Full:
            pass
        return thread, items

    @staticmethod
    def finish(released: tuple[threading.Thread, queue.Queue[Any]], deadline: float) -> bool:
        """Wait until ``deadline`` for the released thread to end; True if it has not."""
        thread, _items = released
        thread.join(max(0.0, deadline - time.monotonic()))
        return thread.is_alive()

    def stop(self, deadline: float) -> None:
        """Pairs with ``start``: the last one ends the thread after what is queued, waiting
        until ``deadline`` at most."""
        released = self.release(deadline)
        if released is not None:
            self.finish(released, deadline)

    def offer(self, item: Any) -> bool:
        """Queue ``item`` for the thread without waiting; False (counted) if the queue is full."""
        try:
            self.items.put_nowait(item)
        except queue.Full:
            self.dropped += 1
            return False
        return True


class Handoff(PairedThread, logging.Filter):
    """The filter and its thread (see the module's docstring). A companion thread, the span
    ends' (``span_ends.py``), starts and stops with it."""

    thread_name = "django-jobs-observe"

    def __init__(self, capacity: int = CAPACITY) -> None:
        PairedThread.__init__(self, capacity)
        logging.Filter.__init__(self)
        self.companion: PairedThread | None = None  # started with the thread
        self._offered: PairedThread | None = None
        self._ending: PairedThread | None = None  # stopped with it

    def start(self, companion: PairedThread | None = None) -> None:
        """Start handing records off; ``companion`` starts with the thread (at the first
        ``start``) and stops with it."""
        with self.lock:
            self._offered = companion
            super().start()
            self._offered = None

    def started(self) -> None:
        for name in LOGGERS:
            logging.getLogger(name).addFilter(self)
        self.companion = self._offered
        if self.companion is not None:
            self.companion.start()

    def stopping(self) -> None:
        for name in LOGGERS:
            logging.getLogger(name).removeFilter(self)
        self._ending, self.companion = self.companion, None

    def stop(self, timeout: float = FLUSH_SECONDS) -> None:
        """Stop handing records and span ends off, and write and end those queued, for at
        most ``timeout`` in all."""
        deadline = time.monotonic() + timeout
        released = self.release(deadline)
        if released is None:
            return
        companion, self._ending = self._ending, None
        if companion is not None:
            companion.stop(deadline)  # meanwhile, the records are written
        if self.finish(released, deadline):
            observers.write_stderr(
                f"django-jobs: {released[1].qsize()} log record(s) or job_finished send(s) of "
                f"the worker left: its log handlers or receivers did not take them within "
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
        if not self.offer(item):
            if self.dropped == 1:
                observers.write_stderr(
                    f"django-jobs: the worker's log handlers or job_finished receivers take "
                    f"less than it makes ({self.capacity} queued): what comes is dropped until "
                    "they catch up (said once per process)")

    def work(self, records: queue.Queue[Item]) -> None:
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
