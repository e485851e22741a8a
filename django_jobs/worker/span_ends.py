"""The ends of the spans the worker makes, on a thread of their own: an attempt's span, and the
enqueue spans of what a handler or a finish enqueues in a trace (the handler's enqueues, its
follow-ups, the completion callbacks' deliveries).

A span's end runs the span processors' ``on_end``; OpenTelemetry's ``SimpleSpanProcessor``
exports there, in the thread that ends the span, and waits as long as its exporter waits (a
collector that does not answer). Ended where they are made, the spans of a finish's writes
would hold the worker's loop inside the finish's transaction (and its row locks), and an
attempt's span its job's thread, for that long. While a worker runs, ``core/tracing.py`` hands
each recording span to this module instead: the span is put on a bounded queue with the time
it was done with (its end time, as the SDK would have stamped it), and the
``django-jobs-spans`` thread ends it there, in order. Nothing else waits on that thread: the
log records and ``job_finished`` sends have theirs (``handoff.py``), so an exporter that waits
delays neither, nor does a slow log handler delay the spans.

A queue that is full (the exporter takes less than the worker makes) drops the span end that
comes, rather than wait: that span is never exported. The first drop is said on standard error,
and the count of the dropped at the worker's end. A span processor that raises at the end is
reported once, as it would be where the span was made (``core/observers.py``). At the worker's
end what is queued is ended, within the time ``handoff.stop`` gives.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any

from django_jobs.core import observers, tracing
from django_jobs.worker.handoff import PairedThread

CAPACITY = 10_000  # span ends queued at most: some seconds of a busy worker's

# A span, its end time (ns since the epoch) and how to report its end's failure; None: stop
Item = tuple[Any, int, str, str] | None


class SpanEnds(PairedThread):
    """The queue and its thread (``handoff.PairedThread``), started and stopped with the log
    records' (``Handoff.start``'s companion)."""

    thread_name = "django-jobs-spans"

    def __init__(self, capacity: int = CAPACITY) -> None:
        super().__init__(capacity)

    def started(self) -> None:
        self.dropped = 0
        tracing.end_spans_with(self.end)

    def stopping(self) -> None:
        tracing.end_spans_with(None)

    def stop(self, deadline: float) -> None:
        """End the spans still queued, until ``deadline`` (``time.monotonic()``); those left
        are said on standard error. Spans ended from now on end at once."""
        released = self.release(deadline)
        if released is None:
            return
        alive = self.finish(released, deadline)
        if self.dropped:
            observers.write_stderr(
                f"django-jobs: {self.dropped} span(s) of the worker dropped, never exported: "
                f"its span processors did not keep up ({self.capacity} span ends queued)")
        if alive:
            observers.write_stderr(
                f"django-jobs: {released[1].qsize()} span(s) of the worker left unended, never "
                "exported: its span processors did not take them before it stopped")

    def end(self, span: Any, what: str, then: str) -> None:
        """Have the thread end ``span``, as if now, reporting a failure as ``what`` and
        ``then`` (``core/observers.py``); at once if this is the thread."""
        if threading.current_thread() is self.thread:
            span.end()
            return
        if not self.offer((span, time.time_ns(), what, then)):
            if self.dropped == 1:
                observers.write_stderr(
                    f"django-jobs: the worker's span processors take less than it makes "
                    f"({self.capacity} span ends queued): the spans that come are dropped, "
                    "never exported, until they catch up (said once; the count at the end)")

    def work(self, spans: queue.Queue[Item]) -> None:
        while (item := spans.get()) is not None:
            span, end_time, what, then = item
            try:
                span.end(end_time=end_time)
            except Exception as exc:
                observers.report(what, exc, then)
            del item, span


span_ends = SpanEnds()
