"""Jobs that fail for good as Sentry events, on sentry-sdk 2.x and 3.x.

``sentry_sdk.init(..., integrations=[DjangoJobsIntegration()])`` in the site's settings. The
events come from the job's own ``job_finished`` signal, not from Sentry's logging integration
(which 3.x no longer turns ERROR records into events, and whose rules a site may change): each
outcome the worker logs at ERROR or above (``LOG_LEVELS``: a dead job, by default) is one event,
with the handler's exception and traceback where the worker has them (a job rescued as dead
after its worker was lost has none: its event is a message), and the job as tags (``job_type``,
``job_queue``, ``job_id``, ``job_attempt``, ``job_outcome``) and as the ``job`` context.

The payload is not sent, and the event's frames carry no local variables (a handler's locals
hold what it loaded from the payload), unless ``ERROR_TRACKER_PAYLOAD`` is True. The worker's own
ERROR record of the same outcome is not sent again by Sentry's logging integration (2.x would).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Literal

import sentry_sdk
from sentry_sdk.integrations import Integration
from sentry_sdk.scope import add_global_event_processor

from django_jobs.core.settings import jobs_settings, level_for
from django_jobs.core.states import Outcome
from django_jobs.signals import job_finished

if TYPE_CHECKING:
    from sentry_sdk._types import Event, Hint

#: The logger of the worker's lines for jobs (``worker/log_lines.py``).
WORKER_LOGGER = "django_jobs.worker"
#: The worker's records that tell an outcome this integration sends itself.
OUTCOME_EVENTS = ("job_finished", "job_rescued")


class DjangoJobsIntegration(Integration):
    """Sends each job that fails for good (an outcome at ERROR in ``LOG_LEVELS``) to Sentry."""

    identifier = "django_jobs"

    @staticmethod
    def setup_once() -> None:
        job_finished.connect(finished, dispatch_uid="django_jobs.features.sentry")
        add_global_event_processor(without_logged_copy)


def finished(sender: Any, job: Any, outcome: str, exception: BaseException | None = None,
             **kwargs: Any) -> None:
    """Receiver of ``job_finished``: an event for an outcome logged at ERROR or above."""
    if outcome == Outcome.COMPLETED or not active():
        return
    level = level_for(outcome)
    if level < logging.ERROR:
        return
    capture(job, outcome, exception, "fatal" if level >= logging.CRITICAL else "error")


def active() -> bool:
    return sentry_sdk.get_client().get_integration(DjangoJobsIntegration) is not None


def capture(job: Any, outcome: str, exception: BaseException | None,
            level: Literal["fatal", "error"]) -> None:
    """One event for ``job``'s ``outcome``, in a scope of its own."""
    error = job.error if isinstance(job.error, dict) else {}
    context: dict[str, Any] = {
        "id": job.public_id, "type": job.type, "queue": job.queue, "attempt": job.attempt,
        "max_attempts": job.max_attempts, "outcome": outcome,
        "error": f"{error.get('type') or ''}: {error.get('message') or ''}".strip(": "),
    }
    payload = bool(jobs_settings.ERROR_TRACKER_PAYLOAD)
    if payload:
        context["payload"] = job.payload
    with sentry_sdk.new_scope() as scope:
        scope.set_tag("job_type", job.type)
        scope.set_tag("job_queue", job.queue)
        scope.set_tag("job_id", job.public_id)
        scope.set_tag("job_attempt", str(job.attempt))
        scope.set_tag("job_outcome", outcome)
        scope.set_context("job", context)
        scope.set_level(level)
        if not payload:
            scope.add_event_processor(without_variables)
        if exception is not None:
            sentry_sdk.capture_exception(exception)
        else:
            sentry_sdk.capture_message(
                f"job {outcome}: {job.public_id} {job.type} attempt {job.attempt}: "
                f"{context['error'] or 'its worker was lost'}", level=level)


def without_variables(event: Event, hint: Hint) -> Event | None:
    """The event without any frame's local variables."""
    for part in ("exception", "threads"):
        values: Any = event.get(part) or {}
        for value in values.get("values") or []:
            for frame in (value.get("stacktrace") or {}).get("frames") or []:
                frame.pop("vars", None)
    return event


def without_logged_copy(event: Event, hint: Hint) -> Event | None:
    """Drop the event Sentry's logging integration makes of the worker's record of an outcome
    this integration sends itself (sentry-sdk 2.x turns ERROR records into events)."""
    record = (hint or {}).get("log_record")
    if (record is not None and record.name == WORKER_LOGGER
            and getattr(record, "event", None) in OUTCOME_EVENTS and active()):
        return None
    return event
