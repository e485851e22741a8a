"""Groups of jobs: a set enqueued together, counted as its jobs end, and the callback job
enqueued once when the last of them has ended (``features/groups.py``)."""

from __future__ import annotations

import secrets

from django.db import models
from django.utils import timezone

from django_jobs.models.managers import RoutedManager

GROUP_ID_PREFIX = "g-"


def new_group_id() -> str:
    """``g-`` and 20 random hex digits, as a job's public id."""
    return GROUP_ID_PREFIX + secrets.token_hex(10)


class JobGroup(models.Model):
    """A group's counts of its jobs that ended, kept by the transactions that end them (no
    read of the jobs table is needed to show its progress), and its callback: a job of
    ``callback_type`` enqueued, in the transaction that ends the group's last job, with
    ``callback_payload``, ``callback_options`` and the group's counts and job ids."""

    public_id = models.CharField(max_length=24, default=new_group_id, editable=False)
    name = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    # Jobs in the group; 0 until the enqueue that made it has linked them all.
    total = models.PositiveIntegerField(default=0)
    completed = models.PositiveIntegerField(default=0)
    dead = models.PositiveIntegerField(default=0)
    canceled = models.PositiveIntegerField(default=0)
    callback_type = models.CharField(max_length=100)
    callback_payload = models.JSONField(null=True, blank=True)
    # Job.enqueue's options for the callback job (queue, priority, max_attempts, ...).
    callback_options = models.JSONField(default=dict, blank=True)
    # The callback job, once enqueued: a plain id (no foreign key), so that pruning jobs does
    # not read this table.
    callback_job_id = models.BigIntegerField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Why a write of the group's that followed the end of one of its jobs could not be made
    # (its callback job, its counts), as a stored error; the job's end stands without it.
    error = models.JSONField(null=True, blank=True)

    objects = RoutedManager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["public_id"], name="django_jobs_group_public_id_key"),
        ]
        indexes = [models.Index(fields=["-created_at"], name="django_jobs_group_created_idx")]

    def __str__(self) -> str:
        return f"{self.public_id} {self.name}".strip()

    @property
    def ended(self) -> int:
        return self.completed + self.dead + self.canceled

    @property
    def remaining(self) -> int:
        """Jobs of the group that have not ended (completed, dead or canceled)."""
        return max(self.total - self.ended, 0)


class JobGroupMember(models.Model):
    """One job of a group: the group's jobs, read by its id without a read of the jobs table
    by group (which has no index on ``group``: only group jobs would use it, every job would
    pay for it)."""

    # Read by group through the unique constraint's index (group, job): no index of their own.
    group = models.ForeignKey(JobGroup, on_delete=models.CASCADE, related_name="members",
                              db_index=False)
    # No database constraint, and nothing done when the job is deleted: pruning jobs does not
    # read this table; a pruned job's row stays and counts as what it had come to.
    job = models.ForeignKey("django_jobs.Job", on_delete=models.DO_NOTHING, db_constraint=False,
                            db_index=False, related_name="+")

    objects = RoutedManager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["group", "job"],
                                               name="django_jobs_group_member_once")]

    def __str__(self) -> str:
        return f"{self.job_id} in {self.group_id}"
