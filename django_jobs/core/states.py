"""The states of a job and the outcomes of an attempt, named once for every module.

``Job.Status`` and ``JobAttempt.Outcome`` are these classes. They live apart from the models so
that the modules the models import (the manager, the features) can name states too; SQL that
needs a state's name builds it from these members.
"""

from django.db import models


class JobStatus(models.TextChoices):
    PENDING = "pending", "Pending"  # waiting for its run_at, then for a worker
    PROCESSING = "processing", "Processing"  # held by a worker under a lease
    COMPLETED = "completed", "Completed"  # the handler returned
    FAILED = "failed", "Failed"  # an attempt failed; retried at run_at
    DEAD = "dead", "Dead"  # out of attempts or permanent error; waits for a person
    CANCELED = "canceled", "Canceled"  # canceled before it completed
    WAITING = "waiting", "Waiting"  # waits for the jobs it depends on to complete


class Outcome(models.TextChoices):
    COMPLETED = "completed", "Completed"  # the handler returned
    FAILED = "failed", "Failed"  # raised; retried later
    DEAD = "dead", "Dead"  # raised and the job went dead
    LOST = "lost", "Worker lost"  # the worker stopped heartbeating mid-attempt
    CANCELED = "canceled", "Canceled"  # stopped by a cancel request
    RELEASED = "released", "Released"  # handed back at shutdown; did not count
    SNOOZED = "snoozed", "Snoozed"  # the handler asked to run later; did not count


# The members by their names, for modules that name states often; the states a claim takes.
PENDING, PROCESSING, COMPLETED = JobStatus.PENDING, JobStatus.PROCESSING, JobStatus.COMPLETED
FAILED, DEAD, CANCELED = JobStatus.FAILED, JobStatus.DEAD, JobStatus.CANCELED
WAITING = JobStatus.WAITING
READY_STATES = (PENDING, FAILED)


class DependencyPolicy(models.TextChoices):
    """What a waiting job does when one of its dependencies goes dead or is canceled
    (``Job.on_dependency_failure``; NULL in the row is ``wait``)."""

    WAIT = "wait", "Keep waiting"  # until the dependency is retried and completes
    CANCEL = "cancel", "Cancel"  # canceled at once, the dependency named in its error
    RUN = "run", "Run anyway"  # counts the failed dependency as done
