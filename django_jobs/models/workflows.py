"""A workflow's history (``features/workflows/``): its finished steps, the checkpoints a replay
returns without running them again, and the events sent to it.

Both tables name the workflow's job by a plain id (no foreign key), as a group names its
callback job: pruning jobs reads neither table, and retention deletes their rows once their
job has been pruned (``features/retention.py``)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from django_jobs.models.managers import RoutedManager


class WorkflowStep(models.Model):
    """One checkpoint: the step ``key`` (its name and occurrence, ``charge#0``) at ``position``
    in the workflow's history, of ``kind`` (``atomic``, ``plain``, ``sleep``, ``wait``), with
    its ``result`` as JSON. A sleep's ``until`` is its wake time; a wait's is its deadline, and
    ``done`` is False until the event or the timeout is recorded."""

    job_id = models.BigIntegerField()
    key = models.CharField(max_length=200)
    position = models.PositiveIntegerField()
    kind = models.CharField(max_length=8)
    result = models.JSONField(null=True, blank=True)
    until = models.DateTimeField(null=True, blank=True)
    done = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)

    objects = RoutedManager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["job_id", "key"],
                                    name="django_jobs_wfstep_job_key"),
            models.UniqueConstraint(fields=["job_id", "position"],
                                    name="django_jobs_wfstep_job_position"),
        ]
        # retention finds the rows of pruned workflows among the old ones
        indexes = [models.Index(fields=["created_at"], name="django_jobs_wfstep_created")]

    def __str__(self) -> str:
        return f"{self.job_id} {self.position} {self.key}"


class WorkflowEvent(models.Model):
    """An event sent to a workflow (``send_event``): kept until a ``wait_for(name)`` takes it
    (``taken_by``: that wait's step key; empty until then), dropped when its ``event_id`` was
    sent before."""

    job_id = models.BigIntegerField()
    name = models.CharField(max_length=100)
    event_id = models.CharField(max_length=100)
    payload = models.JSONField(null=True, blank=True)
    taken_by = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    objects = RoutedManager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["job_id", "event_id"],
                                    name="django_jobs_wfevent_job_event"),
        ]
        indexes = [models.Index(fields=["job_id", "name"], name="django_jobs_wfevent_job_name"),
                   models.Index(fields=["created_at"], name="django_jobs_wfevent_created")]

    def __str__(self) -> str:
        return f"{self.job_id} {self.name} {self.event_id}"
