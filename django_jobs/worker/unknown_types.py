"""Jobs of a type the worker has no handler for: left for a worker that has one, for a while.

In a rolling deploy the web processes often know a new job type minutes before every worker
does. A worker that claims a job it cannot run hands it back: the job is pending again after a
backoff (the retry backoff's delay, at most ``MAX_WAIT_SECONDS``), the attempt does not count,
and the job's error says why it waits. Only when no worker has run it for
``UNKNOWN_TYPE_GRACE`` seconds since the first worker that did not know its type does it go
dead, with an error saying so. The start of that wait travels in the error's details.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django_jobs.core.outcomes import EPOCH, AttemptOutcome, micros
from django_jobs.core.retry import as_backoff
from django_jobs.core.settings import jobs_settings
from django_jobs.core.states import Outcome
from django_jobs.core.stored_errors import error_dict
from django_jobs.models import Job

# The longest a job of an unknown type waits between two tries: a deploy's new workers should
# pick it up within minutes of starting, whatever the retry backoff says.
MAX_WAIT_SECONDS = 300.0
TYPE = "UnknownJobType"


def unknown_type_outcome(job: Job, started: int) -> AttemptOutcome:
    """What an attempt of ``job`` comes to on a worker with no handler for its type
    (``started`` in microseconds since the epoch)."""
    grace = float(jobs_settings.UNKNOWN_TYPE_GRACE or 0)
    since, tries = _waiting(job.error, started)
    waited = (started - since) / 1e6
    where = f"no handler is registered for job type {job.type!r} on worker {job.worker_id!r}"
    if waited >= grace:
        error = error_dict(type=TYPE, message=(
            f"{where}; no worker ran it in {waited:.0f} s of waiting (UNKNOWN_TYPE_GRACE "
            f"{grace:g} s)" if grace else where
        ))
        return AttemptOutcome(job=job, kind=Outcome.FAILED, started_at=started, finished_at=started,
                              error=error, permanent=True)
    delay = min(as_backoff(None).delay(tries), MAX_WAIT_SECONDS, grace - waited)
    error = error_dict(type=TYPE, message=(
        f"{where}; waiting for a worker that has one: tried again in {delay:.1f} s, "
        f"until {_iso(since + round(grace * 1e6))}"
    ), details={"waiting_since": _iso(since), "tries": tries})
    return AttemptOutcome(job=job, kind=Outcome.SNOOZED, started_at=started, finished_at=started,
                          error=error, snooze_seconds=delay)


def _waiting(error: object, now: int) -> tuple[int, int]:
    """When this job started waiting for a handler, and how many tries this one is."""
    details = error.get("details") if isinstance(error, dict) else None
    if isinstance(error, dict) and error.get("type") == TYPE and isinstance(details, dict):
        try:
            since = micros(datetime.fromisoformat(details["waiting_since"]))  # written by _iso
            return min(since, now), int(details["tries"]) + 1
        except (KeyError, TypeError, ValueError):
            pass
    return now, 1


def _iso(us: int) -> str:
    """Microseconds since the epoch as an ISO 8601 time in UTC."""
    return (EPOCH + timedelta(microseconds=us)).isoformat(timespec="seconds")
