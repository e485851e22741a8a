"""The staff's verbs, as the admin, the API and commands call them on a queryset of jobs:
retry, retry with a corrected payload, cancel, run now, discard, delete a batch; and pausing
and resuming a queue. Each narrows to the rows it applies to and returns how many changed."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import transaction
from django.db.models import Q

from django_jobs.core import clock
from django_jobs.core.shelves import OPEN_SHELF
from django_jobs.core.states import CANCELED, DEAD, FAILED, PROCESSING, READY_STATES, WAITING
from django_jobs.core.validation import QUEUE_RE, check_payload
from django_jobs.engine import hooks
from django_jobs.engine.moved_rows import once_more_if_moved
from django_jobs.engine.shelving import shelf_for
from django_jobs.engine.unique_column import keep_key_if
from django_jobs.engine.writes import retry_fields
from django_jobs.exceptions import InvalidJob

if TYPE_CHECKING:
    from datetime import date

    from django_jobs.core.json_rules import JSONValue
    from django_jobs.models.managers import JobQuerySet


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

    @once_more_if_moved
    def retry(self, jobs: JobQuerySet) -> int:
        """Dead, failed and canceled jobs become pending now, with at least one attempt left;
        open again, with their attempts (``core/shelves.py``)."""
        retried = jobs.filter(status__in=(DEAD, FAILED, CANCELED))
        with transaction.atomic(using=jobs.db):
            hooks.reopen(retried)  # groups count their jobs that leave an end state
            self._reopen_attempts(retried)
            return retried.update(**retry_fields(clock.now(self.db)))

    @once_more_if_moved
    def retry_with_payload(self, jobs: JobQuerySet, payload: JSONValue) -> int:
        """Dead jobs get a corrected payload and are retried (as ``retry``) in one statement.

        Raises InvalidJob if the payload is not JSON-serialisable; changes nothing then.
        """
        payload = check_payload(payload)
        retried = jobs.filter(status=DEAD)
        with transaction.atomic(using=jobs.db):
            hooks.reopen(retried)
            self._reopen_attempts(retried)
            return retried.update(payload=payload, **retry_fields(clock.now(self.db)))

    def _reopen_attempts(self, retried: JobQuerySet) -> None:
        """The attempts of the finished jobs among ``retried`` go back to the open shelf,
        before the jobs do (read while the jobs are still finished). A job that another
        transaction reopens in between has its attempts open all the same: open is the shelf
        that keeps rows, never the one that loses them."""
        from django_jobs.models import JobAttempt

        finished = retried.filter(status__in=(DEAD, CANCELED)).values("pk")
        JobAttempt.objects.using(retried.db).filter(job_id__in=finished).exclude(
            shelf=OPEN_SHELF).update(shelf=OPEN_SHELF)

    @once_more_if_moved
    def cancel(self, jobs: JobQuerySet) -> int:
        """Pending, waiting and failed jobs become canceled, on their prune day's shelf with
        their attempts (``core/shelves.py``); processing ones get a cancel request.

        The jobs to cancel are read first (locked where the database can) and written by id,
        a thousand at a time: their attempts move by the same ids, so the ids must be the rows
        the UPDATE changes, which a caller's filter on the status could not name again once
        they are canceled."""
        from django_jobs.models import JobAttempt

        now = clock.now(self.db)
        shelf = shelf_for(CANCELED, now, jobs.db)
        model = jobs.model
        states = (*READY_STATES, WAITING)
        with transaction.atomic(using=jobs.db):
            cancelable = jobs.filter(status__in=states)
            hooked = hooks.hold_for_cancel(cancelable)  # read (and locked) for the features
            listed = cancelable.order_by("pk")
            if self.row_locks:
                listed = listed.select_for_update()
            ids = list(listed.values_list("pk", flat=True))
            rows = model._default_manager.using(jobs.db)
            attempts = JobAttempt.objects.using(jobs.db)
            waiting = 0
            for start in range(0, len(ids), 1000):
                chunk = ids[start : start + 1000]
                waiting += rows.filter(pk__in=chunk, status__in=states).update(
                    status=CANCELED, updated_at=now, finished_at=now, shelf=shelf,
                    unique_key=keep_key_if(CANCELED),
                )
                attempts.filter(job_id__in=chunk).exclude(shelf=shelf).update(shelf=shelf)
            running = jobs.filter(status=PROCESSING, cancel_requested=False).update(
                cancel_requested=True, updated_at=now
            )
            for job in hooked:
                job.__dict__.update(status=CANCELED, updated_at=now, finished_at=now,
                                    shelf=shelf)
            hooks.ended(hooked, jobs.db)
        return waiting + running

    def run_now(self, jobs: JobQuerySet) -> int:
        """Scheduled (or backing-off) jobs become due now."""
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

    def discard(self, jobs: JobQuerySet) -> int:
        """Delete jobs no worker holds (all but processing) with their attempts; returns jobs.

        The rows are locked first on databases with row locks, so a worker cannot claim a
        job between the check and the delete (claims skip locked rows); the delete then reads
        ``jobs``' filter again on them, so what changed before the lock (a dependent's enqueue,
        which locks its dependencies, committed meanwhile) counts.
        """
        deleted = 0
        model = jobs.model
        with transaction.atomic(using=jobs.db):
            idle = jobs.exclude(status=PROCESSING).order_by()
            if self.row_locks:
                idle = idle.select_for_update()
            ids = list(idle.values_list("pk", flat=True))
            for start in range(0, len(ids), 1000):
                chunk = model._default_manager.using(jobs.db).filter(
                    pk__in=ids[start : start + 1000]
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
