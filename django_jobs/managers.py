"""The one place that writes jobs: enqueue, claim, heartbeat, finish, rescue, release, verbs.

The admin, the API and the worker all call these; nothing else updates the jobs table.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db import connections, models, transaction
from django.db.models import F
from django.db.models.functions import Greatest
from django.db.models.signals import post_save, pre_save
from django.utils import timezone

from . import hooks, mariadb
from .engine import pgenqueue, postgres, transition
from .engine.transition import Apply, Transition, apply, undone_on_error
from .instances import build, build_many, varying
from .lockedrows import locked
from .outcomes import AttemptOutcome
from .registry import get_handler
from .retry import Backoff, as_backoff
from .signals import job_enqueued
from .states import JobStatus, Outcome
from .uniquekey import keep_key_if
from .validation import check_payload, enqueue_fields

if TYPE_CHECKING:
    from .models import Job

PENDING, PROCESSING, COMPLETED = JobStatus.PENDING, JobStatus.PROCESSING, JobStatus.COMPLETED
FAILED, DEAD, CANCELED = JobStatus.FAILED, JobStatus.DEAD, JobStatus.CANCELED
WAITING, SNOOZED = JobStatus.WAITING, Outcome.SNOOZED  # SNOOZED: an attempt's outcome
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
        return self.filter(status__in=(DEAD, FAILED, CANCELED)).update(**_retry_fields())

    def retry_with_payload(self, payload: Any) -> int:
        """Dead jobs get a corrected payload and are retried (as ``retry``) in one statement.

        Raises InvalidJob if the payload is not JSON-serialisable; changes nothing then.
        """
        payload = check_payload(payload)
        return self.filter(status=DEAD).update(payload=payload, **_retry_fields())

    def cancel(self) -> int:
        """Pending and failed jobs become canceled; processing ones get a cancel request."""
        now = timezone.now()
        with transaction.atomic(using=self.db):
            cancelable = self.filter(status__in=(*READY_STATES, WAITING))
            hooked = hooks.hold_for_cancel(cancelable)  # read (and locked) for the features
            waiting = cancelable.update(
                status=CANCELED, updated_at=now, finished_at=now,
                unique_key=keep_key_if(CANCELED),
            )
            running = self.filter(status=PROCESSING, cancel_requested=False).update(
                cancel_requested=True, updated_at=now
            )
            for job in hooked:
                job.__dict__.update(status=CANCELED, updated_at=now, finished_at=now)
            hooks.ended(hooked, self.db)
        return waiting + running

    def delete_batch(self, limit: int) -> int:
        """Delete up to ``limit`` of these jobs (oldest first) and their attempts, in one short
        transaction; returns how many jobs went. Rows another transaction holds are skipped."""
        with transaction.atomic(using=self.db):
            batch = self.order_by("created_at", "pk")
            if connections[self.db].features.has_select_for_update_skip_locked:
                batch = batch.select_for_update(skip_locked=True)
            ids = list(batch.values_list("pk", flat=True)[:limit])
            if not ids:
                return 0
            deleted = self.model._default_manager.using(self.db).filter(pk__in=ids).delete()[1]
        return deleted.get(self.model._meta.label, 0)

    def run_now(self) -> int:
        """Scheduled (or backing-off) jobs become due now."""
        now = timezone.now()
        return self.filter(status__in=READY_STATES, run_at__gt=now).update(
            run_at=now, updated_at=now
        )

    def discard(self) -> int:
        """Delete jobs no worker holds (all but processing) with their attempts; returns jobs.

        The rows are locked first on databases with row locks, so a worker cannot claim a
        job between the check and the delete (claims skip locked rows).
        """
        deleted = 0
        with transaction.atomic(using=self.db):
            idle = self.exclude(status=PROCESSING).order_by()
            if connections[self.db].features.has_select_for_update:
                idle = idle.select_for_update()
            ids = list(idle.values_list("pk", flat=True))
            for start in range(0, len(ids), 1000):
                jobs = self.model._default_manager.using(self.db)
                chunk = jobs.filter(pk__in=ids[start : start + 1000])
                _, per_model = chunk.exclude(status=PROCESSING).only("pk").delete()
                deleted += per_model.get(self.model._meta.label, 0)
        return deleted


class QueueStateManager(models.Manager):
    """Pause and resume queues; workers re-read the paused set at every heartbeat."""

    def pause(self, name: str) -> bool:
        """Stop workers claiming from queue ``name``; True if it was running."""
        return self._set(name, paused=True)

    def resume(self, name: str) -> bool:
        """Let workers claim from queue ``name`` again; True if it was paused."""
        return self._set(name, paused=False)

    def _set(self, name: str, *, paused: bool) -> bool:
        from .validation import QUEUE_RE

        if not isinstance(name, str) or not QUEUE_RE.fullmatch(name):
            from .exceptions import InvalidJob

            raise InvalidJob({"queue": f"must match {QUEUE_RE.pattern}, not {name!r}"})
        now = timezone.now()
        with transaction.atomic(using=self.db):
            changed = self.filter(name=name).exclude(paused=paused).update(
                paused=paused, changed_at=now
            )
            if not changed and paused and not self.filter(name=name).exists():
                self.create(name=name, paused=True, changed_at=now)
                changed = 1
        return bool(changed)


class JobManager(models.Manager.from_queryset(JobQuerySet)):  # type: ignore[misc]
    def enqueue(self, type: str, payload: Any = None, **options: Any) -> Job:
        """Validate and insert one job in the caller's transaction; see ``Job.enqueue``."""
        insert = hooks.take_enqueue_options(type, options)  # unique keys, dependencies
        fields = enqueue_fields(type, **options)
        job = build(self.model, {"payload": check_payload(payload), **fields})
        if insert is not None:  # or the job holding the key
            job = insert(self, [job])[0]
            if job.duplicate:  # type: ignore[attr-defined]  # set by the unique insert
                return job
        elif connections[self.db].vendor == "postgresql":  # save() without its per-call compile
            _insert_sending_signals(job, self.db)
        else:
            job.save(force_insert=True, using=self.db)
        if job_enqueued.has_listeners(self.model):
            job_enqueued.send(sender=self.model, job=job)
        return job

    def enqueue_many(self, type: str, payloads: Iterable[Any], **options: Any) -> list[Job]:
        """Insert one job per payload, all with the same options, in one statement."""
        insert = hooks.take_enqueue_options(type, options)  # unique keys, dependencies
        fields = enqueue_fields(type, **options)
        jobs = build_many(self.model, fields, "payload", (check_payload(p) for p in payloads))
        if insert is not None:  # duplicates map to the job holding the key
            created = insert(self, jobs)
            new = [job for job in created if not job.duplicate]  # type: ignore[attr-defined]
        elif connections[self.db].vendor == "postgresql":  # bulk_create, shared values once
            with transaction.mark_for_rollback_on_error(self.db):
                pgenqueue.insert_many(jobs, self.db, varying(self.model, shared=fields))
            created = new = jobs
        else:
            created = new = self.bulk_create(jobs)
        if job_enqueued.has_listeners(self.model):
            for job in dict.fromkeys(new):
                job_enqueued.send(sender=self.model, job=job)
        return created

    def release_waiting(self) -> int:
        """Make pending the waiting jobs no feature holds back any more (the heartbeat's sweep:
        dependencies all completed)."""
        waiting = self.filter(status=WAITING)
        if not waiting.exists():  # as rescue: one read that locks nothing, most heartbeats
            return 0
        with transaction.atomic(using=self.db):
            return hooks.release(self, waiting, timezone.now())

    def record_progress(self, job: Job, fraction: float, message: str) -> bool:
        """Store a running job's progress, fenced on its lease (``set_progress``)."""
        progress = {"fraction": fraction, "message": message}
        changed = self._fenced(job).update(progress=progress)
        if changed:
            job.progress = progress
        return bool(changed)

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
        if connections[self.db].vendor == "postgresql" and not hooks.limits_claims():
            # One hand-written statement on PostgreSQL, unless a feature admits claims
            # (concurrency/rate limits need the locked candidates before choosing)
            return postgres.claim(
                self.model, ready_states=READY_STATES, now=now, queues=queues,
                exclude_queues=exclude_queues, limit=limit, using=self.db,
                values=self._claim_values(worker_id, now, lease_seconds, token),
            )
        ready = self.ready(queues, now)
        if exclude_queues:
            ready = ready.exclude(queue__in=exclude_queues)
        claim: dict[str, Any] = {
            "status": PROCESSING,
            "lease_token": token,
            "leased_until": now + timedelta(seconds=lease_seconds),
            "worker_id": worker_id,
            "attempt": F("attempt") + 1,
            "started_at": now,
            "updated_at": now,
            "unique_key": keep_key_if(PROCESSING),  # unique jobs
        }
        if connections[self.db].features.has_select_for_update_skip_locked:
            with transaction.atomic(using=self.db):
                if connections[self.db].vendor == "mysql":  # lock only what it takes
                    jobs = mariadb.lock_ready(ready, limit)
                else:
                    jobs = locked(ready, limit)
                if not jobs:
                    return []
                # Concurrency and rate limits; no query unless a candidate has limits
                jobs = hooks.admit(self, jobs, ready, limit, now)
                if not jobs:
                    return []
                self.filter(pk__in=[j.pk for j in jobs]).update(**claim)
            for job in jobs:
                job.status, job.lease_token, job.worker_id = PROCESSING, token, worker_id
                job.leased_until, job.started_at, job.updated_at = claim["leased_until"], now, now
                job.attempt += 1
            return jobs
        # On SQLite, limits need the candidates first (None: no limits registered)
        limited = hooks.claim_without_row_locks(self, ready, claim, limit, now)
        if limited is not None:
            return limited
        ids = ready.values("pk")[:limit]
        if not self.filter(pk__in=models.Subquery(ids), status__in=READY_STATES).update(**claim):
            return []
        return list(self.filter(lease_token=token).order_by("-priority", "run_at", "id"))

    def finish_and_claim(
        self, outcomes: Sequence[AttemptOutcome], *, worker_id: str, limit: int,
        lease_seconds: float, queues: Sequence[str] | None = None,
        exclude_queues: Sequence[str] = (),
    ) -> tuple[list[AttemptOutcome], list[Job]]:
        """A worker's turn: ``finish`` these outcomes, then ``claim`` up to ``limit`` jobs.

        Returns the outcomes written and the jobs claimed. On PostgreSQL, when no outcome
        needs more than its own row and attempt row written (no callback, dependents,
        follow-ups or snooze) and no limits are registered, it is one statement in its own
        transaction; otherwise ``finish`` and ``claim`` run in one transaction.
        """
        claim: dict[str, Any] = {
            "worker_id": worker_id, "limit": limit, "lease_seconds": lease_seconds,
            "queues": queues, "exclude_queues": exclude_queues,
        }
        db = self.db
        plain = limit > 0 and self._plain_turn(outcomes, db)
        if not outcomes and plain:
            return [], self.claim(**claim)  # one statement: no BEGIN and COMMIT around it
        if not (outcomes and plain):
            with transaction.atomic(using=db):
                written = self.finish(outcomes) if outcomes else []
                return written, self.claim(**claim) if limit > 0 else []
        now = timezone.now()
        changes = [self._transition(outcome, now) for outcome in outcomes]
        mine, jobs = postgres.finish_and_claim(
            self.model, outcomes, changes, ready_states=READY_STATES, now=now, queues=queues,
            exclude_queues=exclude_queues, limit=limit, using=db,
            values=self._claim_values(worker_id, now, lease_seconds),
        )
        return _written(outcomes, changes, mine), jobs

    def _plain_turn(self, outcomes: Sequence[AttemptOutcome], db: str) -> bool:
        """True if finish_and_claim may be the one statement (see there)."""
        if connections[db].vendor != "postgresql" or hooks.limits_claims():
            return False
        for outcome in outcomes:  # a loop, not any(): this runs for every job a worker ends
            job = outcome.job
            if outcome.kind == SNOOZED or hooks.joins_finish(job):  # callbacks, follow-ups...
                return False
        return True

    @staticmethod
    def _claim_values(
        worker_id: str, now: datetime, lease_seconds: float, token: uuid.UUID | None = None
    ) -> dict[str, Any]:
        """What a claim writes that is known before it runs (the hand-written statement's)."""
        return {
            "status": PROCESSING, "lease_token": token or uuid.uuid4(), "worker_id": worker_id,
            "leased_until": now + timedelta(seconds=lease_seconds),
            "started_at": now, "updated_at": now,
        }

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
        # One statement on PostgreSQL; a snoozed attempt takes the ORM path
        if connections[self.db].vendor == "postgresql" and all(
            outcome.kind != SNOOZED for outcome in outcomes
        ):
            return self._finish_in_one_statement(outcomes, now, self.db)
        written: list[AttemptOutcome] = []
        attempts: list[JobAttempt] = []
        with undone_on_error() as applying, transaction.atomic(using=self.db):
            plain, other = _split_plain_completions(outcomes)
            for token, group in plain.items():
                written += self._finish_group(group, token, now, applying)
            for outcome in other:
                change = self._transition(outcome, now)
                if self._fenced(outcome.job).update(**_update_fields(change)):
                    applying(outcome, change)
                    written.append(outcome)
            for outcome in written:
                attempts.append(_attempt_row(outcome))
            JobAttempt.objects.using(self.db).bulk_create(attempts)
            hooks.after_finish(self, written, now)  # callbacks, follow-ups, dependents
        return written

    def _finish_in_one_statement(
        self, outcomes: Sequence[AttemptOutcome], now: datetime, using: str
    ) -> list[AttemptOutcome]:
        """PostgreSQL: the fenced updates and the attempt rows of a batch in one statement."""
        if not outcomes:
            return []
        changes = [self._transition(outcome, now) for outcome in outcomes]
        # the worker's transaction, if it has one
        with undone_on_error() as applying, transaction.atomic(using=using, savepoint=False):
            mine = postgres.finish(self.model, outcomes, changes, now, using)
            written = _written(outcomes, changes, mine, applying)
            hooks.after_finish(self, written, now)  # callbacks, follow-ups, dependents
        return written

    def _finish_group(
        self, group: list[AttemptOutcome], token: uuid.UUID | None, now: datetime,
        applying: Apply,
    ) -> list[AttemptOutcome]:
        """Completions without a result sharing one lease token: one UPDATE for all."""
        ids = [o.job.pk for o in group]
        fenced = self.filter(pk__in=ids, lease_token=token, status=PROCESSING)
        change = self._transition(group[0], now)  # the same for all: completed, no result
        if any(o.job.unique_key is not None for o in group):  # the key kept where it guards
            change = replace(change, keeps_key_check=True)
        if fenced.update(**_update_fields(change)) == len(group):
            written = group
        else:
            mine = set(
                self.filter(pk__in=ids, lease_token=token, status=COMPLETED, finished_at=now)
                .values_list("pk", flat=True)
            )
            written = [o for o in group if o.job.pk in mine]
        for outcome in written:
            applying(outcome, change)
        return written

    def _fenced(self, job: Job):
        return self.filter(pk=job.pk, lease_token=job.lease_token, status=PROCESSING)

    def _transition(self, outcome: AttemptOutcome, now: datetime) -> Transition:
        """What ``outcome`` does to its job (``engine/transition.py``); reads, changes nothing."""
        backoff = _backoff(outcome.job.type) if outcome.kind == FAILED else None
        return transition.of(outcome, now, backoff)

    def rescue(self, *, limit: int = 100, now: datetime | None = None) -> list[Job]:
        """Record the lost attempts of jobs whose lease expired (their worker died): a crash,
        counted apart from errors (the rescue hook of ``crashes.py``: retried alone, or
        quarantined as dead).

        Any worker may run this at any time: every write is fenced on the old lease token,
        so two rescuers never both record the same lost attempt.
        """
        now = now or timezone.now()
        if not self.stale(now).exists():
            # Almost every heartbeat: one read, in autocommit, that locks no row (not BEGIN,
            # a locking SELECT and COMMIT that find nothing).
            return []
        with transaction.atomic(using=self.db):
            return hooks.rescue(self, limit=limit, now=now)

    def _db_has_skip_locked(self) -> bool:
        return connections[self.db].features.has_select_for_update_skip_locked

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


