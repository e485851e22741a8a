"""Jobs and attempts as JSON: what the API answers with, callbacks POST and the ``jobs``
command prints."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from django.utils import timezone

from django_jobs.core.validation import PRIORITY_NAMES

if TYPE_CHECKING:
    from django_jobs.core.json_rules import JSONObject
    from django_jobs.models import Job, JobAttempt

_PRIORITY_LABELS = {number: name for name, number in PRIORITY_NAMES.items()}


def iso(value: datetime | None) -> str | None:
    """RFC 3339 in UTC with a ``Z``, as clients of other languages parse most easily. A naive
    time (``USE_TZ = False``) is one in the default time zone, as Django reads it."""
    if value is None:
        return None
    if timezone.is_naive(value):
        value = timezone.make_aware(value, timezone.get_default_timezone())
    text = value.isoformat()
    if not text.endswith("+00:00"):
        text = value.astimezone(UTC).isoformat()
    return text[:-6] + "Z"


def priority_json(value: int) -> str | int:
    """``low``/``normal``/``high`` where the number has a name, else the integer."""
    return _PRIORITY_LABELS.get(value, value)


def milliseconds(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return round((end - start).total_seconds() * 1000, 3)


def attempt_json(attempt: JobAttempt) -> JSONObject:
    return {
        "number": attempt.number,
        "outcome": attempt.outcome,
        "worker_id": attempt.worker_id,
        "started_at": iso(attempt.started_at),
        "finished_at": iso(attempt.finished_at),
        "duration_ms": milliseconds(attempt.started_at, attempt.finished_at),
        "error": attempt.error,
        "cpu_time": attempt.cpu_time,
        "peak_memory": attempt.peak_memory,
    }


def job_json(
    job: Job, *, url: str | None = None, attempts: list[JobAttempt] | None = None
) -> JSONObject:
    """One job; ``attempts`` (oldest first) is included when given."""
    data: JSONObject = {
        "job_id": job.public_id,
        "url": url,
        "type": job.type,
        "status": job.status,
        "priority": priority_json(job.priority),
        "queue": job.queue,
        "attempt": job.attempt,
        "max_attempts": job.max_attempts,
        "crashes": job.crashes,
        "payload": job.payload,
        "result": job.result,
        "error": job.error or None,
        "cancel_requested": job.cancel_requested,
        "progress": job.progress or None,
        "callback_url": job.callback_url or None,
        "on_dependency_failure": job.on_dependency_failure or "wait",
        "run_at": iso(job.run_at),
        "created_at": iso(job.created_at),
        "updated_at": iso(job.updated_at),
        "started_at": iso(job.started_at),
        "finished_at": iso(job.finished_at),
    }
    if attempts is not None:
        data["attempts"] = [attempt_json(a) for a in attempts]
    return data


def job_path(public_id: str) -> str | None:
    """The job's path under the site's API mount, or None if the API is not mounted."""
    from django.urls import NoReverseMatch, reverse

    try:
        return reverse("django_jobs_api:job-detail", args=[public_id])
    except NoReverseMatch:
        return None
