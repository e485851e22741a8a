"""An action over every job that matched a filter (``features/bulk_actions.py``): what was
asked, by whom, over which set, and how far it has gone.

The set is frozen when the action is confirmed: the filter (``spec``) and the newest job then
(``bound``). The action's job walks it in primary-key order and keeps its place in ``cursor``,
so it never meets a job twice (a job it retried that went dead again is behind it) and a job
enqueued after the confirmation is never in it; a restarted action goes on from ``cursor``.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class BulkAction(models.Model):
    class Verb(models.TextChoices):
        RETRY = "retry", "Retry"
        CANCEL = "cancel", "Cancel"
        DELETE = "delete", "Delete"

    verb = models.CharField(max_length=8, choices=Verb.choices)
    spec = models.JSONField(default=dict)  # the filter, as features/bulk_actions.py reads it
    description = models.CharField(max_length=500, blank=True, default="")
    bound = models.BigIntegerField()  # the newest job's primary key at confirmation
    cursor = models.BigIntegerField(default=0)  # every job up to here is done
    matched = models.BigIntegerField(null=True, blank=True)  # counted at confirmation
    matched_capped = models.BooleanField(default=False)  # "more than matched"
    changed = models.BigIntegerField(default=0)
    skipped = models.BigIntegerField(default=0)
    created_by = models.CharField(max_length=150, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    job_id = models.BigIntegerField(null=True, blank=True)  # the job that runs it

    class Meta:
        verbose_name = "action over a filter"
        verbose_name_plural = "actions over a filter"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.get_verb_display()} {self.description or 'jobs'}"
