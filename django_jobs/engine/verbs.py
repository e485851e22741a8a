"""The engine's verbs on Django's ORM: the implementation every database shares.

One ``Engine`` per database alias (``engine_for``). The worker's verbs are here (enqueue,
claim, finish, the finish-and-claim turn, heartbeat, rescue, release); the staff's (retry,
cancel, run now, discard, pause) are in ``engine/staff.py``. How a claim takes its rows
depends on whether the database has row locks (``engine/portable.py``); PostgreSQL replaces
the hot verbs with hand-written statements (``engine/postgres/engine.py``).

A snooze is a finish: the worker hands ``finish`` an outcome of kind ``snoozed``, whose
transition makes the job pending again at the time it asked for, its attempt not counted.
Features join these verbs through ``engine/hooks.py``; each hook gets the jobs' manager (``jobs``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from contextvars import ContextVar
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING

from django.db import transaction

from django_jobs.core import clock, tracing
from django_jobs.core.contract import ClaimRequest, EnqueueOptions
from django_jobs.core.shelves import OPEN_SHELF
from django_jobs.core.states import COMPLETED, PROCESSING
from django_jobs.core.validation import check_payload, job_fields
from django_jobs.engine import finish_counts, hooks
from django_jobs.engine.leases import LeaseVerbs
from django_jobs.engine.moved_claims import apart_if_moved, claim_again_if_moved
from django_jobs.engine.moved_rows import once_more_if_moved
from django_jobs.engine.staff import StaffVerbs
from django_jobs.engine.transition import Apply, Transition, undone_on_error
from django_jobs.engine.writes import (
    ClaimValues,
    attempt_row,
    claim_fields,
    claim_values,
    split_plain_completions,
    transition_of,
    update_fields,
)
from django_jobs.models.instances import build, build_many
from django_jobs.signals import job_enqueued

if TYPE_CHECKING:
    from django_jobs.core.json_rules import JSONValue
    from django_jobs.core.outcomes import AttemptOutcome
    from django_jobs.engine.waiting import Wakeups
    from django_jobs.models import Job
    from django_jobs.models.managers import JobQuerySet

# The database whose worker's turn (``Engine.finish_and_claim``) this context is inside, if any
_turn: ContextVar[str | None] = ContextVar("django_jobs_turn", default=None)


def asks_features(options: EnqueueOptions, handler: object) -> bool:
    """True if an enqueue sets an option a feature reads, or its handler an attribute one
    reads (``hooks.enqueue_reads``, ``hooks.handler_reads``): only then are the features asked
    (``hooks.enqueue_insert``)."""
    for name in hooks.enqueue_reads:
        if getattr(options, name) is not None:
            return True
    for name in hooks.handler_reads:
        if getattr(handler, name, None) is not None:
            return True
    return False


class Engine(StaffVerbs, LeaseVerbs):
    """The verbs on one database (``using``), through the ORM."""

    row_locks = True  # SELECT ... FOR UPDATE SKIP LOCKED: claimers pass over each other's rows
    _wakeups: Wakeups | None = None  # made by the first waiter (``wakeups``)

    def verb_atomic(self) -> transaction.Atomic:
        """The transaction of one verb (``finish``, a claim's ``take``). Inside another atomic
        block it is a savepoint, so that a caller may catch the verb's error and go on; inside
        the worker's turn it is not: the turn is one transaction that an error rolls back as a
        whole, and a savepoint would cost two more round trips for each verb."""
        return transaction.atomic(using=self.db, savepoint=_turn.get() != self.db)

    # Enqueue

    def enqueue(self, type: str, payload: JSONValue, options: EnqueueOptions) -> Job:
        """Validate and insert one job in the caller's transaction; see ``Job.enqueue``."""
        fields, found = job_fields(type, options, clock.now(self.db))
        payload = check_payload(payload, found.arguments)
        insert = hooks.enqueue_insert(type, options, found) if asks_features(options, found) \
            else None
        with tracing.sending(type, fields["queue"], 1) as sending:  # the active span's child
            fields["trace_context"] = sending.stored
            fields["payload"] = payload
            job = build(self.jobs.model, fields)
            if insert is not None:  # or the job holding the key
                job = insert(self.jobs, [job])[0]
                if job.duplicate:  # type: ignore[attr-defined]  # set by the unique insert
                    return job
            else:
                self.insert(job)
            sending.sent(job.public_id)
        if job_enqueued.has_listeners(self.jobs.model):
            job_enqueued.send(sender=self.jobs.model, job=job)
        return job

    def enqueue_many(self, type: str, payloads: Iterable[JSONValue], options: EnqueueOptions
                     ) -> list[Job]:
        """Insert one job per payload, all with the same options, in one statement."""
        fields, found = job_fields(type, options, clock.now(self.db))
        model = self.jobs.model
        payloads = [check_payload(p, found.arguments) for p in payloads]
        insert = hooks.enqueue_insert(type, options, found) if asks_features(options, found) \
            else None
        with tracing.sending(type, fields["queue"], len(payloads)) as sending:
            fields["trace_context"] = sending.stored  # the same for every job of the batch
            jobs = build_many(model, fields, "payload", payloads)
            if insert is not None:  # duplicates map to the job holding the key
                created = insert(self.jobs, jobs)
                new = [job for job in created if not job.duplicate]  # type: ignore[attr-defined]
            else:
                created = new = self.insert_many(jobs, fields)
        if job_enqueued.has_listeners(model):
            for job in dict.fromkeys(new):
                job_enqueued.send(sender=model, job=job)
        return created

    def insert(self, job: Job) -> None:
        """One built job's INSERT, as ``save()`` does it."""
        self.save_new(job)

    def insert_many(self, jobs: list[Job], shared: dict[str, object]) -> list[Job]:
        """The INSERT of built jobs sharing the values ``shared``."""
        return self.bulk_insert(jobs)

    def save_new(self, job: Job) -> None:
        """``save()``'s INSERT on every database: for an insert that takes over the enqueue
        (``features/unique.py`` catches the unique key's IntegrityError in a savepoint)."""
        job.save(force_insert=True, using=self.db)

    def hold_key(self, key: str) -> bool:
        """Hold the unique ``key`` (stored form, with its flags) against every other
        transaction's insert of it until the caller's transaction ends; True if this database
        needs that to keep a key that guards a finished state (``features/unique.py``).

        Here the unique index holds every key wherever its job is: False, nothing done."""
        return False

    def bulk_insert(self, jobs: list[Job]) -> list[Job]:
        """``bulk_create``'s INSERT on every database, any field differing from job to job."""
        return self.jobs.bulk_create(jobs)

    # Claim

    @claim_again_if_moved
    def claim(self, request: ClaimRequest) -> list[Job]:
        """Take up to ``request.limit`` ready jobs for this worker, in one short transaction.

        Highest priority first, then earliest run_at, then oldest: the order of the partial
        ready indexes; with ``request.after``, from that key on, or from the start if nothing
        comes after it (``ClaimRequest``). How the rows are taken is ``take``'s
        (``engine/portable.py``).
        """
        if request.limit < 1:
            return []
        now = clock.now(self.db)
        ready = self.jobs.ready(request.queues, now)
        if request.exclude_queues:
            ready = ready.exclude(queue__in=request.exclude_queues)
        values = claim_values(request.worker_id, now, request.lease_seconds, request.lease_token)
        if request.after is not None:  # from where the worker's last claim ended, if any is
            jobs = self.take(ready.after(request.after), values, request.limit, now)
            if jobs:
                return jobs
        return self.take(ready, values, request.limit, now)

    def take(self, ready: JobQuerySet, values: ClaimValues, limit: int, now: datetime
             ) -> list[Job]:
        """Mark up to ``limit`` rows of ``ready`` claimed with ``values``; return them."""
        raise NotImplementedError

    # Finish

    @once_more_if_moved
    def finish(self, outcomes: Sequence[AttemptOutcome]) -> list[AttemptOutcome]:
        """Write the outcomes of attempts in one transaction; returns those that were written.

        Every write is fenced on (id, lease_token, status=processing): a worker whose lease
        was taken over cannot overwrite the newer attempt, and its outcome is dropped. A job
        it finishes gets its prune day as its shelf, and so do its attempts
        (``core/shelves.py``).
        """
        from django_jobs.models import JobAttempt

        now = clock.now(self.db)
        done: list[AttemptOutcome] = []
        # the waits are read before run_at changes
        waited = finish_counts.waits(outcomes) if finish_counts.enabled() else None
        with undone_on_error() as applying, self.verb_atomic():
            plain, other = split_plain_completions(outcomes)
            for token, group in plain.items():
                done += self._finish_group(group, token, now, applying)
            for outcome in other:
                change = self.transition(outcome, now)
                if self.fenced(outcome.job).update(**update_fields(change)):
                    applying(outcome, change)
                    done.append(outcome)
            self.shelve_attempts(outcome.job for outcome in done)  # finished: their prune day
            JobAttempt.objects.using(self.db).bulk_create([attempt_row(o) for o in done])
            if waited is not None:  # the finished jobs counted (engine/finish_counts.py)
                finish_counts.record(self.db, done, now, waited)
            hooks.after_finish(self.jobs, done, now)  # callbacks, follow-ups, dependents
        return done

    def _finish_group(
        self, group: list[AttemptOutcome], token: uuid.UUID | None, now: datetime,
        applying: Apply,
    ) -> list[AttemptOutcome]:
        """Completions without a result sharing one lease token: one UPDATE for all."""
        ids = [o.job.pk for o in group]
        fenced = self.jobs.filter(pk__in=ids, lease_token=token, status=PROCESSING,
                                  shelf=OPEN_SHELF)
        change = self.transition(group[0], now)  # the same for all: completed, no result
        if any(o.job.unique_key is not None for o in group):  # the key kept where it guards
            change = replace(change, keeps_key_check=True)
        if fenced.update(**update_fields(change)) == len(group):
            done = group
        else:
            mine = set(
                self.jobs.filter(pk__in=ids, lease_token=token, status=COMPLETED, finished_at=now)
                .values_list("pk", flat=True)
            )
            done = [o for o in group if o.job.pk in mine]
        for outcome in done:
            applying(outcome, change)
        return done

    @apart_if_moved
    def finish_and_claim(
        self, outcomes: Sequence[AttemptOutcome], request: ClaimRequest
    ) -> tuple[list[AttemptOutcome], list[Job]]:
        """A worker's turn: ``finish`` these outcomes, then ``claim`` up to ``request.limit``
        jobs, in one transaction (no savepoint inside it: ``verb_atomic``); the finish hooks of
        the features ``late_in_turn`` run after the claim. Returns the outcomes written and the
        jobs claimed."""
        with undone_on_error(), transaction.atomic(using=self.db), hooks.late() as late:
            token = _turn.set(self.db)
            try:
                done = self.finish(outcomes) if outcomes else []
                claimed = self.claim(request) if request.limit > 0 else []
                late()  # the features late_in_turn (groups), after the claim
            finally:
                _turn.reset(token)
        return done, claimed

    # The parts of a write that features share (features/crashes.py, limits, dependencies)

    # Waiting for a job's end (``engine/waiting.py``; loaded by the first waiter only)

    def wakeups(self) -> Wakeups:
        """The waiters of this process on this database. Here nothing pokes them: they read
        the job's row until it ends."""
        if self._wakeups is None:
            from django_jobs.engine import waiting
            self._wakeups = waiting.Wakeups()
        return self._wakeups

    def wait(self, job: Job, timeout: float | None) -> JSONValue:
        """Block until ``job`` ends; see ``Job.wait``."""
        from django_jobs.engine import waiting
        return waiting.wait(job, self.db, timeout, self.wakeups())

    async def await_result(self, job: Job, timeout: float | None) -> JSONValue:
        """``wait`` for async code; see ``Job.await_result``."""
        from django_jobs.engine import waiting
        return await waiting.await_result(job, self.db, timeout, self.wakeups())

    @staticmethod
    def transition(outcome: AttemptOutcome, now: datetime, extra_attempts: int = 0) -> Transition:
        """What ``outcome`` does to its job (``engine/transition.py``); reads, changes nothing.
        ``extra_attempts``: attempts the same write adds to the job's ``max_attempts``."""
        return transition_of(outcome, now, extra_attempts)

    update_fields = staticmethod(update_fields)
    attempt_row = staticmethod(attempt_row)

    def mark_claimed(self, jobs: list[Job], values: ClaimValues) -> None:
        """Write the claim (``values``: a claim's plain values) of these locked or admitted
        jobs, and set it on them."""
        self.jobs.filter(pk__in=[j.pk for j in jobs]).update(**claim_fields(values))
        now = values["started_at"]
        for job in jobs:
            job.status, job.lease_token = PROCESSING, values["lease_token"]
            job.worker_id, job.leased_until = values["worker_id"], values["leased_until"]
            job.started_at, job.updated_at = now, now
            job.attempt += 1