def _retry_fields() -> dict[str, Any]:
    now = timezone.now()
    return {
        "status": PENDING, "run_at": now, "updated_at": now, "finished_at": None,
        "cancel_requested": False, "max_attempts": Greatest(F("max_attempts"), F("attempt") + 1),
        "crashes": 0,  # a person retries it: its crashes start again
    }


def _insert_sending_signals(job: Job, using: str) -> None:
    """``pgenqueue.insert`` with what ``save()`` adds: pre/post_save for any receivers, and a
    failed INSERT marking the caller's atomic block for rollback."""
    sender = type(job)
    if pre_save.has_listeners(sender):
        pre_save.send(sender=sender, instance=job, raw=False, using=using, update_fields=None)
    with transaction.mark_for_rollback_on_error(using):
        pgenqueue.insert(job, using)
    if post_save.has_listeners(sender):
        post_save.send(sender=sender, instance=job, created=True, update_fields=None, raw=False,
                       using=using)


def _backoff(type: str) -> Backoff:
    """The retry policy of jobs of ``type``: its handler's, or the settings'."""
    found = get_handler(type)
    return found.get_backoff() if found else as_backoff(None)


def _update_fields(change: Transition) -> dict[str, Any]:
    """The ORM ``update()`` values of a transition: its fields, and the unique key kept only if
    it guards the new state (a job without a key keeps none, and needs no expression)."""
    key = keep_key_if(change.status) if change.keeps_key_check else None
    return {**change.fields, "unique_key": key}


def _split_plain_completions(
    outcomes: Sequence[AttemptOutcome],
) -> tuple[dict[uuid.UUID | None, list[AttemptOutcome]], list[AttemptOutcome]]:
    plain: dict[uuid.UUID | None, list[AttemptOutcome]] = defaultdict(list)
    other: list[AttemptOutcome] = []
    for outcome in outcomes:
        if outcome.kind == COMPLETED and outcome.result is None:
            plain[outcome.job.lease_token].append(outcome)
        else:
            other.append(outcome)
    return plain, other


def _written(
    outcomes: Sequence[AttemptOutcome], changes: Sequence[Transition], mine: set[int],
    applying: Apply = apply,
) -> list[AttemptOutcome]:
    """The outcomes whose jobs the statement wrote (``mine``), their transitions applied."""
    written = []
    for outcome, change in zip(outcomes, changes, strict=True):
        if outcome.job.id in mine:
            applying(outcome, change)
            written.append(outcome)
    return written


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
