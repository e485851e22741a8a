"""The engine's verbs on leases and waiting jobs: heartbeat, progress, rescue, release at
shutdown, release of waiting jobs; and the writes of waiting jobs the dependencies feature
asks for (released, or canceled when a dependency will not complete). Mixed into ``Engine``
(``engine/verbs.py``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from datetime import date, datetime, timedelta
from functools import reduce
from operator import or_
from typing import TYPE_CHECKING

from django.db import transaction
from django.db.models import Case, F, Q, Value, When

from django_jobs.core import clock
from django_jobs.core.shelves import OPEN_SHELF
from django_jobs.core.states import CANCELED, PENDING, PROCESSING, WAITING
from django_jobs.engine import hooks
from django_jobs.engine.moved_rows import once_more_if_moved
from django_jobs.engine.shelving import shelf_for
from django_jobs.engine.unique_column import keep_key_if
from django_jobs.engine.writes import UpdateFields

if TYPE_CHECKING:
    from django_jobs.core.json_rules import JSONObject
    from django_jobs.models import Job
    from django_jobs.models.managers import JobManager, JobQuerySet


class LeaseVerbs:
    """``db`` is the engine's database, ``jobs`` the jobs' manager on it (``Job.objects`` on
    that database: what the verbs query, and what hooks get); ``row_locks`` is the engine's."""

    row_locks: bool

    def __init__(self, using: str) -> None:
        from django_jobs.models import Job

        self.db = using
        self.jobs: JobManager = Job.objects.db_manager(using)

    def fenced(self, job: Job) -> JobQuerySet:
        """The job's row, only while ``job`` still holds its lease. A processing row is on the
        open shelf; naming it plans the write on the open partition of a partitioned table."""
        return self.jobs.filter(pk=job.pk, lease_token=job.lease_token, status=PROCESSING,
                                shelf=OPEN_SHELF)

    def shelve_attempts(self, jobs: Iterable[Job]) -> None:
        """Give the earlier attempts of these jobs, just finished, their job's shelf
        (``core/shelves.py``): a finished job's attempts are pruned with it. One UPDATE per
        prune day among them (one, as a rule); none for jobs still open. The attempts are
        those on the open shelf, where every attempt of an open job is."""
        from django_jobs.models import JobAttempt

        by_shelf: dict[date, list[int]] = {}
        for job in jobs:
            if job.shelf != OPEN_SHELF:
                by_shelf.setdefault(job.shelf, []).append(job.pk)
        attempts = JobAttempt.objects.using(self.db)
        for shelf, ids in by_shelf.items():
            attempts.filter(job_id__in=ids, shelf=OPEN_SHELF).update(shelf=shelf)

    @once_more_if_moved
    def write_fenced(self, job: Job, fields: UpdateFields) -> bool:
        """Update the job's row with ``fields`` if ``job`` still holds its lease."""
        return bool(self.fenced(job).update(**fields))

    @once_more_if_moved
    def heartbeat(
        self, *, held: dict[int, uuid.UUID], lease_seconds: float
    ) -> tuple[set[int], set[int]]:
        """Renew the leases of the jobs a worker holds (job id to lease token).

        Returns the ids still held, and the ids of those with a cancel request.
        """
        if not held:
            return set(), set()
        now = clock.now(self.db)
        with transaction.atomic(using=self.db):
            self.renewal(held).update(leased_until=now + timedelta(seconds=lease_seconds))
            # On the open shelf, where a processing job is: on a table partitioned by shelf
            # the read is planned on the open partition alone, not on every day's, whose
            # statistics may say empty while it fills (a scan of all of today's rows).
            rows = self.jobs.filter(pk__in=list(held), shelf=OPEN_SHELF).values_list(
                "pk", "status", "lease_token", "cancel_requested"
            )
            still = {pk: cancel for pk, status, token, cancel in rows
                     if status == PROCESSING and held[pk] == token}
        return set(still), {pk for pk, cancel in still.items() if cancel}

    def renewal(self, held: dict[int, uuid.UUID]) -> JobQuerySet:
        """The rows of ``held`` (job id to lease token) whose lease they still hold: processing,
        under that very token.

        Found by primary key alone: the status is tested through an expression no index
        serves, so the partial lease index (``status = 'processing'``) is not a way to them.
        While a snapshot older than the worker's claims is open, that index keeps an entry for
        every job claimed since, and a renewal that read it would pass them all at every
        heartbeat of every worker; its statistics, taken when few jobs were processing, make
        it look the cheapest way (``tests/engine/test_renewal_plans.py``).
        """
        by_token: dict[uuid.UUID, list[int]] = {}
        for pk, token in held.items():
            by_token.setdefault(token, []).append(pk)
        fence = reduce(or_, (Q(pk__in=pks, lease_token=token) for token, pks in by_token.items()))
        processing = Case(When(status=PROCESSING, then=Value(1)), default=Value(0))
        return self.jobs.alias(processing=processing).filter(
            fence, pk__in=list(held), processing=1, shelf=OPEN_SHELF
        )

    @once_more_if_moved
    def record_progress(self, job: Job, fraction: float, message: str) -> bool:
        """Store a running job's progress, fenced on its lease (``set_progress``)."""
        progress = {"fraction": fraction, "message": message}
        changed = self.fenced(job).update(progress=progress)
        if changed:
            job.progress = progress
        return bool(changed)

    @once_more_if_moved
    def rescue(self, *, limit: int = 100, now: datetime | None = None,
               since: datetime | None = None) -> list[Job]:
        """Record the lost attempts of jobs whose lease expired (their worker died): a crash,
        counted apart from errors (the rescue hook of ``features/crashes.py``).

        Any worker may run this at any time: every write is fenced on the old lease token,
        so two rescuers never both record the same lost attempt.

        ``since``: the time of the caller's last rescue that found no lease run out. Only the
        leases that ran out from then on are looked for, so the look reads the lease index
        from there: while a snapshot older than them is open, the entries of every job
        claimed and finished since stay in that index, under leases long run out, and a look
        from the start would pass them all (``worker/heartbeat.py``).
        """
        now = now or clock.now(self.db)
        stale = self.jobs.stale(now)
        if since is not None:
            stale = stale.filter(leased_until__gte=since)
        if not stale.exists():
            # Almost every heartbeat: one read, in autocommit, that locks no row.
            return []
        with transaction.atomic(using=self.db):
            return hooks.rescue(self.jobs, limit=limit, now=now)

    @once_more_if_moved
    def release(self, jobs: Sequence[Job], delay: float = 0.0) -> int:
        """Hand held jobs back to the queue at shutdown, without spending their attempt; they
        are due ``delay`` seconds from now (a stopping worker whose handler still runs keeps
        them from other workers until its process is gone: ``worker/shutdown.py``)."""
        from django_jobs.models import JobAttempt

        now = clock.now(self.db)
        released = 0
        with transaction.atomic(using=self.db):
            for job in jobs:
                if not self.fenced(job).update(
                    status=PENDING, attempt=F("attempt") - 1,
                    run_at=now + timedelta(seconds=delay), updated_at=now,
                    leased_until=None, started_at=None,
                ):
                    continue
                released += 1
                JobAttempt.objects.using(self.db).create(
                    job=job, number=job.attempt, worker_id=job.worker_id,
                    started_at=job.started_at or now, finished_at=now,
                    outcome=JobAttempt.Outcome.RELEASED,
                )
        return released

    def release_claim(self, lease_token: uuid.UUID) -> int:
        """Hand back the jobs still held under ``lease_token``: a claim the database made but
        whose reply never reached the worker (the connection dropped after the commit was
        sent), so no thread runs them and no heartbeat renews them. Their attempt is unspent,
        as at shutdown."""
        held = list(self.jobs.filter(lease_token=lease_token, status=PROCESSING))
        return self.release(held) if held else 0

    def release_waiting(self) -> int:
        """Make pending the waiting jobs no feature holds back any more (the heartbeat's
        sweep: dependencies all completed)."""
        waiting = self.jobs.filter(status=WAITING)
        if not waiting.exists():  # as rescue: one read that locks nothing, most heartbeats
            return 0
        with transaction.atomic(using=self.db):
            return hooks.release(self.jobs, waiting, clock.now(self.db))

    @once_more_if_moved
    def mark_has_dependents(self, ids: list[int]) -> None:
        """Flag these jobs as depended on, and lock their rows until the caller commits
        (``lock_depended_on``): a prune's ``FOR UPDATE SKIP LOCKED`` passes over them, and a
        delete waits for the dependent's enqueue, then sees its link. The flag first: two
        enqueues flagging one job then wait for each other in turn, never in a circle."""
        self.jobs.filter(pk__in=ids, has_dependents=False).update(has_dependents=True)
        self.lock_depended_on(ids)

    def lock_depended_on(self, ids: list[int]) -> None:
        """Lock these jobs' rows against a delete until commit. Here the ORM's ``FOR UPDATE``
        (no lighter lock is portable); PostgreSQL and MariaDB take a shared one, which a finish
        and other enqueues do not wait for; SQLite has one writer at a time, and no lock."""
        if self.row_locks:
            list(self.jobs.filter(pk__in=ids).order_by("pk").select_for_update()
                 .values_list("pk", flat=True))

    def cancel_waiting(self, ids: list[int], error: JSONObject, now: datetime) -> list[Job]:
        """Waiting jobs among ``ids`` become canceled, with ``error`` saying why (a dependency
        that will not complete); returns them. In the caller's transaction, which the features
        that act on ended jobs join (callbacks, groups, the canceled jobs' own dependents)."""
        with transaction.atomic(using=self.db):
            waiting = self.jobs.filter(pk__in=ids, status=WAITING).order_by("pk")
            if self.row_locks:
                waiting = waiting.select_for_update()
            held = list(waiting)
            if not held:
                return []
            shelf = shelf_for(CANCELED, now, self.db)
            self.jobs.filter(pk__in=[job.pk for job in held], status=WAITING).update(
                status=CANCELED, error=error, updated_at=now, finished_at=now, shelf=shelf,
                unique_key=keep_key_if(CANCELED),
            )
            for job in held:
                job.__dict__.update(status=CANCELED, error=error, updated_at=now,
                                    finished_at=now, shelf=shelf)
            self.shelve_attempts(held)
            hooks.ended(held, self.db)
        return held

    def make_pending(self, ids: list[int], now: datetime) -> int:
        """Waiting jobs among ``ids`` become pending, due now; returns how many."""
        return self.jobs.filter(pk__in=ids, status=WAITING).update(
            status=PENDING, run_at=now, updated_at=now
        )
