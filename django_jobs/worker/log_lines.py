"""The worker's log lines: for each job (started and finished, with structured extras), and a
summary of the jobs finished every ``SUMMARY_SECONDS``.

Levels: a job that completed logs its two lines at DEBUG, and the summary is INFO. A line per
completed job at INFO cost a quarter of a drain of quick jobs (formatting, the handler's lock,
a write per line); the summary costs a counter per job. A job that did not complete logs its
end at the level ``LOG_LEVELS`` gives its outcome: WARNING for one that runs again (failed and
retried, snoozed) or was canceled, ERROR for a failure that ends it (dead, or an outcome the
database refused), with the exception as ``exc_info`` where this process has it. Error
trackers (Sentry's logging integration and most others) turn ERROR records into events and
leave WARNING ones as breadcrumbs: a retried failure is expected, a dead job is not.

A job that did not complete says why and what happens to it next, in the text and as the
``reason`` and ``next`` fields of the record (``jsonlog.JSONFormatter`` writes them): the
error's type and message, or "no handler for type 'x' in this worker"; and when it runs again,
or that it is dead or canceled. The attempt named is the one that ran, also for a snoozed job,
whose attempt is given back.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from django_jobs.core.settings import jobs_settings, level_for
from django_jobs.core.states import Outcome

if TYPE_CHECKING:
    from django_jobs.core.outcomes import AttemptOutcome
    from django_jobs.models import Job

logger = logging.getLogger("django_jobs.worker")


SUMMARY_SECONDS = 10.0


def log_start(worker_id: str, job: Job) -> None:
    if not logger.isEnabledFor(logging.DEBUG):
        return
    logger.debug(
        "job started: %s %s attempt %d", job.public_id, job.type, job.attempt,
        extra={"worker_id": worker_id, "job_id": job.public_id, "job_type": job.type,
               "attempt": job.attempt, "event": "job_started"},
    )


def log_end(worker_id: str, outcome: AttemptOutcome) -> None:
    job = outcome.job
    duration_ms = outcome.duration_ms
    # A snoozed attempt is given back (the job's counter goes down): name the one that ran.
    attempt = job.attempt + 1 if outcome.kind == Outcome.SNOOZED else job.attempt
    extra = {"worker_id": worker_id, "job_id": job.public_id, "job_type": job.type,
             "attempt": attempt, "duration_ms": round(duration_ms, 3),
             "outcome": outcome.kind, "event": "job_finished"}
    if outcome.kind == Outcome.COMPLETED:
        logger.debug("job %s: %s %s attempt %d in %.1f ms", outcome.kind, job.public_id,
                     job.type, attempt, duration_ms, extra=extra)
        return
    level = level_for(outcome.kind)
    if not logger.isEnabledFor(level):
        return
    reason, then = why(outcome)
    extra["reason"], extra["next"], extra["job_queue"] = reason, then, job.queue
    exc = outcome.exception if level >= logging.ERROR else None
    logger.log(level, "job %s: %s %s attempt %d in %.1f ms: %s; %s", outcome.kind,
               job.public_id, job.type, attempt, duration_ms, reason, then, extra=extra,
               exc_info=(type(exc), exc, exc.__traceback__) if exc is not None else None)


def why(outcome: AttemptOutcome) -> tuple[str, str]:
    """Why a written attempt did not complete, and what happens to its job next, in words."""
    job = outcome.job
    if outcome.kind == Outcome.SNOOZED:
        return _why_snoozed(job, job.error if isinstance(job.error, dict) else {})
    error: Any = outcome.error or job.error
    return _why_ended(outcome, _error_text(error if isinstance(error, dict) else {}))


def _why_snoozed(job: Job, error: dict[str, Any]) -> tuple[str, str]:
    if error.get("type") != "UnknownJobType":
        return "the handler snoozed it", f"runs again at {at_utc(job.run_at)}"
    details = error.get("details") or {}
    until = ""
    try:
        since = datetime.fromisoformat(details["waiting_since"])
        grace = float(jobs_settings.UNKNOWN_TYPE_GRACE or 0)
        until = f" until {at_utc(since + timedelta(seconds=grace))}"
    except (KeyError, TypeError, ValueError):
        pass
    return (f"no handler for type {job.type!r} in this worker",
            f"waiting for a worker that has it{until}; tried again at {at_utc(job.run_at)}")


def _why_ended(outcome: AttemptOutcome, text: str) -> tuple[str, str]:
    job, kind = outcome.job, outcome.kind
    if kind == Outcome.CANCELED:
        return text or "cancel requested", "canceled: it does not run again"
    if kind == Outcome.DEAD:
        if outcome.permanent:
            return text or "failed", "dead: the error is not retried"
        return text or "failed", f"dead: no attempt left ({job.attempt} of {job.max_attempts})"
    if kind == Outcome.FAILED:
        return (text or "failed",
                f"retried at {at_utc(job.run_at)} (attempt {job.attempt + 1} of "
                f"{job.max_attempts})")
    return text or kind, f"status {job.status}"


def _error_text(error: dict[str, Any]) -> str:
    kind, message = error.get("type") or "", error.get("message") or ""
    return f"{kind}: {message}" if kind and message else str(kind or message)


def at_utc(when: datetime | None) -> str:
    """A time of day in UTC (``14:05:12 UTC``), with the date when it is not today."""
    if when is None:
        return "an unknown time"
    if timezone.is_naive(when):
        when = timezone.make_aware(when)
    when = when.astimezone(UTC)
    today = datetime.now(UTC).date()
    return when.strftime("%H:%M:%S UTC" if when.date() == today else "%Y-%m-%d %H:%M:%S UTC")


class Tally:
    """Counts finished jobs by outcome and logs them at INFO every ``SUMMARY_SECONDS``."""

    def __init__(self, worker_id: str) -> None:
        self.worker_id = worker_id
        self.counts: dict[str, int] = {}
        self.since = time.monotonic()

    def add(self, written: list[AttemptOutcome]) -> None:
        counts = self.counts
        for outcome in written:
            kind = outcome.kind
            counts[kind] = counts.get(kind, 0) + 1
        if time.monotonic() - self.since >= SUMMARY_SECONDS:
            self.flush()

    def flush(self) -> None:
        """Log what finished since the last summary, if anything did."""
        now = time.monotonic()
        counts, self.counts = self.counts, {}
        spent, self.since = now - self.since, now
        if not counts or not logger.isEnabledFor(logging.INFO):
            return
        total = sum(counts.values())
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))
        logger.info(
            "worker %s: %d job(s) finished in %.1f s: %s", self.worker_id, total, spent, kinds,
            extra={"worker_id": self.worker_id, "event": "jobs_summary", "jobs": total,
                   "seconds": round(spent, 3), "outcomes": counts},
        )


def default_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
