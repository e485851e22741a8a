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

CAPACITY = 10_000  # span ends queued at most: some seconds of a busy worker's

# A span, its end time (ns since the epoch) and how to report its end's failure; None: stop
Item = tuple[Any, int, str, str] | None


class SpanEnds:
    """The queue and its thread, started and stopped by ``handoff.py``'s ``start`` and
    ``stop``; these pair up (the last ``stop`` ends the thread)."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        self.capacity = capacity
        self.spans: queue.Queue[Item] = queue.Queue(capacity)
        self.thread: threading.Thread | None = None
        self.dropped = 0
        self.users = 0
        self.lock = threading.Lock()

    def start(self) -> None:
        with self.lock:
            self.users += 1
            if self.users > 1:
                return
            self.spans = queue.Queue(self.capacity)
            self.dropped = 0
            self.thread = threading.Thread(target=self._work, args=(self.spans,),
                                           name="django-jobs-spans", daemon=True)
            self.thread.start()
            tracing.end_spans_with(self.end)

    def stop(self, deadline: float) -> None:
        """End the spans still queued, until ``deadline`` (``time.monotonic()``); those left
        are said on standard error. Spans ended from now on end at once."""
        with self.lock:
            if self.users == 0:
                return
            self.users -= 1
            if self.users:
                return
            tracing.end_spans_with(None)
            thread, spans, self.thread = self.thread, self.spans, None
        if thread is None:
            return
        try:
            spans.put(None, timeout=max(0.0, deadline - time.monotonic()))
        except queue.Full:
            pass
        thread.join(max(0.0, deadline - time.monotonic()))
        if self.dropped:
            observers.write_stderr(
                f"django-jobs: {self.dropped} span(s) of the worker dropped, never exported: "
                f"its span processors did not keep up ({self.capacity} span ends queued)")
        if thread.is_alive():
            observers.write_stderr(
                f"django-jobs: {spans.qsize()} span(s) of the worker left unended, never "
                "exported: its span processors did not take them before it stopped")

    def end(self, span: Any, what: str, then: str) -> None:
        """Have the thread end ``span``, as if now, reporting a failure as ``what`` and
        ``then`` (``core/observers.py``); at once if this is the thread."""
        if threading.current_thread() is self.thread:
            span.end()
            return
        try:
            self.spans.put_nowait((span, time.time_ns(), what, then))
        except queue.Full:
            self.dropped += 1
            if self.dropped == 1:
                observers.write_stderr(
                    f"django-jobs: the worker's span processors take less than it makes "
                    f"({self.capacity} span ends queued): the spans that come are dropped, "
                    "never exported, until they catch up (said once; the count at the end)")

    def _work(self, spans: queue.Queue[Item]) -> None:
        while (item := spans.get()) is not None:
            span, end_time, what, then = item
            try:
                span.end(end_time=end_time)
            except Exception as exc:
                observers.report(what, exc, then)
            del item, span


span_ends = SpanEnds()
