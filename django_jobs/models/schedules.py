"""A schedule's state (pause, last and next run) and the occurrences enqueued so far."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from django_jobs.models.managers import RoutedManager


class Schedule(models.Model):
    """State of one schedule of ``DJANGO_JOBS["SCHEDULES"]``, created by the first worker to
    see it; the definition itself stays in settings."""

    name = models.CharField(max_length=100, primary_key=True)
    paused = models.BooleanField(default=False)
    # The latest occurrence enqueued (or skipped as missed); the next ones follow it.
    last_occurrence = models.DateTimeField(null=True, blank=True)
    next_run_at = models.DateTimeField(null=True, blank=True)
    last_run_at = models.DateTimeField(null=True, blank=True)
    last_job = models.ForeignKey(
        "django_jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    objects = RoutedManager()

    class Meta:
        ordering = ["name"]
        permissions = [("run_schedule", "Can run a schedule now, pause and resume it")]

    def __str__(self) -> str:
        return self.name + (" (paused)" if self.paused else "")


class ScheduleOccurrence(models.Model):
    """One enqueued occurrence. The unique constraint is what makes each occurrence run once:
    every worker that finds it due tries to insert this row with its job, and one wins."""

    schedule = models.ForeignKey(Schedule, on_delete=models.CASCADE, related_name="occurrences")
    at = models.DateTimeField()
    job = models.ForeignKey(
        "django_jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    manual = models.BooleanField(default=False, help_text="run now from the admin")
    created_at = models.DateTimeField(default=timezone.now)

    objects = RoutedManager()

    class Meta:
        ordering = ["-at"]
        constraints = [
            models.UniqueConstraint(fields=["schedule", "at"], name="django_jobs_occurrence_once")
        ]

    def __str__(self) -> str:
        return f"{self.schedule_id} at {self.at.isoformat()}"
