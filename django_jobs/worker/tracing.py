"""An attempt's span: one CONSUMER span per attempt, named and attributed after OpenTelemetry's
messaging semantic conventions (``process <queue>``), active while the handler runs, so that
what the handler enqueues continues its trace (``core/tracing.py`` holds the API).

The first attempt's span is a child of the enqueue's span (the context stored with the job).
A later attempt (a retry, or a run after a crash) starts a trace of its own, linked to the
enqueue's span: a retry may come hours after the enqueue, and a trace that stays open that long
is cut by the tracing backends' trace windows and sampled as one, where each attempt is a unit
of work of its own (docs/howto-tracing.md).

Nothing is done for a job without a stored context in a process without a tracer provider.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django_jobs.core import observers, tracing
from django_jobs.core.states import Outcome

if TYPE_CHECKING:
    from django_jobs.core.outcomes import AttemptOutcome
    from django_jobs.models import Job


_ENDING = "tracing (ending an attempt's span)"
_OUTCOME_STANDS = "the job's outcome stands as without it"


class AttemptSpan:
    """The span of one attempt, active in the slot thread until ``end``."""

    __slots__ = ("active", "otel", "span", "token")

    def __init__(self, otel: Any, span: Any, active: Any) -> None:
        self.otel = otel
        self.span = span
        self.active = active  # the span, or the enqueue's context where no span is recorded
        self.token = otel.context.attach(otel.trace.set_span_in_context(active))

    def end(self, outcome: AttemptOutcome | None) -> None:
        """Record what the attempt came to, end the span and make it inactive (None: the
        attempt's run raised, which ``run_job`` never lets happen). A tracer that raises
        changes nothing of the outcome (``core/observers.py``)."""
        otel, span = self.otel, self.span
        try:
            if outcome is not None:
                outcome.trace_context = tracing.dumps(self.active.get_span_context())
            if outcome is not None and span.is_recording():
                span.set_attribute(tracing.OUTCOME, outcome.kind)
                if outcome.kind == Outcome.FAILED:
                    exc = outcome.exception
                    if exc is not None:
                        span.record_exception(exc)
                        span.set_attribute("error.type", tracing.type_name(exc))
                    span.set_status(otel.Status(otel.ERROR, _description(outcome)))
            tracing.end(span, _ENDING, _OUTCOME_STANDS)  # off this thread (span_ends.py)
        except Exception as exc:
            observers.report(_ENDING, exc, _OUTCOME_STANDS)
        finally:
            try:
                otel.context.detach(self.token)
            except Exception as exc:
                observers.report("tracing (detaching an attempt's context)", exc,
                                 _OUTCOME_STANDS)


def start(job: Job) -> AttemptSpan | None:
    """The span of ``job``'s attempt, made active; None when there is nothing to trace, or
    when the tracer raised (reported once: ``core/observers.py``), the job then run untraced."""
    try:
        return _start(job)
    except Exception as exc:
        observers.report("tracing (starting an attempt's span)", exc,
                         "the job runs as without it, untraced")
        return None


def _start(job: Job) -> AttemptSpan | None:
    stored = job.trace_context
    otel = tracing.api(load=stored is not None)
    if otel is None:
        return None
    enqueued = tracing.loads(otel, stored)
    if enqueued is None and not tracing.traces(otel):
        return None
    attributes = {
        "messaging.system": tracing.SYSTEM,
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": job.queue,
        "messaging.message.id": job.public_id,
        tracing.TYPE: job.type,
        tracing.ATTEMPT: job.attempt,
    }
    root = otel.Context()  # not the slot thread's context, whatever it holds
    if enqueued is not None and job.attempt <= 1:
        parent, links = otel.trace.set_span_in_context(
            otel.trace.NonRecordingSpan(enqueued), root), None
    else:
        parent, links = root, [otel.Link(enqueued)] if enqueued is not None else None
    span = otel.tracer.start_span(
        f"process {job.queue}", context=parent, kind=otel.SpanKind.CONSUMER,
        attributes=attributes, links=links)
    active = span
    if enqueued is not None and not span.get_span_context().is_valid:
        # No tracer provider here: the handler's enqueues still carry the enqueue's context
        active = otel.trace.NonRecordingSpan(enqueued)
    return AttemptSpan(otel, span, active)


def _description(outcome: AttemptOutcome) -> str:
    error = outcome.error if isinstance(outcome.error, dict) else {}
    return str(error.get("message") or error.get("type") or "failed")[:200]
