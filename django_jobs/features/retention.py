"""Retention: delete finished jobs past their age, in small batches, by command or by workers.

Only ``completed``, ``canceled`` and ``dead`` jobs are ever pruned, by ``finished_at``: a
canceled or dead one only once no waiting job depends on it, a completed one once every job that
depends on it has ended (``prunable``). Each batch
is its own short transaction (``JobQuerySet.delete_batch``) that touches only finished rows, which
are outside the claim index: pruning never blocks a claim and never holds a lock for long.
Workers prune through the ``Retention`` feature's heartbeat step, ``AutoPruner``. A pass
also drops the counts of finished jobs (minutes after two hours, hours after
``STATS_RETENTION``) and the steps and events of pruned workflows.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
import time
from datetime import date, datetime, timedelta

from django.db import DatabaseError

from django_jobs.core import clock
from django_jobs.core.db_errors import lock_conflict
from django_jobs.core.settings import jobs_settings
from django_jobs.core.shelves import as_age
from django_jobs.core.states import JobStatus
from django_jobs.engine import hooks

logger = logging.getLogger("django_jobs.worker")

PRUNABLE = (JobStatus.COMPLETED, JobStatus.CANCELED, JobStatus.DEAD)
OCCURRENCE_AGE = timedelta(days=1)
# How long the per-minute counts of finished jobs are kept: the overview charts the last hour.
MINUTE_ROWS_AGE = timedelta(hours=2)
# How long after a day has come its partitions are dropped (PostgreSQL's partitioned table).
DROP_GRACE = timedelta(hours=1)
# The shortest age whose jobs the batched prune leaves to their day's drop: a shorter one
# (minutes, hours) would keep its jobs up to a day longer than asked, so its jobs go by the
# batched DELETE at their age, as on a plain table.
DROPPED_FROM_AGE = timedelta(days=1)


def configured_ages() -> dict[str, timedelta | None]:
    """The ``RETENTION`` setting, one age (or None) per prunable status."""
    setting = jobs_settings.RETENTION or {}
    unknown = set(setting) - set(PRUNABLE)
    if unknown:
        raise ValueError(f"RETENTION has unknown statuses: {', '.join(sorted(unknown))}")
    return {status: as_age(setting.get(status), f"RETENTION[{str(status)!r}]")
            for status in PRUNABLE}


def prunable(status: str, age: timedelta, now: datetime | None = None):
    """The jobs of ``status`` finished more than ``age`` ago; but not a dead or canceled job a
    waiting job depends on (pruned, it would leave that job waiting on a deleted job, when it
    can still be retried, or the dependent canceled, and then pruned), nor a completed job a
    job that has not ended depends on (it may still read its result). A batch reads this
    filter again once its rows are locked (``JobQuerySet.delete_batch``), and the enqueue of a
    dependent locks its dependencies: a prune and that enqueue never both go ahead."""
    from django_jobs.features.dependencies import kept_for_dependents
    from django_jobs.models import Job

    cutoff = (now or clock.now(Job.objects.db)) - age
    # A job is created before it finishes, so ``created_at < cutoff`` holds for every job
    # pruned; it bounds the batch's walk of the created-at index (its order) to the jobs older
    # than the cutoff, where without it a pass with nothing to delete walks every row.
    rows = Job.objects.filter(status=status, finished_at__lt=cutoff, created_at__lt=cutoff)
    return rows.exclude(kept_for_dependents(status))


def kept_for_dependents(status: str, age: timedelta, now: datetime | None = None) -> int:
    """How many jobs of ``status`` past ``age`` pruning keeps for their dependents
    (``prunable``)."""
    from django_jobs.features import dependencies
    from django_jobs.models import Job

    cutoff = (now or clock.now(Job.objects.db)) - age
    return Job.objects.filter(dependencies.kept_for_dependents(status), status=status,
                              finished_at__lt=cutoff).count()


def prune(
    ages: dict[str, timedelta | None],
    *,
    batch_size: int | None = None,
    max_batches: int | None = None,
    dry_run: bool = False,
    now: datetime | None = None,
) -> dict[str, int]:
    """Delete (or, in a dry run, count) finished jobs older than their status's age.

    Returns the number per status. ``max_batches`` bounds the work of one call (per status).
    """
    from django_jobs.models import Job

    if dry_run:
        now = now or clock.now(Job.objects.db)
        counts, spared = prune_days(ages, now, batch_size or 1, dry_run=True)
        for status, rows in batched(ages, now, spared).items():
            counts[status] = counts.get(status, 0) + rows.count()
        return counts
    counts, _ = prune_pass(ages, batch_size=batch_size, max_batches=max_batches, now=now)
    return counts


def batched(ages: dict[str, timedelta | None], now: datetime,
            spared: tuple[date, date] | None):
    """The jobs the batched ``DELETE`` of a pass takes, per status with an age: those past it,
    but where the table is partitioned by day the ones whose day's partitions go by tomorrow
    (``spared``, from ``prune_days``), for ages of a day or more: left to the drop."""
    left = {status: prunable(status, age, now) for status, age in ages.items() if age is not None}
    if spared is None:
        return left
    return {status: rows.exclude(shelf__gte=spared[0], shelf__lte=spared[1])
            if (ages[status] or DROPPED_FROM_AGE) >= DROPPED_FROM_AGE else rows
            for status, rows in left.items()}


def prune_pass(
    ages: dict[str, timedelta | None],
    *,
    batch_size: int | None = None,
    max_batches: int | None = None,
    deadline: float | None = None,
    now: datetime | None = None,
) -> tuple[dict[str, int], bool]:
    """Delete finished jobs older than their status's age, in rounds of one batch per status
    while full batches come back; returns the number per status and whether it caught up.

    A status whose batch comes back short is done. ``max_batches`` bounds the rounds (so the
    batches per status); ``deadline`` (a ``time.monotonic()`` value) ends the pass after the
    round that reaches it, so one round always runs. Rounds rather than one status after the
    other: a backlog of completed jobs does not hold up the canceled and dead ones.
    """
    from django_jobs.models import Job

    batch_size = batch_size or int(jobs_settings.PRUNE_BATCH_SIZE)
    now = now or clock.now(Job.objects.db)
    counts, spared = prune_days(ages, now, batch_size)
    left = batched(ages, now, spared)
    for status in left:
        counts.setdefault(status, 0)
    rounds = 0
    while left and (max_batches is None or rounds < max_batches):
        for status, rows in list(left.items()):
            deleted = rows.delete_batch(batch_size)
            counts[status] = counts.get(status, 0) + deleted
            if deleted < batch_size:
                del left[status]
        rounds += 1
        if deadline is not None and time.monotonic() >= deadline:
            break
    prune_occurrences(now, batch_size)
    prune_stats(now, batch_size)
    prune_groups(ages, now, batch_size)
    prune_workflow_histories(ages, now, batch_size)
    return counts, not left


def prune_days(ages: dict[str, timedelta | None], now: datetime, batch_size: int,
               dry_run: bool = False) -> tuple[dict[str, int], tuple[date, date] | None]:
    """On PostgreSQL's partitioned table (``engine/postgres/day_drops.py``): the day
    partitions made ahead, and those whose day has come dropped, with what Django's delete does
    for their jobs' relations; the dead or canceled jobs a waiting job depends on move to the
    next day instead. One worker at a time does it; elsewhere nothing. Returns the jobs dropped
    by status, and the shelves whose partitions go by tomorrow (``day_drops.dropped_soon``),
    whose jobs the batched prune leaves to the drop: a job past its age there waits at most a
    day and ``DROP_GRACE`` more; one further out (its age was shortened since it finished) is
    deleted in batches now. ``dry_run``: the jobs the drops would take, counted, and nothing
    made or dropped."""
    from django_jobs.core.database_parts import parts
    from django_jobs.features.dependencies import waited_on
    from django_jobs.models import Job

    using = Job.objects.db
    partitions = parts(using).partitions
    # By the database's clock whatever ``now`` the caller prunes as of: a day's partition goes
    # once its day has come, never earlier, and DROP_GRACE after it, not at its first instant:
    # a finish whose prune day was reckoned just before the day came (an age of 0, a statement
    # slow to arrive) may still be on its way to that partition.
    db_now = clock.now(using).astimezone(dt.UTC)
    today = min(db_now.date(), now.astimezone(dt.UTC).date())
    drop_through = min(today, (db_now - DROP_GRACE).date())
    if dry_run:
        counts = partitions.dropped_jobs(drop_through, waited_on())
        return counts, partitions.dropped_soon(db_now.date())
    done = partitions.upkeep(today, ages.values(), waited_on(), batch_size,
                             drop_through=drop_through)
    return (dict(done["jobs"]) if done else {}), partitions.dropped_soon(db_now.date())


def prune_groups(ages: dict[str, timedelta | None], now: datetime, batch_size: int) -> int:
    """Drop the groups that finished longer ago than their jobs are kept (the longest age of
    completed, dead and canceled jobs: its jobs are pruned by then), with their member rows;
    none while a status of theirs is kept for ever. Returns the groups deleted."""
    from django_jobs.models import JobGroup

    kept = [ages.get(status) for status in (JobStatus.COMPLETED, JobStatus.DEAD,
                                            JobStatus.CANCELED)]
    if any(age is None for age in kept):
        return 0
    cutoff = now - max(age for age in kept if age is not None)
    old = JobGroup.objects.filter(finished_at__lt=cutoff).order_by("finished_at")
    total = 0
    while True:
        ids = list(old.values_list("pk", flat=True)[:batch_size])
        if not ids:
            return total
        JobGroup.objects.filter(pk__in=ids).delete()  # its members by cascade
        total += len(ids)


def prune_workflow_histories(ages: dict[str, timedelta | None], now: datetime,
                             batch_size: int) -> int:
    """Drop the steps and events of workflows whose job was pruned: rows written longer ago
    than the longest age of completed, dead and canceled jobs whose job is gone; none while a
    status is kept for ever. Returns the workflows whose rows went."""
    from django.db.models import Exists, OuterRef

    from django_jobs.models import Job, WorkflowEvent, WorkflowStep

    kept = [ages.get(status) for status in PRUNABLE]
    if any(age is None for age in kept):
        return 0
    cutoff = now - max(age for age in kept if age is not None)
    total = 0
    for model in (WorkflowStep, WorkflowEvent):
        orphans = model.objects.filter(created_at__lt=cutoff).filter(
            ~Exists(Job.objects.filter(pk=OuterRef("job_id")))).order_by("job_id")
        while True:
            ids = list(orphans.values_list("job_id", flat=True).distinct()[:batch_size])
            if not ids:
                break
            model.objects.filter(job_id__in=ids).delete()
            total += len(ids) if model is WorkflowStep else 0
    return total


def prune_occurrences(now: datetime, batch_size: int) -> int:
    """Drop schedule occurrences whose job was pruned, a day after they fell due.

    Safe for exactly-once: a worker only inserts occurrences after its schedule's
    ``last_occurrence``, which moves forward only, so an old occurrence is never due again.
    """
    from django_jobs.models.schedules import ScheduleOccurrence

    old = ScheduleOccurrence.objects.filter(job__isnull=True, at__lt=now - OCCURRENCE_AGE)
    total = 0
    while True:
        ids = list(old.values_list("pk", flat=True)[:batch_size])
        if not ids:
            return total
        total += ScheduleOccurrence.objects.filter(pk__in=ids).delete()[0]


def stats_age() -> timedelta | None:
    """The ``STATS_RETENTION`` setting as an age (ValueError for anything else)."""
    return as_age(jobs_settings.STATS_RETENTION, "STATS_RETENTION")


def prune_stats(now: datetime, batch_size: int) -> int:
    """Drop the counts of finished jobs (``JobStat``): the minute rows after
    ``MINUTE_ROWS_AGE`` (the charts read the last hour of them), the hour rows after
    ``STATS_RETENTION``; in batches of ``batch_size`` rows, oldest first. A row of a past
    minute or hour is never written again (a finish adds to the ones it runs in), so deleting
    it races no writer."""
    from django_jobs.models import JobStat
    from django_jobs.models.stats import HOUR, MINUTE

    ages = {MINUTE: MINUTE_ROWS_AGE, HOUR: stats_age()}
    total = 0
    for span, age in ages.items():
        if age is None:
            continue
        old = JobStat.objects.filter(span=span, bucket__lt=now - age).order_by("bucket")
        while True:
            ids = list(old.values_list("pk", flat=True)[:batch_size])
            if not ids:
                break
            total += JobStat.objects.filter(pk__in=ids).delete()[0]
    return total


class AutoPruner:
    """Called on each heartbeat; every ``PRUNE_INTERVAL`` seconds runs a prune pass.

    A pass deletes batches while full ones come back, for at most ``budget()`` seconds: it
    runs inside the heartbeat, and the worker claims, writes outcomes and pings systemd only
    between heartbeats, so a pass must stay short beside the heartbeat and the lease. A pass
    that ends on its budget with old jobs left goes on at the next heartbeat instead of an
    interval later, so a busy site's pruning keeps up: one worker gets up to ``PASS_FRACTION``
    of its main loop for it while behind, and each other worker adds as much (their batches
    skip the rows another pruner holds, ``JobQuerySet.delete_batch``).
    """

    # The share of the shorter of heartbeat and lease a pass may take: 1 s by default.
    PASS_FRACTION = 0.2

    def __init__(self) -> None:
        self.next_at: float | None = None

    @staticmethod
    def spread(interval: float) -> float:
        """Seconds to the next pass: an interval on average, at a random point between half
        and one and a half of it. Workers whose passes caught up together (they shared one
        backlog) would otherwise keep pruning together, each an interval after the last, and
        the rows kept would swing by all of them at once."""
        return interval * random.uniform(0.5, 1.5)  # noqa: S311 (spread, not a secret)

    @classmethod
    def budget(cls) -> float:
        """Seconds one pass may take, from the settings."""
        return cls.PASS_FRACTION * min(float(jobs_settings.HEARTBEAT_SECONDS),
                                       float(jobs_settings.LEASE_SECONDS))

    def __call__(self, worker_id: str) -> None:
        interval = jobs_settings.PRUNE_INTERVAL
        if not interval:
            return
        now = time.monotonic()
        if self.next_at is None:  # spread the workers out: first pass at a random point
            self.next_at = now + random.uniform(0, float(interval))  # noqa: S311 (spread, not a secret)
        if now < self.next_at:
            return
        self.next_at = now + self.spread(float(interval))  # a pass that fails waits too
        try:
            counts, caught_up = prune_pass(configured_ages(), deadline=now + self.budget())
        except DatabaseError as exc:
            if not lock_conflict(exc):
                raise
            # Another pruner's batch next to this one (InnoDB's foreign key checks lock the
            # gaps between rows): this batch was rolled back, and the other pruner goes on.
            logger.info("worker %s: pruning left to another worker (%s)", worker_id, exc)
            return
        if not caught_up:
            self.next_at = time.monotonic()
        if any(counts.values()):
            logger.info("worker %s: pruned %s%s", worker_id,
                        ", ".join(f"{n} {status}" for status, n in counts.items() if n),
                        "" if caught_up else "; more at the next heartbeat")


class Retention(hooks.Feature):
    """Pruning by the workers: each runs an ``AutoPruner`` on its heartbeat."""

    name = "retention"
    configured_by = ("PRUNE_INTERVAL",)
    steps_at_start = False  # a worker's first pass falls at a random point of an interval

    def periodic_steps(self) -> tuple[hooks.Step, ...]:
        return (AutoPruner(),)
