"""Jobs, their attempts, the live workers and queue pauses.

Rows change only through the verbs in ``managers.py``; the methods here delegate to them.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.db import models
from django.db.models import Q
from django.utils import timezone

from .managers import JobManager

PUBLIC_ID_PREFIX = "j-"


def new_public_id() -> str:
    """``j-`` and 20 random hex digits: unguessable, short enough to read out."""
    return PUBLIC_ID_PREFIX + secrets.token_hex(10)


class Job(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "Pending"  # waiting for its run_at, then for a worker
        PROCESSING = "processing", "Processing"  # held by a worker under a lease
        COMPLETED = "completed", "Completed"  # the handler returned
        FAILED = "failed", "Failed"  # an attempt failed; retried at run_at
        DEAD = "dead", "Dead"  # out of attempts or permanent error; waits for a person
        CANCELED = "canceled", "Canceled"  # canceled before it completed

    public_id = models.CharField(max_length=24, unique=True, default=new_public_id, editable=False)
    type = models.CharField(max_length=100)
    payload = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    priority = models.SmallIntegerField(default=0)
    queue = models.CharField(max_length=100, default="default")
    run_at = models.DateTimeField(default=timezone.now)
    attempt = models.PositiveIntegerField(default=0)
    max_attempts = models.PositiveSmallIntegerField(default=3)
    result = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    worker_id = models.CharField(max_length=100, blank=True, default="")
    lease_token = models.UUIDField(null=True, blank=True)
    leased_until = models.DateTimeField(null=True, blank=True)
    cancel_requested = models.BooleanField(default=False)
    callback_url = models.URLField(max_length=2000, blank=True, default="")

    objects = JobManager()

    class Meta:
        indexes = [
            # Exactly the claim query's WHERE and ORDER BY: only ready-able rows are in it,
            # so claiming costs the same with ten million finished rows as with none.
            # The first serves workers of all queues, the second workers given --queues.
            models.Index(
                models.F("priority").desc(),
                "run_at",
                "id",
                name="django_jobs_ready_any_idx",
                condition=Q(status__in=["pending", "failed"]),
            ),
            models.Index(
                "queue",
                models.F("priority").desc(),
                "run_at",
                "id",
                name="django_jobs_ready_idx",
                condition=Q(status__in=["pending", "failed"]),
            ),
            # Rescue looks for processing rows whose lease ran out.
            models.Index(
                fields=["leased_until"],
                name="django_jobs_lease_idx",
                condition=Q(status="processing"),
            ),
            models.Index(fields=["status", "-created_at"], name="django_jobs_status_idx"),
            models.Index(fields=["-created_at"], name="django_jobs_created_idx"),
        ]
        permissions = [
            ("retry_job", "Can retry jobs"),
            ("cancel_job", "Can cancel jobs"),
        ]

    def __str__(self) -> str:
        return f"{self.public_id} {self.type} ({self.status})"

    @classmethod
    def enqueue(
        cls,
        type: str,
        payload: Any = None,
        *,
        priority: str | int = "normal",
        queue: str | None = None,
        delay: timedelta | float | None = None,
        run_at: datetime | None = None,
        max_attempts: int | None = None,
    ) -> Job:
        """Record a job in the caller's transaction: a rollback leaves no job.

        ``priority`` is low, normal, high or an integer from -100 to 100 (higher runs first);
        ``delay`` a timedelta or seconds, or ``run_at`` an aware datetime. Raises InvalidJob
        (a ValidationError naming the field) or UnknownJobType on bad input.
        """
        return cls.objects.enqueue(
            type, payload, priority=priority, queue=queue, delay=delay, run_at=run_at,
            max_attempts=max_attempts,
        )

    @classmethod
    def enqueue_many(cls, type: str, payloads: Iterable[Any], **options: Any) -> list[Job]:
        """Insert one job per payload, with the options of ``enqueue``, in one statement."""
        return cls.objects.enqueue_many(type, payloads, **options)

    @property
    def duration(self) -> timedelta | None:
        if self.started_at and self.finished_at:
            return self.finished_at - self.started_at
        return None

    def retry(self) -> bool:
        """Make a dead, failed or canceled job pending now; True if it changed."""
        changed = Job.objects.filter(pk=self.pk).retry()
        self.refresh_from_db()
        return bool(changed)

    def cancel(self) -> bool:
        """Cancel a pending or failed job, or ask the worker to stop a processing one."""
        changed = Job.objects.filter(pk=self.pk).cancel()
        self.refresh_from_db()
        return bool(changed)

    def run_now(self) -> bool:
        """Make a scheduled job due now."""
        changed = Job.objects.filter(pk=self.pk).run_now()
        self.refresh_from_db()
        return bool(changed)


class JobAttempt(models.Model):
    class Outcome(models.TextChoices):
        COMPLETED = "completed", "Completed"  # the handler returned
        FAILED = "failed", "Failed"  # raised; retried later
        DEAD = "dead", "Dead"  # raised and the job went dead
        LOST = "lost", "Worker lost"  # the worker stopped heartbeating mid-attempt
        CANCELED = "canceled", "Canceled"  # stopped by a cancel request
        RELEASED = "released", "Released"  # handed back at shutdown; did not count

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="attempts")
    number = models.PositiveIntegerField()
    worker_id = models.CharField(max_length=100, blank=True, default="")
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    error = models.JSONField(null=True, blank=True)
    cpu_time = models.FloatField(null=True, blank=True, help_text="seconds")
    peak_memory = models.BigIntegerField(null=True, blank=True, help_text="bytes")

    class Meta:
        ordering = ["job_id", "started_at", "id"]

    def __str__(self) -> str:
        return f"attempt {self.number} of {self.job_id}: {self.outcome}"

    @property
    def duration(self) -> timedelta | None:
        if self.finished_at:
            return self.finished_at - self.started_at
        return None


class Worker(models.Model):
    """A live ``runworker`` process, upserted at start and on every heartbeat."""

    worker_id = models.CharField(max_length=100, primary_key=True)
    hostname = models.CharField(max_length=255)
    pid = models.PositiveIntegerField()
    queues = models.JSONField(default=list)
    concurrency = models.PositiveSmallIntegerField(default=1)
    started_at = models.DateTimeField(default=timezone.now)
    last_heartbeat = models.DateTimeField(default=timezone.now)
    running = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return self.worker_id


class QueueState(models.Model):
    """A paused queue: workers stop claiming from it until it is resumed."""

    name = models.CharField(max_length=100, primary_key=True)
    paused = models.BooleanField(default=False)
    changed_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.name} ({'paused' if self.paused else 'running'})"


def error_dict(
    exc: BaseException | None = None, *, type: str = "", message: str = "", traceback: str = "",
    details: Any = None,
) -> dict[str, Any]:
    """The structured error stored on a job and its attempts."""
    if exc is not None:
        import traceback as tb

        type = type or exc.__class__.__name__
        message = message or str(exc)
        traceback = traceback or "".join(tb.format_exception(exc))
        details = details if details is not None else getattr(exc, "details", None)
    return {"type": type, "message": message, "traceback": traceback, "details": details or {}}
