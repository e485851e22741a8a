"""The tables and their managers, one module each, found by Django here.

``jobs`` (``Job``, ``JobAttempt``), ``workers`` (``Worker``, ``QueueState``),
``dependencies`` (``JobDependency``), ``groups`` (``JobGroup``, ``JobGroupMember``), ``tokens``
(the API's tokens and idempotency keys), ``limits`` and ``schedules`` (the features' rows),
``stats`` (finished jobs counted per minute and hour, ``JobStat``), ``bulk`` (actions over
every job matching a filter, ``BulkAction``),
with ``managers`` (the reads, and the verbs that hand writes to the engine), ``store`` (where
those verbs find the engine), ``instances`` (rows made into instances without
``Model.__init__``) and ``schema`` (is the database migrated). Nothing here imports the engine.
"""

from django_jobs.models.bulk import BulkAction
from django_jobs.models.dependencies import JobDependency, keep_unmet_dependency
from django_jobs.models.groups import JobGroup, JobGroupMember
from django_jobs.models.jobs import Job, JobAttempt, new_public_id
from django_jobs.models.limits import LimitLock, LimitStart
from django_jobs.models.schedules import Schedule, ScheduleOccurrence
from django_jobs.models.stats import JobStat
from django_jobs.models.tokens import ApiToken, IdempotencyKey
from django_jobs.models.workers import QueueState, Worker

__all__ = [
    "ApiToken",
    "BulkAction",
    "IdempotencyKey",
    "Job",
    "JobAttempt",
    "JobDependency",
    "JobGroup",
    "JobGroupMember",
    "JobStat",
    "LimitLock",
    "LimitStart",
    "QueueState",
    "Schedule",
    "ScheduleOccurrence",
    "Worker",
    # Named by the migrations as django_jobs.models.<name>.
    "keep_unmet_dependency",
    "new_public_id",
]
