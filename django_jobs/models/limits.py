"""Rows the claim locks and counts to enforce limits."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from django_jobs.models.managers import RoutedManager


class LimitLock(models.Model):
    """One row per (limit, key value): claimers lock it FOR UPDATE (on SQLite, the claim holds
    the database write lock) before counting, so two claims never both fill the last place."""

    scope = models.CharField(max_length=255, primary_key=True)
    touched_at = models.DateTimeField(default=timezone.now)

    objects = RoutedManager()

    def __str__(self) -> str:
        return self.scope


class LimitStart(models.Model):
    """One row per start of a rate-limited job, kept for one period: the sliding window."""

    limit = models.CharField(max_length=150)
    value = models.CharField(max_length=255, blank=True, default="")
    at = models.DateTimeField()

    objects = RoutedManager()

    class Meta:
        indexes = [models.Index(fields=["limit", "at"], name="django_jobs_limitstart_idx")]

    def __str__(self) -> str:
        return f"{self.limit}={self.value} at {self.at.isoformat()}"
