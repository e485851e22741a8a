"""The worker's span ends on their own thread (``worker/span_ends.py``), with OpenTelemetry's
SDK: a span processor that exports in ``span.end()`` and an exporter held by the test."""

import threading
import time

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from django_jobs.core import tracing
from django_jobs.worker.span_ends import SpanEnds
from tests.observers_support import RaisingSpanProcessor

pytestmark = pytest.mark.db_independent


class HeldExporter(SpanExporter):
    """Exports to a list, each export waiting until ``release`` is set."""

    def __init__(self) -> None:
        self.exported: list[str] = []
        self.entered = threading.Event()
        self.release = threading.Event()

    def export(self, spans) -> SpanExportResult:
        self.entered.set()
        self.release.wait()
        self.exported.extend(span.name for span in spans)
        return SpanExportResult.SUCCESS


def test_a_full_queue_drops_span_ends_counted_and_never_waits(capsys):
    exporter = HeldExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    ends = SpanEnds(capacity=2)
    ends.start()
    try:
        spans = [tracer.start_span(f"span {n}") for n in range(5)]
        tracing.end(spans[0], "tracing (a test span)", "lost")
        assert exporter.entered.wait(30)  # the thread is held in the first export
        for span in spans[1:]:  # two queued, two dropped: none waits
            tracing.end(span, "tracing (a test span)", "lost")
        assert ends.dropped == 2
        handed = time.time_ns()
        assert exporter.exported == []
        exporter.release.set()
        ends.stop(time.monotonic() + 30)
    finally:
        exporter.release.set()
        tracing.end_spans_with(None)
    assert exporter.exported == ["span 0", "span 1", "span 2"]
    # A span's end time is when it was done with, not when the thread ended it
    assert spans[1].end_time <= handed
    err = capsys.readouterr().err
    assert err.count("span processors take less than it makes") == 1
    assert "2 span(s) of the worker dropped, never exported" in err
    # Stopped: a span ends at once, in the thread that is done with it
    later = tracer.start_span("later")
    tracing.end(later, "tracing (a test span)", "lost")
    assert exporter.exported[-1] == "later"


def test_without_a_worker_a_span_ends_at_once():
    exporter = HeldExporter()
    exporter.release.set()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    span = provider.get_tracer("test").start_span("alone")
    tracing.end(span, "tracing (a test span)", "lost")
    assert exporter.exported == ["alone"]


def test_a_processor_that_raises_at_the_end_is_reported_as_where_the_span_was_made(capsys):
    provider = TracerProvider()
    provider.add_span_processor(RaisingSpanProcessor("end"))
    ends = SpanEnds()
    ends.start()
    try:
        span = provider.get_tracer("test").start_span("raising")
        tracing.end(span, "tracing (ending a test's raising span)", "the test goes on")
        ends.stop(time.monotonic() + 30)
    finally:
        tracing.end_spans_with(None)
    assert not span.is_recording()  # ended, on the thread
    err = capsys.readouterr().err
    assert ("django-jobs: tracing (ending a test's raising span) raised Broken: the span "
            "processor fails at on_end; the test goes on") in err
