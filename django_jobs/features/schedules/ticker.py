"""Enqueue due occurrences, from any worker's heartbeat, each exactly once.

Every worker computes the same occurrence times from the same setting. For each one it picks,
it inserts a ``ScheduleOccurrence`` row and the job in one transaction; the unique constraint on
(schedule, at) lets exactly one worker's insert through, and a loser's savepoint rolls back its
job with it. No worker is special, none needs a lock, and a crash between the two inserts is
impossible because they commit together. The ``Schedules`` feature gives each worker a
``Ticker`` for its heartbeat.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models import Q

from django_jobs.core import clock
from django_jobs.engine import hooks
from django_jobs.exceptions import InvalidJob
from django_jobs.features.schedules.config import ScheduleSpec, schedules
from django_jobs.models.schedules import Schedule, ScheduleOccurrence

logger = logging.getLogger("django_jobs.worker")


class Ticker:
    """The heartbeat step: costs no query while no schedule is configured."""

    def __call__(self, worker_id: str = "", now: datetime | None = None) -> int:
        specs = schedules()
        if not specs:
            return 0
        return tick(specs, now or clock.now(Schedule.objects.db), worker_id)


class Schedules(hooks.Feature):
    """Recurring jobs: every worker runs a ``Ticker`` on its heartbeat."""

    name = "schedules"
    configured_by = ("SCHEDULES", "handler.periodic")

    def periodic_steps(self) -> tuple[hooks.Step, ...]:
        return (Ticker(),)


def tick(specs: dict[str, ScheduleSpec], now: datetime, worker_id: str = "") -> int:
    """Enqueue what is due for every schedule; returns the number of jobs this call enqueued."""
    rows = schedule_rows(specs, now)
    enqueued = 0
    for name, spec in specs.items():
        row = rows[name]
        if row.paused or (row.next_run_at is not None and row.next_run_at > now):
            continue
        try:
            enqueued += run_due(spec, row, now, worker_id)
        except InvalidJob as exc:  # one bad schedule must not hold the others back
            logger.error("worker %s: schedule %s: cannot enqueue: %s", worker_id, name,
                         exc.messages)
    return enqueued


def schedule_rows(specs: dict[str, ScheduleSpec], now: datetime) -> dict[str, Schedule]:
    """The row of each schedule by name, those not there yet created (by this worker or, in a
    race, another), first due after ``now``."""
    rows = {row.name: row for row in Schedule.objects.filter(name__in=list(specs))}
    missing = [Schedule(name=name, next_run_at=specs[name].next_after(now), created_at=now,
                        updated_at=now) for name in specs if name not in rows]
    if missing:
        Schedule.objects.bulk_create(missing, ignore_conflicts=True)
        rows.update({row.name: row for row in Schedule.objects.filter(
            name__in=[m.name for m in missing])})
    return rows


def run_due(spec: ScheduleSpec, row: Schedule, now: datetime, worker_id: str = "") -> int:
    due = spec.due(row.last_occurrence or row.created_at, now)
    chosen = spec.to_enqueue(due, now)
    enqueued, last_job = 0, None
    for at in chosen:
        job = enqueue_occurrence(spec, at)
        if job is not None:
            enqueued, last_job = enqueued + 1, job
            logger.info("worker %s: schedule %s: enqueued %s for %s", worker_id, spec.name,
                        job.public_id, at.isoformat())
    latest = due[-1] if due else row.last_occurrence
    fields = {"next_run_at": spec.next_after(now), "updated_at": now}
    if latest is not None:
        fields["last_occurrence"] = latest
    if last_job is not None:
        fields.update(last_run_at=now, last_job=last_job)
    rows = Schedule.objects.filter(name=spec.name)
    if latest is not None:  # never move it backwards (a slower worker may write after us)
        rows = rows.filter(Q(last_occurrence__isnull=True) | Q(last_occurrence__lte=latest))
    rows.update(**fields)
    return enqueued


def enqueue_occurrence(spec: ScheduleSpec, at: datetime, *, manual: bool = False):
    """Insert the occurrence and its job together; None if another worker already did."""
    from django_jobs.models import Job

    try:
        with transaction.atomic(using=ScheduleOccurrence.objects.db):
            occurrence = ScheduleOccurrence.objects.create(
                schedule_id=spec.name, at=at, manual=manual,
                created_at=clock.now(Schedule.objects.db),
            )
            job = Job.enqueue(spec.type, spec.payload, queue=spec.queue, priority=spec.priority,
                              max_attempts=spec.max_attempts)
            occurrence.job = job
            occurrence.save(update_fields=["job"])
    except IntegrityError:
        return None
    return job


def run_now(name: str):
    """Enqueue one run of a schedule at once (admin's "run now"); returns the job."""
    spec = schedules()[name]
    Schedule.objects.get_or_create(
        name=name, defaults={"next_run_at": spec.next_after(clock.now(Schedule.objects.db))}
    )
    now = clock.now(Schedule.objects.db)
    job = enqueue_occurrence(spec, now, manual=True)
    if job is not None:
        Schedule.objects.filter(name=name).update(last_run_at=now, last_job=job, updated_at=now)
    return job


def set_paused(names: list[str], paused: bool) -> int:
    """Pause or resume schedules. Resuming skips what fell due while paused."""
    now = clock.now(Schedule.objects.db)
    fields = {"paused": paused, "updated_at": now}
    if not paused:
        fields["last_occurrence"] = now
    return Schedule.objects.filter(name__in=names, paused=not paused).update(**fields)
