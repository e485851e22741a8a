"""OpenTelemetry's trace context, carried from an enqueue to the job's attempts (the ``otel``
extra: ``opentelemetry-api``; docs/howto-tracing.md).

This is the one module that imports OpenTelemetry, and only when the process traces: once
something else has imported ``opentelemetry.trace`` (a site that traces does, to configure the
SDK or to instrument Django), or when a job or a request brings a stored context. Until then no
span can be active, so an enqueue stores nothing and costs a dictionary lookup; a process that
never traces never pays the import. Without the package every function here does nothing.

The spans this package ends (an enqueue's, an attempt's) are ended by ``end``: at once, or,
while a worker runs in the process, on a thread of the worker's (``worker/span_ends.py``), so
that a span processor that exports as a span ends (``SimpleSpanProcessor``) cannot hold the
worker's loop, a finish's transaction or a job's thread while its exporter waits.

A context is stored as the W3C Trace Context headers, ``traceparent`` and, when there is one,
``tracestate``, in a compact JSON object (the job's ``trace_context`` column).

The names and attributes follow OpenTelemetry's messaging semantic conventions: the enqueue is
a ``send`` (a PRODUCER span), an attempt a ``process`` (a CONSUMER span, ``worker/tracing.py``),
the destination is the queue.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

from django_jobs.core import observers

TRACER_NAME = "django_jobs"
SYSTEM = "django_jobs"  # messaging.system
TYPE = "django_jobs.job.type"
ATTEMPT = "django_jobs.job.attempt"
OUTCOME = "django_jobs.job.outcome"

# The loaded API (a namespace of what this package uses of it), False if it cannot be imported,
# None until it is needed
_api: Any = None


def api(load: bool = False) -> Any:
    """OpenTelemetry's API, or None: when it is not installed, or (``load`` false) when nothing
    in this process has imported it yet, so that no span can be active."""
    global _api
    if _api is not None:
        return _api or None
    if not load and "opentelemetry.trace" not in sys.modules:
        return None
    try:
        from opentelemetry import context, trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
    except ImportError:
        _api = False
        return None
    _api = SimpleNamespace(
        trace=trace, context=context, propagator=TraceContextTextMapPropagator(),
        tracer=trace.get_tracer(TRACER_NAME), Context=context.Context,
        SpanKind=trace.SpanKind, Link=trace.Link, Status=trace.Status,
        ERROR=trace.StatusCode.ERROR, proxy=trace.ProxyTracerProvider,
    )
    return _api


# What ends a recording span that this package made: None to end it at once, here
_ender: Callable[[Any, str, str], None] | None = None


def end_spans_with(ender: Callable[[Any, str, str], None] | None) -> None:
    """Have ``ender(span, what, then)`` end the recording spans this package makes from now
    on, reporting a failure as ``observers.report(what, exc, then)`` (None: end each at once,
    in the thread that is done with it)."""
    global _ender
    _ender = ender


def end(span: Any, what: str, then: str) -> None:
    """End ``span``, now or by the ender set (``end_spans_with``); a span that records
    nothing ends at once, as its end does nothing. Ended now, what it raises is raised; by
    the ender, reported as ``what`` (``core/observers.py``)."""
    ender = _ender
    if ender is None or not span.is_recording():
        span.end()
    else:
        ender(span, what, then)


def traces(otel: Any) -> bool:
    """True if a tracer provider is configured (an SDK's), not the API's stand-in."""
    return not isinstance(otel.trace.get_tracer_provider(), otel.proxy)


def dumps(span_context: Any) -> str | None:
    """A span's context as stored with a job, or None if it is not a valid context."""
    if not span_context.is_valid:
        return None
    trace_id, span_id = span_context.trace_id, span_context.span_id
    carrier = {"traceparent": f"00-{trace_id:032x}-{span_id:016x}-{span_context.trace_flags:02x}"}
    state = span_context.trace_state.to_header() if span_context.trace_state else ""
    if state:
        carrier["tracestate"] = state
    return json.dumps(carrier, separators=(",", ":"))


def loads(otel: Any, stored: str | None) -> Any:
    """The span context stored with a job, or None (nothing stored, or not a trace context)."""
    if not stored:
        return None
    try:
        carrier = json.loads(stored)
    except ValueError:
        return None
    if not isinstance(carrier, dict):
        return None
    span_context = otel.trace.get_current_span(otel.propagator.extract(carrier)).get_span_context()
    return span_context if span_context.is_valid else None


def current() -> str | None:
    """The active span's context, as stored with a job; None when no span is active (or the
    tracer raised: reported once)."""
    otel = api()
    if otel is None:
        return None
    try:
        return dumps(otel.trace.get_current_span().get_span_context())
    except Exception as exc:
        observers.report("tracing (reading the active span)", exc, _UNTRACED)
        return None


@contextmanager
def attached(stored: str | None) -> Iterator[None]:
    """Run the block with a stored context as the active one (nothing stored: as it is), so
    that what it enqueues continues that trace: the follow-ups and callbacks of an attempt."""
    token = None
    otel = None
    try:
        otel = api(load=True) if stored else None
        span_context = loads(otel, stored) if otel is not None else None
        if otel is not None and span_context is not None:
            token = otel.context.attach(
                otel.trace.set_span_in_context(otel.trace.NonRecordingSpan(span_context)))
    except Exception as exc:
        observers.report("tracing (attaching a job's trace context)", exc, _UNTRACED)
    try:
        yield
    finally:
        if token is not None:
            _detach(otel, token)


def _detach(otel: Any, token: Any) -> None:
    try:
        otel.context.detach(token)
    except Exception as exc:
        observers.report("tracing (detaching a trace context)", exc, _UNTRACED)


@contextmanager
def from_headers(headers: Mapping[str, str]) -> Iterator[None]:
    """Run the block in the trace a request's ``traceparent``/``tracestate`` headers name,
    unless a span is already active (an instrumented site's request span, itself their child)."""
    token = None
    otel = None
    try:
        traceparent = headers.get("traceparent")
        otel = api(load=True) if traceparent else None
        if otel is not None and not otel.trace.get_current_span().get_span_context().is_valid:
            carrier = {"traceparent": traceparent}
            if headers.get("tracestate"):
                carrier["tracestate"] = headers["tracestate"]
            token = otel.context.attach(otel.propagator.extract(carrier))
    except Exception as exc:
        observers.report("tracing (reading a request's trace headers)", exc, _UNTRACED)
    try:
        yield
    finally:
        if token is not None:
            _detach(otel, token)


class Sending:
    """An enqueue's span: ``stored`` is the context its jobs carry (None: no active span,
    nothing stored), ``sent(job_id)`` names the job a single enqueue inserted."""

    __slots__ = ("span", "stored")

    def __init__(self, span: Any = None, stored: str | None = None) -> None:
        self.span = span
        self.stored = stored

    def sent(self, job_id: str) -> None:
        """The one job an enqueue inserted (its id names the message)."""
        if self.span is None:
            return
        try:
            if self.span.is_recording():
                self.span.set_attribute("messaging.message.id", job_id)
        except Exception as exc:
            observers.report("tracing (naming an enqueue's job)", exc, _UNTRACED)


_NOT_TRACED = Sending()
_UNTRACED = "the enqueue or job goes on as without it, untraced"
_ENDING = "tracing (ending an enqueue's span)"


@contextmanager
def sending(type: str, queue: object, count: int) -> Iterator[Sending]:
    """The PRODUCER span of an enqueue of ``count`` jobs, a child of the active span; with no
    active span, no span and nothing to store. A tracer that raises leaves the enqueue as
    without it: no span, nothing stored (reported once: ``core/observers.py``)."""
    otel = api()
    if otel is None:
        yield _NOT_TRACED
        return
    try:
        started = _start_sending(otel, type, queue, count)
    except Exception as exc:
        observers.report("tracing (starting an enqueue's span)", exc, _UNTRACED)
        started = _NOT_TRACED
    span = started.span
    if span is None:
        yield started
        return
    try:
        yield started
    except BaseException as exc:
        try:
            if span.is_recording():
                span.record_exception(exc)
                span.set_attribute("error.type", type_name(exc))
                span.set_status(otel.Status(otel.ERROR, str(exc)[:200]))
        except Exception as failure:
            observers.report("tracing (recording an enqueue's error)", failure, _UNTRACED)
        raise
    finally:
        try:
            end(span, _ENDING, _UNTRACED)
        except Exception as exc:
            observers.report(_ENDING, exc, _UNTRACED)


def _start_sending(otel: Any, type: str, queue: object, count: int) -> Sending:
    parent = otel.trace.get_current_span().get_span_context()
    if not parent.is_valid:
        return _NOT_TRACED
    attributes: dict[str, Any] = {
        "messaging.system": SYSTEM,
        "messaging.operation.type": "send",
        "messaging.operation.name": "send",
        "messaging.destination.name": str(queue),
        TYPE: type,
    }
    if count != 1:
        attributes["messaging.batch.message_count"] = count
    span = otel.tracer.start_span(
        f"send {queue}", kind=otel.SpanKind.PRODUCER, attributes=attributes)
    try:
        return Sending(span, dumps(span.get_span_context()))
    except Exception:
        span.end()
        raise


def type_name(exc: BaseException) -> str:
    """An exception's class as ``error.type`` names it: module and qualified name."""
    cls = type(exc)
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"
