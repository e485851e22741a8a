"""The one place that writes jobs: enqueue, claim, heartbeat, finish, rescue, release, verbs.

The admin, the API and the worker all call these; nothing else updates the jobs table.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db import connections, models, transaction
from django.db.models import F
from django.db.models.functions import Greatest
from django.db.models.signals import post_save, pre_save
from django.utils import timezone

from . import pgwrite
from .outcomes import AttemptOutcome
from .registry import get_handler
from .retry import as_backoff, decide
from .signals import job_enqueued
from .validation import check_payload, enqueue_fields

if TYPE_CHECKING:
    from .models import Job

PENDING, PROCESSING, COMPLETED = "pending", "processing", "completed"
FAILED, DEAD, CANCELED = "failed", "dead", "canceled"
READY_STATES = (PENDING, FAILED)
LEASE_CLEARED = {"leased_until": None}


class JobQuerySet(models.QuerySet):
    # Reads: adjectives.

    def ready(self, queues: Sequence[str] | None = None, now: datetime | None = None):
        """Jobs a worker may claim now, in claim order."""
        qs = self.filter(status__in=READY_STATES, run_at__lte=now or timezone.now())
        if queues:
            qs = qs.filter(queue__in=queues)
        return qs.order_by("-priority", "run_at", "id")

    def stale(self, now: datetime | None = None):
        """Processing jobs whose lease ran out: their worker is presumed dead."""
        return self.filter(status=PROCESSING, leased_until__lt=now or timezone.now())

    def dead(self):
        return self.filter(status=DEAD)

    def failed(self):
        return self.filter(status=FAILED)

    def pending(self):
        return self.filter(status=PENDING)

    # Writes: verbs. Each narrows to the rows it applies to and returns how many changed.

    def retry(self) -> int:
        """Dead, failed and canceled jobs become pending now, with at least one attempt left."""
        now = timezone.now()
        return self.filter(status__in=(DEAD, FAILED, CANCELED)).update(
            status=PENDING,
            run_at=now,
            updated_at=now,
            finished_at=None,
            cancel_requested=False,
            max_attempts=Greatest(F("max_attempts"), F("attempt") + 1),
        )

    def cancel(self) -> int:
        """Pending and failed jobs become canceled; processing ones get a cancel request."""
        now = timezone.now()
        with transaction.atomic(using=self.db):
            waiting = self.filter(status__in=READY_STATES).update(
                status=CANCELED, updated_at=now, finished_at=now
            )
            running = self.filter(status=PROCESSING, cancel_requested=False).update(
                cancel_requested=True, updated_at=now
            )
        return waiting + running

    def run_now(self) -> int:
        """Scheduled (or backing-off) jobs become due now."""
        now = timezone.now()
        return self.filter(status__in=READY_STATES, run_at__gt=now).update(
            run_at=now, updated_at=now
        )


class JobManager(models.Manager.from_queryset(JobQuerySet)):  # type: ignore[misc]
    def enqueue(self, type: str, payload: Any = None, **options: Any) -> Job:
        """Validate and insert one job in the caller's transaction; see ``Job.enqueue``."""
        fields = enqueue_fields(type, **options)
        job = self.model(payload=check_payload(payload), **fields)
        if connections[self.db].vendor == "postgresql":  # save() without its per-call compile
            _insert_sending_signals(job, self.db)
        else:
            job.save(force_insert=True, using=self.db)
        if job_enqueued.has_listeners(self.model):
            job_enqueued.send(sender=self.model, job=job)
        return job

    def enqueue_many(self, type: str, payloads: Iterable[Any], **options: Any) -> list[Job]:
        """Insert one job per payload, all with the same options, in one statement."""
        fields = enqueue_fields(type, **options)
        jobs = [self.model(payload=check_payload(p), **fields) for p in payloads]
        if connections[self.db].vendor == "postgresql":  # bulk_create, one JSON parameter
            with transaction.mark_for_rollback_on_error(self.db):
                pgwrite.insert_many(jobs, self.db)
            created = jobs
        else:
            created = self.bulk_create(jobs)
        if job_enqueued.has_listeners(self.model):
            for job in created:
                job_enqueued.send(sender=self.model, job=job)
        return created

    def claim(
        self,
        *,
        worker_id: str,
        limit: int,
        lease_seconds: float,
        queues: Sequence[str] | None = None,
        exclude_queues: Sequence[str] = (),
    ) -> list[Job]:
        """Take up to ``limit`` ready jobs for this worker, in one short transaction.

        Highest priority first, then earliest run_at, then oldest, which is the order of the
        partial index ``django_jobs_ready_idx``. On PostgreSQL and MySQL the rows are locked
        with ``FOR UPDATE SKIP LOCKED`` so concurrent workers pass over each other's rows
        instead of waiting; SQLite has no row locks, so there the claim is a single
        ``UPDATE ... WHERE id IN (SELECT ... LIMIT n)``, which SQLite runs under its one
        database-wide write lock.
        """
        if limit < 1:
            return []
        now = timezone.now()
        token = uuid.uuid4()
        ready = self.ready(queues, now)
        if exclude_queues:
            ready = ready.exclude(queue__in=exclude_queues)
        claim = {
            "status": PROCESSING,
            "lease_token": token,
            "leased_until": now + timedelta(seconds=lease_seconds),
            "worker_id": worker_id,
            "attempt": F("attempt") + 1,
            "started_at": now,
            "updated_at": now,
        }
        if connections[self.db].vendor == "postgresql":  # one statement, one round trip
            return pgwrite.claim(ready, limit, claim, self.db)
        if connections[self.db].features.has_select_for_update_skip_locked:
            with transaction.atomic(using=self.db):
                jobs = list(ready.select_for_update(skip_locked=True)[:limit])
                if not jobs:
                    return []
                self.filter(pk__in=[j.pk for j in jobs]).update(**claim)
            for job in jobs:
                job.status, job.lease_token, job.worker_id = PROCESSING, token, worker_id
                job.leased_until, job.started_at, job.updated_at = claim["leased_until"], now, now
                job.attempt += 1
            return jobs
        ids = ready.values("pk")[:limit]
        if not self.filter(pk__in=models.Subquery(ids), status__in=READY_STATES).update(**claim):
            return []
        return list(self.filter(lease_token=token).order_by("-priority", "run_at", "id"))

    def heartbeat(
        self, *, held: dict[int, uuid.UUID], lease_seconds: float
    ) -> tuple[set[int], set[int]]:
        """Renew the leases of the jobs a worker holds (job id to lease token).

        Returns the ids still held, and the ids of those with a cancel request.
        """
        if not held:
            return set(), set()
        now = timezone.now()
        mine = self.filter(
            status=PROCESSING, pk__in=list(held), lease_token__in=set(held.values())
        )
        with transaction.atomic(using=self.db):
            mine.update(leased_until=now + timedelta(seconds=lease_seconds))
            rows = list(mine.values_list("pk", "lease_token", "cancel_requested"))
        still = {pk for pk, token, _ in rows if held.get(pk) == token}
        return still, {pk for pk, token, cancel in rows if cancel and pk in still}

    def finish(self, outcomes: Sequence[AttemptOutcome]) -> list[AttemptOutcome]:
        """Write the outcomes of attempts in one transaction; returns those that were written.

        Every write is fenced on (id, lease_token, status=processing): a worker whose lease
        was taken over cannot overwrite the newer attempt, and its outcome is dropped.
        """
        from .models import JobAttempt

        now = timezone.now()
        if connections[self.db].vendor == "postgresql":  # one statement, one round trip
            return self._finish_in_one_statement(outcomes, now, self.db)
        written: list[AttemptOutcome] = []
        attempts: list[JobAttempt] = []
        with transaction.atomic(using=self.db):
            plain, other = _split_plain_completions(outcomes)
            for token, group in plain.items():
                written += self._finish_group(group, token, now)
            for outcome in other:
                if self._fenced(outcome.job).update(**self._finish_fields(outcome, now)):
                    written.append(outcome)
            for outcome in written:
                attempts.append(_attempt_row(outcome))
            JobAttempt.objects.using(self.db).bulk_create(attempts)
        return written

    def _finish_in_one_statement(
        self, outcomes: Sequence[AttemptOutcome], now: datetime, using: str
    ) -> list[AttemptOutcome]:
        """PostgreSQL: the fenced updates and the attempt rows of a batch in one statement."""
        if not outcomes:
            return []
        fields = [self._finish_fields(outcome, now) for outcome in outcomes]
        written = []
        with transaction.atomic(using=using, savepoint=False):  # the worker's, if it has one
            mine = pgwrite.finish(outcomes, fields, now, using)
            for outcome, values in zip(outcomes, fields, strict=True):
                if outcome.job.pk in mine:
                    _apply(outcome.job, values)
                    written.append(outcome)
            # Anything else a finish writes in the same transaction belongs here as well as in
            # the ORM path of finish() (on main: the API issue's completion callbacks).
        return written

    def _finish_group(
        self, group: list[AttemptOutcome], token: uuid.UUID, now: datetime
    ) -> list[AttemptOutcome]:
        """Completions without a result sharing one lease token: one UPDATE for all."""
        ids = [o.job.pk for o in group]
        fenced = self.filter(pk__in=ids, lease_token=token, status=PROCESSING)
        fields = self._finish_fields(group[0], now)
        if fenced.update(**fields) == len(group):
            written = group
        else:
            mine = set(
                self.filter(pk__in=ids, lease_token=token, status=COMPLETED, finished_at=now)
                .values_list("pk", flat=True)
            )
            written = [o for o in group if o.job.pk in mine]
        for outcome in written:
            _apply(outcome.job, fields)
        return written

    def _fenced(self, job: Job):
        return self.filter(pk=job.pk, lease_token=job.lease_token, status=PROCESSING)

    def _finish_fields(self, outcome: AttemptOutcome, now: datetime) -> dict[str, Any]:
        job = outcome.job
        fields: dict[str, Any] = {"updated_at": now, "leased_until": None}
        if outcome.kind == COMPLETED:
            fields.update(status=COMPLETED, result=outcome.result, error=None, finished_at=now)
        elif outcome.kind == CANCELED:
            fields.update(status=CANCELED, error=outcome.error, finished_at=now)
        else:
            decision = _decide(job, outcome.permanent, now)
            if decision.dead:
                fields.update(status=DEAD, error=outcome.error, finished_at=now)
            else:
                fields.update(status=FAILED, error=outcome.error, run_at=decision.retry_at)
        outcome.kind = fields["status"]
        if outcome.kind != COMPLETED or outcome.result is not None:
            _apply(job, fields)
        return fields

    def rescue(self, *, limit: int = 100, now: datetime | None = None) -> list[Job]:
        """Fail the attempts of jobs whose lease expired (their worker died); retry or bury.

        Any worker may run this at any time: every write is fenced on the old lease token,
        so two rescuers never both record the same lost attempt.
        """
        from .models import JobAttempt, error_dict

        now = now or timezone.now()
        rescued: list[Job] = []
        with transaction.atomic(using=self.db):
            stale = self.stale(now).order_by("leased_until")
            if connections[self.db].features.has_select_for_update_skip_locked:
                stale = stale.select_for_update(skip_locked=True)
            for job in stale[:limit]:
                error = error_dict(
                    type="WorkerLost",
                    message=f"worker {job.worker_id!r} stopped renewing its lease "
                    f"(last lease until {job.leased_until.isoformat()})",
                )
                outcome = AttemptOutcome(
                    job=job, kind=FAILED, started_at=job.started_at or now, finished_at=now,
                    error=error,
                )
                if not self._fenced(job).update(**self._finish_fields(outcome, now)):
                    continue
                row = _attempt_row(outcome)
                row.outcome = JobAttempt.Outcome.LOST
                row.save(force_insert=True, using=self.db)
                rescued.append(job)
        return rescued

    def release(self, jobs: Sequence[Job]) -> int:
        """Hand held jobs back to the queue at shutdown, without spending their attempt."""
        from .models import JobAttempt

        now = timezone.now()
        released = 0
        with transaction.atomic(using=self.db):
            for job in jobs:
                if not self._fenced(job).update(
                    status=PENDING, attempt=F("attempt") - 1, run_at=now, updated_at=now,
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


def _insert_sending_signals(job: Job, using: str) -> None:
    """``pgwrite.insert`` with what ``save()`` adds: pre/post_save for any receivers, and a
    failed INSERT marking the caller's atomic block for rollback."""
    sender = type(job)
    if pre_save.has_listeners(sender):
        pre_save.send(sender=sender, instance=job, raw=False, using=using, update_fields=None)
    with transaction.mark_for_rollback_on_error(using):
        pgwrite.insert(job, using)
    if post_save.has_listeners(sender):
        post_save.send(sender=sender, instance=job, created=True, update_fields=None, raw=False,
                       using=using)


def _decide(job: Job, permanent: bool, now: datetime):
    found = get_handler(job.type)
    backoff = found.get_backoff() if found else as_backoff(None)
    return decide(
        attempt=job.attempt, max_attempts=job.max_attempts, permanent=permanent,
        backoff=backoff, now=now,
    )


def _split_plain_completions(
    outcomes: Sequence[AttemptOutcome],
) -> tuple[dict[uuid.UUID, list[AttemptOutcome]], list[AttemptOutcome]]:
    plain: dict[uuid.UUID, list[AttemptOutcome]] = defaultdict(list)
    other: list[AttemptOutcome] = []
    for outcome in outcomes:
        if outcome.kind == COMPLETED and outcome.result is None:
            plain[outcome.job.lease_token].append(outcome)
        else:
            other.append(outcome)
    return plain, other


def _apply(job: Job, fields: dict[str, Any]) -> None:
    for name, value in fields.items():
        setattr(job, name, value)


def _attempt_row(outcome: AttemptOutcome):
    from .models import JobAttempt

    job = outcome.job
    return JobAttempt(
        job=job,
        number=job.attempt,
        worker_id=job.worker_id,
        started_at=outcome.started_at,
        finished_at=outcome.finished_at,
        outcome=outcome.kind,
        error=outcome.error,
        cpu_time=outcome.cpu_time,
        peak_memory=outcome.peak_memory,
    )
