"""The live workers and the paused queues."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from django_jobs.models.managers import QueueStateManager, RoutedManager


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

    objects = RoutedManager()

    def __str__(self) -> str:
        return self.worker_id


class QueueState(models.Model):
    """A paused queue: workers stop claiming from it until it is resumed."""

    name = models.CharField(max_length=100, primary_key=True)
    paused = models.BooleanField(default=False)
    changed_at = models.DateTimeField(default=timezone.now)

    objects = QueueStateManager()

    def __str__(self) -> str:
        return f"{self.name} ({'paused' if self.paused else 'running'})"
