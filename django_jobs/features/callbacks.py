"""Completion callbacks: when a job with a ``callback_url`` ends, POST its JSON there, signed.

The ``Callbacks`` hooks (after a finish; cancel and rescue through ``ended``) enqueue one job
of type ``django_jobs.callback`` per ended job, in the same transaction as the status change, so a
callback is never lost and never sent for a change that rolled back. That job is run by the
ordinary workers, with retries and backoff like any other.

Each delivery carries these headers (see docs/reference-api.md for a verification snippet)::

    X-Jobs-Timestamp: 1718368496                  (Unix seconds when this delivery was signed)
    X-Jobs-Signature: sha256=<hex>     HMAC-SHA256(CALLBACK_SECRET, timestamp + "." + body)
    X-Jobs-Delivery: j-...                        (the callback job's id: the same on every retry)
    X-Jobs-Event: job.completed | job.dead | job.canceled
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connections

from django_jobs.core import tracing
from django_jobs.core.retry import FixedSchedule
from django_jobs.core.settings import jobs_settings
from django_jobs.core.states import JobStatus
from django_jobs.core.validation import callback_url_problem
from django_jobs.engine.feature_writes import guarded
from django_jobs.engine.hooks import Feature
from django_jobs.exceptions import PermanentError
from django_jobs.handlers.registry import handler

if TYPE_CHECKING:
    from datetime import datetime

    from django_jobs.core.json_rules import JSONValue
    from django_jobs.core.outcomes import AttemptOutcome
    from django_jobs.models import Job
    from django_jobs.models.managers import JobManager, JobQuerySet

CALLBACK_TYPE = "django_jobs.callback"
ENDED_STATES = (JobStatus.COMPLETED, JobStatus.DEAD, JobStatus.CANCELED)
SIGNATURE_PREFIX = "sha256="
USER_AGENT = "django-jobs-callback/1"


class CallbackFailed(Exception):
    """The receiver could not be reached or did not answer 2xx; the delivery is retried."""


class SettingsBackoff:
    """The ``CALLBACK_BACKOFF`` schedule, read when a delivery fails (so settings may change)."""

    def delay(self, attempt: int, rand: Callable[[], float] = lambda: 0.0) -> float:
        return FixedSchedule(tuple(jobs_settings.CALLBACK_BACKOFF)).delay(attempt, rand)


def enqueue_callbacks(jobs: Sequence[Job], using: str | None = None) -> list[Job]:
    """Enqueue a delivery for each ended job that has a callback_url (the write path calls this)."""
    from django_jobs.models import Job

    payloads = [
        {"job_id": job.public_id, "status": job.status}
        for job in jobs
        if job.callback_url and job.status in ENDED_STATES
    ]
    if not payloads:
        return []
    return Job.objects.db_manager(using).enqueue_many(
        CALLBACK_TYPE, payloads, queue=jobs_settings.CALLBACK_QUEUE,
        max_attempts=int(jobs_settings.CALLBACK_MAX_ATTEMPTS),
    )


class Callbacks(Feature):
    """The hooks of completion callbacks: a delivery for each job with a callback_url that
    ends, enqueued in the transaction that ends it."""

    name = "callbacks"
    marks = ("callback_url",)

    def after_finish(self, manager: JobManager, written: list[AttemptOutcome],
                     now: datetime) -> None:
        # Each delivery continues the trace of the attempt that ended its job
        traces: dict[str | None, list[Job]] = {}
        for outcome in written:
            if outcome.job.callback_url:
                traces.setdefault(outcome.trace_context, []).append(outcome.job)
        for trace, jobs in traces.items():
            with tracing.attached(trace):
                self.ended(jobs, manager.db)

    def ended(self, jobs: Sequence[Job], using: str) -> None:
        """The deliveries of the jobs that have a callback_url, in a savepoint (``guarded``):
        refused, they are logged and counted, and the jobs' ends stand without them."""
        hooked = [job for job in jobs if job.callback_url]
        if hooked:
            with guarded(using, "callbacks", "the completion callbacks", hooked[0]):
                enqueue_callbacks(hooked, using)

    def hold_for_cancel(self, cancelable: JobQuerySet) -> list[Job]:
        """The jobs that have a callback_url, locked (where the database can) until commit."""
        hooked = cancelable.exclude(callback_url="")
        if connections[cancelable.db].features.has_select_for_update:
            hooked = hooked.select_for_update()
        return list(hooked)


def sign(body: bytes, timestamp: int, secret: str) -> str:
    """The ``X-Jobs-Signature`` value for ``body`` sent at ``timestamp``."""
    message = str(timestamp).encode() + b"." + body
    return SIGNATURE_PREFIX + hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def verify(
    body: bytes, timestamp: str, signature: str, secret: str, *, tolerance: float = 300,
    now: float | None = None,
) -> bool:
    """For receivers written in Django: True if the signature is ours and recent enough."""
    try:
        sent = int(timestamp)
    except (TypeError, ValueError):
        return False
    if abs((time.time() if now is None else now) - sent) > tolerance:
        return False
    return hmac.compare_digest(sign(body, sent, secret), signature)


def delivery_request(job: Job, delivery_id: str, timestamp: int) -> tuple[bytes, dict[str, str]]:
    """The body and headers of one delivery of ``job``'s JSON."""
    from django_jobs.core.job_json import job_json, job_path

    data = job_json(job, url=job_path(job.public_id), attempts=list(job.attempts.all()))
    body = json.dumps(data, cls=DjangoJSONEncoder, separators=(",", ":")).encode()
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "X-Jobs-Timestamp": str(timestamp),
        "X-Jobs-Signature": sign(body, timestamp, str(jobs_settings.CALLBACK_SECRET)),
        "X-Jobs-Delivery": delivery_id,
        "X-Jobs-Event": f"job.{job.status}",
    }
    return body, headers


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect could lead past the allowed hosts: treat it as a failed delivery instead."""

    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


_opener = urllib.request.build_opener(_NoRedirects)


def post(url: str, body: bytes, headers: dict[str, str], timeout: float) -> int:
    """POST and return the status code; CallbackFailed if the receiver cannot be reached."""
    # deliver() checks the URL first: http(s) only, an allowed host; redirects are not followed.
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")  # noqa: S310
    try:
        with _opener.open(request, timeout=timeout) as response:
            response.read(65536)
            return response.status
    except urllib.error.HTTPError as exc:
        exc.close()
        return exc.code
    except (urllib.error.URLError, OSError) as exc:
        raise CallbackFailed(f"could not reach the callback host: {exc}") from None


@handler(CALLBACK_TYPE, backoff=SettingsBackoff())
def deliver(payload: dict[str, JSONValue]) -> dict[str, str | int]:
    """Send one job's JSON to its callback_url; raise to retry, PermanentError to give up."""
    from django_jobs.core.current import current_job
    from django_jobs.models import Job

    job = Job.objects.filter(public_id=payload.get("job_id", "")).first()
    if job is None:
        return {"skipped": "the job no longer exists"}
    if job.status not in ENDED_STATES:
        # Retried since it ended: it will call back again when it ends again.
        return {"skipped": f"the job is {job.status} again"}
    problem = callback_url_problem(job.callback_url)
    if problem:
        raise PermanentError(f"callback_url refused: {problem}")
    me = current_job.get()
    body, headers = delivery_request(job, me.public_id if me else "", int(time.time()))
    status = post(job.callback_url, body, headers, float(jobs_settings.CALLBACK_TIMEOUT))
    if not 200 <= status < 300:
        raise CallbackFailed(f"the callback host answered HTTP {status}")
    return {"status": status, "event": headers["X-Jobs-Event"]}
