"""Jobs and their attempts.

Rows change only through the engine's verbs (``engine/``); the methods here and those of
``models/managers.py`` delegate to them.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import TYPE_CHECKING, Unpack

from asgiref.sync import sync_to_async
from django.db import models, router, transaction
from django.db.models import Q
from django.utils import timezone

from django_jobs.core.contract import PLAIN, EnqueueKeywords, EnqueueOptions, engine
from django_jobs.core.shelves import OPEN_SHELF
from django_jobs.core.states import DependencyPolicy, JobStatus, Outcome
from django_jobs.models.managers import JobManager, ReloadsWhereWritten, RoutedManager

if TYPE_CHECKING:
    from django_jobs.core.json_rules import JSONValue
    from django_jobs.models.managers import JobQuerySet

PUBLIC_ID_PREFIX = "j-"
# The states the status index holds: all but processing and completed (see Job.Meta.indexes).
LISTED_BY_STATUS = [
    JobStatus.WAITING, JobStatus.PENDING, JobStatus.FAILED, JobStatus.DEAD, JobStatus.CANCELED,
]

# The states of the updated index: the API's ``since`` is for the jobs that went wrong lately.
UPDATED_SINCE = [JobStatus.FAILED, JobStatus.DEAD]


def new_public_id() -> str:
    """``j-`` and 20 random hex digits: unguessable, short enough to read out."""
    return PUBLIC_ID_PREFIX + secrets.token_hex(10)


class Job(ReloadsWhereWritten, models.Model):
    Status = JobStatus  # pending, processing, completed, failed, dead, canceled, waiting

    # Unique through Meta.constraints, not unique=True: on PostgreSQL that would add a second
    # (varchar_pattern_ops) index for LIKE searches nobody runs, which every update pays for.
    public_id = models.CharField(max_length=24, default=new_public_id, editable=False)
    type = models.CharField(max_length=100)
    payload = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    priority = models.SmallIntegerField(default=0)
    queue = models.CharField(max_length=100, default="default")
    run_at = models.DateTimeField(default=timezone.now)
    attempt = models.PositiveIntegerField(default=0)
    max_attempts = models.PositiveSmallIntegerField(default=3)
    # Times a worker process died while it held the job, counted apart from errors
    # (features/crashes.py).
    crashes = models.PositiveSmallIntegerField(default=0)
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
    # Unique jobs (django_jobs/features/unique.py): "<state flags>|<type>:<key>", held while the
    # job is in one of the flagged states, cleared when it leaves them.
    unique_key = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001 NULL: no key
    # Progress reported by the handler: {"fraction": 0.5, "message": "..."}
    progress = models.JSONField(null=True, blank=True)
    # Dependencies (django_jobs/features/dependencies.py): some waiting job depends on this one
    has_dependents = models.BooleanField(default=False)
    # The OpenTelemetry trace context of the enqueue (core/tracing.py): W3C traceparent and
    # tracestate as compact JSON; NULL when no span was active (or tracing is not installed)
    trace_context = models.TextField(null=True, blank=True, editable=False)  # noqa: DJ001 NULL: none
    # The group this job belongs to (features/groups.py), which counts it when it ends. No
    # database constraint and no index: nothing reads jobs by group (JobGroupMember does).
    group = models.ForeignKey("django_jobs.JobGroup", null=True, blank=True, editable=False,
                              on_delete=models.DO_NOTHING, db_constraint=False,
                              db_index=False, related_name="+")
    # What this job does if a dependency goes dead or is canceled: NULL waits (the default),
    # "cancel" or "run" (core/states.py DependencyPolicy). Nullable: adding it rewrites no row.
    on_dependency_failure = models.CharField(  # noqa: DJ001 NULL: wait
        max_length=8, null=True, blank=True,
        choices=[(p.value, p.label) for p in DependencyPolicy if p != DependencyPolicy.WAIT])
    # The day the finished job may be pruned, or OPEN_SHELF while it is open, KEPT_SHELF if
    # kept for ever (core/shelves.py); written by the engine with every change of status. The
    # database default makes an INSERT that leaves it out an open row, and lets the column be
    # added without rewriting the table.
    shelf = models.DateField(default=OPEN_SHELF, db_default=OPEN_SHELF, editable=False)

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
                condition=Q(status__in=[JobStatus.PENDING, JobStatus.FAILED]),
            ),
            models.Index(
                "queue",
                models.F("priority").desc(),
                "run_at",
                "id",
                name="django_jobs_ready_idx",
                condition=Q(status__in=[JobStatus.PENDING, JobStatus.FAILED]),
            ),
            # Rescue looks for processing rows whose lease ran out.
            models.Index(
                fields=["leased_until"],
                name="django_jobs_lease_idx",
                condition=Q(status=JobStatus.PROCESSING),
            ),
            # Lists filtered by status (admin, API), newest first. Partial: a job passes
            # through processing and completed on every run, and those rows add no entry, so
            # the claim and the finish each write one index fewer. Completed jobs (most rows)
            # are listed through the created index, processing ones (few) the lease index.
            models.Index(
                fields=["status", "-created_at"],
                name="django_jobs_status_idx",
                condition=Q(status__in=LISTED_BY_STATUS),
            ),
            models.Index(fields=["-created_at"], name="django_jobs_created_idx"),
            # The API's failed or dead jobs updated since a time (``GET /jobs?status=failed&
            # since=...``): the rows in range, where the status index reads every job of the
            # status until 50 match. Partial: only a job's retry or death writes an entry, never
            # a claim or a finish. On ``updated_at`` alone, so it has nothing to offer a list
            # without ``since``: neither the status as a key nor the lists' order, which the
            # status index gives. Not built on MariaDB and MySQL (migration 0025), which have no
            # partial index: there a full one would take an entry on every claim and finish.
            models.Index(
                fields=["updated_at"],
                name="django_jobs_updated_idx",
                condition=Q(status__in=UPDATED_SINCE),
            ),
        ]
        constraints = [
            models.UniqueConstraint(fields=["public_id"], name="django_jobs_public_id_key"),
            # At most one job per unique key (features/unique.py). Partial: the many jobs without
            # a key (NULL) add no entry, so their inserts and updates skip this index entirely.
            models.UniqueConstraint(
                fields=["unique_key"], name="django_jobs_unique_key",
                condition=Q(unique_key__isnull=False),
            ),
        ]
        permissions = [
            ("retry_job", "Can retry jobs"),
            ("cancel_job", "Can cancel jobs"),
            ("act_on_filter_job", "Can retry, cancel or delete every job matching a filter"),
        ]

    def __str__(self) -> str:
        return f"{self.public_id} {self.type} ({self.status})"

    @classmethod
    def enqueue(cls, type: str, payload: JSONValue = None, **options: Unpack[EnqueueKeywords]
                ) -> Job:
        """Record a job in the caller's transaction: a rollback leaves no job.

        The options (``EnqueueKeywords``): ``priority`` is low, normal, high or an integer from
        -100 to 100 (higher runs first); ``queue`` a queue's name (default: the handler's, else
        ``DEFAULT_QUEUE``); ``delay`` a timedelta or seconds, or ``run_at`` an aware datetime;
        ``max_attempts`` from 1 to 1000. Raises InvalidJob (a ValidationError naming the field)
        or UnknownJobType on bad input.
        ``callback_url``: where the job's JSON is POSTed, signed, once it ends (see callbacks).

        ``unique_key`` keeps at most one job of this type per key among ``unique_states``
        (default pending, processing, failed), within fixed windows of ``unique_for``; a
        duplicate returns the existing job, with ``duplicate = True``. ``depends_on`` (jobs or
        ids, or a mapping of names to them, the names ``dependency_results()`` knows them by)
        makes the job wait, in state waiting, until all of those have completed.
        ``on_dependency_failure`` says what it does if one goes dead or is canceled: ``"wait"``
        (the default: until it is retried and completes), ``"cancel"`` (canceled at once, the
        dependency named in its error) or ``"run"`` (it counts as done).
        """
        return engine(router.db_for_write(cls)).enqueue(
            type, payload, EnqueueOptions(**options) if options else PLAIN)

    @classmethod
    def enqueue_many(cls, type: str, payloads: Iterable[JSONValue],
                     **options: Unpack[EnqueueKeywords]) -> list[Job]:
        """Insert one job per payload, with the options of ``enqueue``, in one statement."""
        return engine(router.db_for_write(cls)).enqueue_many(
            type, payloads, EnqueueOptions(**options))

    @classmethod
    async def aenqueue(cls, type: str, payload: JSONValue = None,
                       **options: Unpack[EnqueueKeywords]) -> Job:
        """``enqueue`` for async code (an ``async def`` view), with the same options.

        The write runs as Django's async ORM runs its queries (``sync_to_async``,
        thread-sensitive): on the connection of the caller's other thread-sensitive code.
        Django has no async transaction API, so the job commits at once unless the caller
        opened a transaction there (docs/howto-async-enqueue.md). InvalidJob and
        UnknownJobType are raised here, before anything is written.
        """
        return await sync_to_async(cls.enqueue)(type, payload, **options)

    @classmethod
    async def aenqueue_many(cls, type: str, payloads: Iterable[JSONValue],
                            **options: Unpack[EnqueueKeywords]) -> list[Job]:
        """``enqueue_many`` for async code, as ``aenqueue``."""
        return await sync_to_async(cls.enqueue_many)(type, payloads, **options)

    @property
    def progress_fraction(self) -> float | None:
        """The last fraction (0 to 1) the handler reported with ``set_progress``, or None."""
        return (self.progress or {}).get("fraction")

    @property
    def progress_message(self) -> str:
        """The last message the handler reported with ``set_progress``."""
        return (self.progress or {}).get("message", "")

    @property
    def duration(self) -> timedelta | None:
        if self.started_at and self.finished_at:
            return self.finished_at - self.started_at
        return None

    def retry(self) -> bool:
        """Make a dead, failed or canceled job pending now; True if it changed."""
        return self._staff(lambda jobs: jobs.retry())

    def cancel(self) -> bool:
        """Cancel a pending or failed job, or ask the worker to stop a processing one."""
        return self._staff(lambda jobs: jobs.cancel())

    def run_now(self) -> bool:
        """Make a scheduled job due now."""
        return self._staff(lambda jobs: jobs.run_now())

    def _staff(self, verb: Callable[[JobQuerySet], int]) -> bool:
        """Run a staff verb on this job and reload it in the verb's transaction: the instance
        holds what this action left, not what an action right after it did. Raises
        ``Job.DoesNotExist`` if the job was deleted, ``JobConflict`` if another action met
        this one (``engine/staff.py``)."""
        jobs = Job.objects.filter(pk=self.pk)
        with transaction.atomic(using=jobs.db):
            changed = verb(jobs)
            self.refresh_from_db()
        return bool(changed)


class JobAttempt(models.Model):
    Outcome = Outcome  # completed, failed, dead, lost, canceled, released, snoozed

    # No database foreign key: PostgreSQL would check every attempt row against its job at
    # commit, a quarter of the server's time to finish a batch
    # (docs/explanation-performance.md). Rows are written only by the finish statement, which
    # joins them to the job rows it updated, and jobs are deleted only through the ORM, which
    # deletes their attempts (on_delete).
    job = models.ForeignKey(
        Job, on_delete=models.CASCADE, related_name="attempts", db_constraint=False
    )
    number = models.PositiveIntegerField()
    worker_id = models.CharField(max_length=100, blank=True, default="")
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    error = models.JSONField(null=True, blank=True)
    cpu_time = models.FloatField(null=True, blank=True, help_text="seconds")
    peak_memory = models.BigIntegerField(null=True, blank=True, help_text="bytes")
    # Its job's shelf (core/shelves.py): a finished job's attempts are pruned with it.
    shelf = models.DateField(default=OPEN_SHELF, db_default=OPEN_SHELF, editable=False)

    objects = RoutedManager()

    class Meta:
        ordering = ["job_id", "started_at", "id"]

    def __str__(self) -> str:
        return f"attempt {self.number} of job {self.job.public_id}: {self.outcome}"

    @property
    def duration(self) -> timedelta | None:
        if self.finished_at:
            return self.finished_at - self.started_at
        return None
