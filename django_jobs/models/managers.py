"""The jobs' manager and queryset, and the queues' manager: the reads (adjectives) and the
verbs, each a one-line delegation to the database's engine (``django_jobs/engine/``).

This module imports no engine code: layers point one way (models <- engine), and the engine
is found through ``core/contract.py``, which the app fills in when Django starts.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Self, Unpack

from asgiref.sync import sync_to_async
from django.db import connections, models, router
from django.db.models import Q

from django_jobs.core import clock, contract
from django_jobs.core.contract import ClaimKey, ClaimRequest, EnqueueKeywords, EnqueueOptions
from django_jobs.core.shelves import FINISHED, OPEN_BEFORE
from django_jobs.core.states import DEAD, FAILED, PENDING, PROCESSING, READY_STATES

if TYPE_CHECKING:
    from django_jobs.core.json_rules import JSONValue
    from django_jobs.core.outcomes import AttemptOutcome
    from django_jobs.models import Job


class RoutedQuerySet(models.QuerySet):
    """A queryset of the app's tables that reads where it writes: the alias the site's routers
    give for writing the model (``router.db_for_write``), unless ``using()`` names one.

    Django sends a plain queryset's reads to ``router.db_for_read``, which a primary/replica
    router points at a replica: a job read there may not exist yet, and a locking read
    (``select_for_update``) there runs outside the transaction that writes on the primary. The
    app's reads and verbs are a queue's reads (what is ready, what this worker holds), so they
    all go to the database the jobs live on (``schema.jobs_database()`` for ``Job``)."""

    @property
    def db(self) -> str:
        # _db and _hints: Django's own attributes (the stubs leave them out of QuerySet).
        return self._db or router.db_for_write(self.model, **self._hints)  # type: ignore[attr-defined]


# The managers' bases as module names: the stubs' plugin types a manager made by
# ``from_queryset`` only when it is assigned to one (then ``Job.objects.filter()`` is typed).
_RoutedManagerBase = models.Manager.from_queryset(RoutedQuerySet)


class RoutedManager(_RoutedManagerBase):
    """The manager of the app's tables: its queries go where the model is written
    (``RoutedQuerySet``)."""

    @property
    def db(self) -> str:
        return self._db or router.db_for_write(self.model, **self._hints)  # type: ignore[attr-defined]


class ReloadsWhereWritten:
    """A model mixin: ``refresh_from_db`` reloads from the database the row was read from or
    written to (the jobs' database for a new instance), not the router's read alias, since a
    replica may lag behind (``job.cancel()`` reloads the job it locks)."""

    def refresh_from_db(self, using: str | None = None, fields: Iterable[str] | None = None,
                        from_queryset: models.QuerySet | None = None) -> None:
        if using is None and from_queryset is None:
            using = self._state.db or type(self).objects.db  # type: ignore[attr-defined]
        super().refresh_from_db(using, fields, from_queryset)  # type: ignore[misc]


class JobQuerySet(RoutedQuerySet):
    # Reads: adjectives.

    def in_states(self, *states: str) -> Self:
        """Jobs in one of ``states``; where none is finished, named on the open shelf too
        (``open_shelf``)."""
        qs = self.filter(status=states[0]) if len(states) == 1 else self.filter(
            status__in=states)
        return qs.open_shelf() if set(states).isdisjoint(FINISHED) else qs

    def open_shelf(self) -> Self:
        """These jobs, on the open shelf, where every open job is (``core/shelves.py``).

        On PostgreSQL, whose jobs table is partitioned by shelf, the condition has a read
        planned on the open partition alone. Without it the planner plans the read on every
        partition, one a day for as long as ``RETENTION`` keeps jobs (about forty by default),
        and that planning is most of a small read's time: a few milliseconds, where the
        read itself takes a fraction of one (``docs/explanation-history-partitions.md``).
        A range, as the claim names it (``engine/postgres/statements.py``). Elsewhere the
        tables are plain and the condition is left out: it would only filter rows that all
        pass it, and give MariaDB's optimizer one more index to weigh."""
        if connections[self.db].vendor != "postgresql":
            return self
        return self.filter(shelf__lt=OPEN_BEFORE)

    def ready(self, queues: Sequence[str] | None = None, now: datetime | None = None) -> Self:
        """Jobs a worker may claim now, in claim order."""
        qs = self.in_states(*READY_STATES).filter(run_at__lte=now or clock.now(self.db))
        if queues:
            qs = qs.filter(queue__in=queues)
        return qs.order_by("-priority", "run_at", "id")

    def after(self, key: ClaimKey) -> Self:
        """Those of these jobs of ``key``'s priority that come after it in claim order."""
        return self.filter(Q(run_at__gt=key.run_at) | Q(run_at=key.run_at, id__gt=key.id),
                           priority=key.priority)

    def stale(self, now: datetime | None = None) -> Self:
        """Processing jobs whose lease ran out: their worker is presumed dead."""
        return self.in_states(PROCESSING).filter(leased_until__lt=now or clock.now(self.db))

    def dead(self) -> Self:
        return self.filter(status=DEAD)

    def failed(self) -> Self:
        return self.in_states(FAILED)

    def pending(self) -> Self:
        return self.in_states(PENDING)

    # Writes: verbs (engine/staff.py). Each narrows to the rows it applies to and returns how
    # many changed.

    def retry(self) -> int:
        """Dead, failed and canceled jobs become pending now, with at least one attempt left."""
        return contract.engine(self.db).retry(self)

    def retry_with_payload(self, payload: JSONValue) -> int:
        """Dead jobs get a corrected payload and are retried (as ``retry``) in one statement.

        Raises InvalidJob if the payload is not JSON-serialisable; changes nothing then.
        """
        return contract.engine(self.db).retry_with_payload(self, payload)

    def cancel(self) -> int:
        """Pending and failed jobs become canceled; processing ones get a cancel request."""
        return contract.engine(self.db).cancel(self)

    def delete_batch(self, limit: int) -> int:
        """Delete up to ``limit`` of these jobs (oldest first) and their attempts, in one short
        transaction; returns how many jobs went. Rows another transaction holds are skipped."""
        return contract.engine(self.db).delete_batch(self, limit)

    def run_now(self) -> int:
        """Scheduled (or backing-off) jobs become due now."""
        return contract.engine(self.db).run_now(self)

    def discard(self) -> int:
        """Delete jobs no worker holds (all but processing) with their attempts; returns jobs."""
        return contract.engine(self.db).discard(self)


class QueueStateManager(RoutedManager):
    """Pause and resume queues; workers re-read the paused set at every heartbeat."""

    def pause(self, name: str) -> bool:
        """Stop workers claiming from queue ``name``; True if it was running."""
        return contract.engine(self.db).pause(name)

    def resume(self, name: str) -> bool:
        """Let workers claim from queue ``name`` again; True if it was paused."""
        return contract.engine(self.db).resume(name)

    def known(self) -> list[dict[str, object]]:
        """Every queue with a pause row or a live worker, by name, and whether it is paused."""
        worker = self.model._meta.apps.get_model("django_jobs", "Worker")
        paused = dict(self.values_list("name", "paused"))
        names = set(paused)
        for queues in worker.objects.using(self.db).values_list("queues", flat=True):
            names.update(name for name in queues or [] if isinstance(name, str))
        return [{"name": name, "paused": paused.get(name, False)} for name in sorted(names)]


_JobManagerBase = RoutedManager.from_queryset(JobQuerySet)


class JobManager(_JobManagerBase):
    """The worker's verbs (``engine/verbs.py``; on PostgreSQL ``engine/postgres/engine.py``), on the
    alias the jobs are written to (``RoutedManager``)."""

    def enqueue(self, type: str, payload: JSONValue = None, **options: Unpack[EnqueueKeywords]
                ) -> Job:
        """``Job.enqueue`` on this manager's database."""
        return contract.engine(self.db).enqueue(type, payload, EnqueueOptions(**options))

    def enqueue_many(self, type: str, payloads: Iterable[JSONValue],
                     **options: Unpack[EnqueueKeywords]) -> list[Job]:
        """``Job.enqueue_many`` on this manager's database."""
        return contract.engine(self.db).enqueue_many(type, payloads, EnqueueOptions(**options))

    async def aenqueue(self, type: str, payload: JSONValue = None,
                       **options: Unpack[EnqueueKeywords]) -> Job:
        """``enqueue`` from async code: the same validation and write, run as Django's async ORM
        runs its queries (``sync_to_async``, thread-sensitive), so on the connection, and in
        the transaction, of the caller's other thread-sensitive database code."""
        return await sync_to_async(self.enqueue)(type, payload, **options)

    async def aenqueue_many(self, type: str, payloads: Iterable[JSONValue],
                            **options: Unpack[EnqueueKeywords]) -> list[Job]:
        """``enqueue_many`` from async code, as ``aenqueue``."""
        return await sync_to_async(self.enqueue_many)(type, payloads, **options)

    def claim(self, *, worker_id: str, limit: int, lease_seconds: float,
              queues: Sequence[str] | None = None, exclude_queues: Sequence[str] = (),
              lease_token: uuid.UUID | None = None) -> list[Job]:
        """Take up to ``limit`` ready jobs for this worker, in claim order; ``lease_token``
        is the claim's (a new one if None)."""
        return contract.engine(self.db).claim(ClaimRequest(
            worker_id, limit, lease_seconds, queues, exclude_queues, lease_token))

    def finish(self, outcomes: Sequence[AttemptOutcome]) -> list[AttemptOutcome]:
        """Write the outcomes of attempts (a snooze among them), fenced on each job's lease;
        returns those that were written."""
        return contract.engine(self.db).finish(outcomes)

    def finish_and_claim(
        self, outcomes: Sequence[AttemptOutcome], *, worker_id: str, limit: int,
        lease_seconds: float, queues: Sequence[str] | None = None,
        exclude_queues: Sequence[str] = (), lease_token: uuid.UUID | None = None,
    ) -> tuple[list[AttemptOutcome], list[Job]]:
        """A worker's turn: ``finish`` these outcomes, then ``claim`` up to ``limit`` jobs."""
        return contract.engine(self.db).finish_and_claim(outcomes, ClaimRequest(
            worker_id, limit, lease_seconds, queues, exclude_queues, lease_token))

    def heartbeat(self, *, held: dict[int, uuid.UUID], lease_seconds: float
                  ) -> tuple[set[int], set[int]]:
        """Renew a worker's leases; returns the ids still held and those asked to cancel."""
        return contract.engine(self.db).heartbeat(held=held, lease_seconds=lease_seconds)

    def rescue(self, *, limit: int = 100, now: datetime | None = None,
               since: datetime | None = None) -> list[Job]:
        """Record the lost attempts of jobs whose lease expired (their worker died); with
        ``since``, only if a lease ran out at or after it (the engine's ``rescue``)."""
        return contract.engine(self.db).rescue(limit=limit, now=now, since=since)

    def release(self, jobs: Sequence[Job], delay: float = 0.0) -> int:
        """Hand held jobs back to the queue at shutdown, without spending their attempt; they
        are due ``delay`` seconds from now."""
        return contract.engine(self.db).release(jobs, delay)

    def release_claim(self, lease_token: uuid.UUID) -> int:
        """Hand back the jobs still held under one claim's lease token (a claim whose reply
        never reached the worker), without spending their attempt."""
        return contract.engine(self.db).release_claim(lease_token)

    def release_waiting(self) -> int:
        """Make pending the waiting jobs no feature holds back any more."""
        return contract.engine(self.db).release_waiting()

    def record_progress(self, job: Job, fraction: float, message: str) -> bool:
        """Store a running job's progress, fenced on its lease (``set_progress``)."""
        return contract.engine(self.db).record_progress(job, fraction, message)
