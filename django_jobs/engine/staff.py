"""The staff's verbs, as the admin, the API and commands call them on a queryset of jobs:
retry, retry with a corrected payload, cancel, run now, discard, delete a batch; and pausing
and resuming a queue. Each narrows to the rows it applies to and returns how many changed.

Two people (or a person and a worker) may act on one job at the same moment. So a verb that
writes more than the job's row first locks the rows it may change, in the order of their ids
(where the database has row locks), reads their status from those locked rows, and writes by
id from there: the job's row before its attempts, as a worker's finish and a delete do, so that
no two writers wait on each other in a circle. Each verb then acts on the job as the action
before it left it, and the end state is one that some order of the actions, one at a time,
gives. A verb that still meets a deadlock, a lock wait that ran out or a row moved again under
it rolls back and raises ``JobConflict``: nothing changed, and trying again acts on the jobs as
they are now."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Concatenate, ParamSpec, TypeVar

from django.db import DatabaseError, connections, transaction
from django.db.models import Q

from django_jobs.core import clock
from django_jobs.core.db_errors import lock_conflict
from django_jobs.core.shelves import OPEN_SHELF
from django_jobs.core.states import CANCELED, DEAD, FAILED, PROCESSING, READY_STATES, WAITING
from django_jobs.core.validation import QUEUE_RE, check_payload
from django_jobs.engine import hooks
from django_jobs.engine.moved_rows import OnDatabase, moved_row
from django_jobs.engine.shelving import shelf_for
from django_jobs.engine.unique_column import keep_key_if
from django_jobs.engine.writes import retry_fields
from django_jobs.exceptions import InvalidJob, JobConflict

if TYPE_CHECKING:
    from datetime import date

    from django_jobs.core.json_rules import JSONValue
    from django_jobs.models.managers import JobQuerySet

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S", bound=OnDatabase)

CHUNK = 1000  # ids per statement of a verb that writes by id
TRIES = 5  # a staff verb's tries, each refused for a row another action moved


def staff_verb(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """A staff verb, sent again (up to ``TRIES`` in all) while PostgreSQL refuses it for a row
    that another action moved to another partition (``engine/moved_rows.py``): each refusal
    follows a change another transaction committed, and the verb, run again, acts on the row
    as that change left it. In a caller's transaction each try runs in a savepoint, which the
    refusal rolls back to. A deadlock, a lock wait that ran out, or a row moved under each try
    raise ``JobConflict``, nothing written."""

    @functools.wraps(method)
    def verb(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        for tries_left in reversed(range(TRIES)):
            try:
                if not connections[self.db].in_atomic_block:
                    return method(self, *args, **kwargs)  # its own transaction
                with transaction.atomic(using=self.db):
                    return method(self, *args, **kwargs)
            except DatabaseError as exc:
                if moved_row(exc) and tries_left:
                    continue
                if lock_conflict(exc) or moved_row(exc):
                    raise JobConflict("another action or a worker changed these jobs at the "
                                      "same moment; nothing was changed") from exc
                raise
        raise AssertionError("unreachable")  # the last try returns or raises

    return verb


# What a batch's locking read returns of each row: its latest version, once locked.
BATCH_FIELDS = ("pk", "shelf", "has_dependents")


def batch_again(jobs: JobQuerySet, rows: list[tuple[int, date, bool]]) -> JobQuerySet:
    """What a batch deletes of the locked ``rows`` (id, shelf, has_dependents): those flagged
    ``has_dependents`` only if ``jobs`` reads them again (a statement of its own, which sees
    a dependent enqueued since the first read), the others as they are: a locked row that is
    not flagged gets no dependent before the batch commits (an enqueue flags its dependencies
    first, which waits for the lock). The shelves let PostgreSQL read only their partitions."""
    plain = [pk for pk, _, flagged in rows if not flagged]
    flagged = [pk for pk, _, is_flagged in rows if is_flagged]
    found = Q(pk__in=plain)
    if flagged:
        found |= Q(pk__in=jobs.filter(pk__in=flagged).values("pk"))
    return jobs.model._default_manager.using(jobs.db).filter(
        found, shelf__in={shelf for _, shelf, _ in rows})


class StaffVerbs:
    """Mixed into ``Engine``: ``db`` is its database, ``row_locks`` whether it has them."""

    db: str
    row_locks: bool

    @staff_verb
    def retry(self, jobs: JobQuerySet) -> int:
        """Dead, failed and canceled jobs become pending now, with at least one attempt left;
        open again, with their attempts (``core/shelves.py``)."""
        return self._retry(jobs, (DEAD, FAILED, CANCELED), {})

    @staff_verb
    def retry_with_payload(self, jobs: JobQuerySet, payload: JSONValue) -> int:
        """Dead jobs get a corrected payload and are retried (as ``retry``).

        Raises InvalidJob if the payload is not JSON-serialisable; changes nothing then.
        """
        payload = check_payload(payload)
        return self._retry(jobs, (DEAD,), {"payload": payload})

    def _retry(self, jobs: JobQuerySet, states: tuple[str, ...], extra: dict[str, object]) -> int:
        """The rows of ``jobs`` in ``states`` locked, then reopened by id, a thousand at a time:
        the features' counts (``hooks.reopen``), the attempts of the finished ones back on the
        open shelf, then the jobs pending."""
        now = clock.now(self.db)
        retried = 0
        with transaction.atomic(using=jobs.db):
            locked = self._locked(jobs.filter(status__in=states))
            rows = jobs.model._default_manager.using(jobs.db)
            for start in range(0, len(locked), CHUNK):
                chunk = locked[start : start + CHUNK]
                ids = [pk for pk, _ in chunk]
                batch = rows.filter(pk__in=ids, status__in=states)
                hooks.reopen(batch)  # groups count their jobs that leave an end state
                self._reopen_attempts(jobs.db, [pk for pk, status in chunk
                                                if status in (DEAD, CANCELED)])
                retried += batch.update(**extra, **retry_fields(now))
        return retried

    def _locked(self, jobs: JobQuerySet) -> list[tuple[int, str]]:
        """The ids and statuses of ``jobs``, in the order of their ids, locked until commit
        where the database has row locks: the status read is the row's latest, after any
        transaction that held it."""
        listed = jobs.order_by("pk")
        if self.row_locks:
            listed = listed.select_for_update()
        return list(listed.values_list("pk", "status"))

    def _reopen_attempts(self, using: str, finished: list[int]) -> None:
        """The attempts of the jobs ``finished`` (dead or canceled, locked) go back to the open
        shelf, before the jobs do."""
        from django_jobs.models import JobAttempt

        if finished:
            JobAttempt.objects.using(using).filter(job_id__in=finished).exclude(
                shelf=OPEN_SHELF).update(shelf=OPEN_SHELF)

    @staff_verb
    def cancel(self, jobs: JobQuerySet) -> int:
        """Pending, waiting and failed jobs become canceled, on their prune day's shelf with
        their attempts (``core/shelves.py``); processing ones get a cancel request.

        The jobs are locked first and written by id, a thousand at a time: their attempts
        move by the same ids, so the ids must be the rows the UPDATE changes, which a caller's
        filter on the status could not name again once they are canceled."""
        from django_jobs.models import JobAttempt

        now = clock.now(self.db)
        shelf = shelf_for(CANCELED, now, jobs.db)
        model = jobs.model
        states = (*READY_STATES, WAITING)
        with transaction.atomic(using=jobs.db):
            locked = self._locked(jobs.filter(status__in=(*states, PROCESSING)))
            ids = [pk for pk, status in locked if status != PROCESSING]
            rows = model._default_manager.using(jobs.db)
            # read (and locked) for the features: the rows locked above, still cancelable
            hooked = hooks.hold_for_cancel(jobs.filter(status__in=states)) if ids else []
            attempts = JobAttempt.objects.using(jobs.db)
            waiting = 0
            for start in range(0, len(ids), CHUNK):
                chunk = ids[start : start + CHUNK]
                waiting += rows.filter(pk__in=chunk, status__in=states).update(
                    status=CANCELED, updated_at=now, finished_at=now, shelf=shelf,
                    cancel_requested=False, unique_key=keep_key_if(CANCELED),
                )
                attempts.filter(job_id__in=chunk).exclude(shelf=shelf).update(shelf=shelf)
            running = [pk for pk, status in locked if status == PROCESSING]
            asked = 0
            for start in range(0, len(running), CHUNK):
                asked += rows.filter(
                    pk__in=running[start : start + CHUNK], status=PROCESSING,
                    cancel_requested=False,
                ).update(cancel_requested=True, updated_at=now)
            for job in hooked:
                job.__dict__.update(status=CANCELED, updated_at=now, finished_at=now,
                                    shelf=shelf, cancel_requested=False)
            hooks.ended(hooked, jobs.db)
        return waiting + asked

    @staff_verb
    def run_now(self, jobs: JobQuerySet) -> int:
        """Scheduled (or backing-off) jobs become due now (one statement: the job's row
        alone)."""
        now = clock.now(self.db)
        return jobs.filter(status__in=READY_STATES, run_at__gt=now).update(
            run_at=now, updated_at=now
        )

    def delete_batch(self, jobs: JobQuerySet, limit: int) -> int:
        """Delete up to ``limit`` of these jobs (oldest first) and their attempts, in one short
        transaction; returns how many jobs went. Rows another transaction holds are skipped.

        The delete reads ``jobs``' filter again for the rows flagged ``has_dependents``, by a
        statement of its own once the rows are locked (``batch_again``): a job that came to
        match no longer since the first read (a dependent's enqueue, which locks its
        dependencies, committed in between) stays."""
        with transaction.atomic(using=jobs.db):
            batch = jobs.order_by("created_at", "pk")
            if self.row_locks:
                batch = batch.select_for_update(skip_locked=True)
            rows = list(batch.values_list(*BATCH_FIELDS)[:limit])
            if not rows:
                return 0
            deleted = batch_again(jobs, rows).delete()[1]
        return deleted.get(jobs.model._meta.label, 0)

    @staff_verb
    def discard(self, jobs: JobQuerySet) -> int:
        """Delete jobs no worker holds (all but processing) with their attempts; returns jobs.

        The rows are locked first (in the order of their ids) on databases with row locks, so
        a worker cannot claim a job between the check and the delete (claims skip locked
        rows), and the job's row is held before its attempts go; the delete then reads
        ``jobs``' filter again on them, so what changed before the lock (a dependent's enqueue,
        which locks its dependencies, committed meanwhile) counts.
        """
        deleted = 0
        model = jobs.model
        with transaction.atomic(using=jobs.db):
            idle = jobs.exclude(status=PROCESSING).order_by("pk")
            if self.row_locks:
                idle = idle.select_for_update()
            ids = list(idle.values_list("pk", flat=True))
            for start in range(0, len(ids), CHUNK):
                chunk = model._default_manager.using(jobs.db).filter(
                    pk__in=ids[start : start + CHUNK]
                ).filter(pk__in=jobs.values("pk"))
                _, per_model = chunk.exclude(status=PROCESSING).only("pk").delete()
                deleted += per_model.get(model._meta.label, 0)
        return deleted

    def pause(self, queue: str) -> bool:
        """Stop workers claiming from ``queue``; True if it was running."""
        return self._set_paused(queue, paused=True)

    def resume(self, queue: str) -> bool:
        """Let workers claim from ``queue`` again; True if it was paused."""
        return self._set_paused(queue, paused=False)

    def _set_paused(self, name: str, *, paused: bool) -> bool:
        from django_jobs.models import QueueState

        if not isinstance(name, str) or not QUEUE_RE.fullmatch(name):
            raise InvalidJob({"queue": f"must match {QUEUE_RE.pattern}, not {name!r}"})
        states = QueueState.objects.db_manager(self.db)
        now = clock.now(self.db)
        with transaction.atomic(using=self.db):
            changed = states.filter(name=name).exclude(paused=paused).update(
                paused=paused, changed_at=now
            )
            if not changed and paused and not states.filter(name=name).exists():
                states.create(name=name, paused=True, changed_at=now)
                changed = 1
        return bool(changed)
