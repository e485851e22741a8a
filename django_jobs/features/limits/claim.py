"""Admission at claim time for job types with limits, under per-limit locks.

The engine's claim selects its candidates as usual, then calls the ``admit`` hook
(``Limits``, registered when the app starts). When none of them
has a limit, ``admit`` returns them untouched without a query. Otherwise, in the claim's
transaction:

1. Lock the ``LimitLock`` rows of every (limit, key value) the candidates fall under, in sorted
   order, so two claimers never deadlock (the candidate rows themselves were taken with
   ``SKIP LOCKED``, which never waits).
2. Count, under those locks, the jobs running (concurrency) or started within the period (rate)
   for each limit. The count is exact: another claimer of the same scope waits for our commit,
   and jobs finishing meanwhile only free places.
3. Admit candidates in claim order while every limit they fall under has room; record their
   starts for rate limits. Refused candidates stay pending.
4. If some were refused, select once more, leaving out the refused scopes and the rows already
   seen, so a backlog of capped jobs does not hide the jobs queued behind it. From this second
   batch only jobs without limits, or under scopes already locked, are taken: no new lock is
   taken after the first, which is what keeps the lock order (and deadlock freedom) intact.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from typing import TYPE_CHECKING

from django.db.models import Count, Q

from django_jobs.core.states import JobStatus
from django_jobs.engine import engine_for
from django_jobs.engine.hooks import Feature
from django_jobs.engine.portable import RowLockEngine
from django_jobs.features.limits.rules import (
    HASHED,
    MISSING,
    Limit,
    RateLimit,
    limited_types,
    scope,
    value_of,
)
from django_jobs.models.limits import LimitLock, LimitStart

if TYPE_CHECKING:
    from django_jobs.engine.writes import ClaimFields
    from django_jobs.models import Job
    from django_jobs.models.managers import JobManager, JobQuerySet

Usage = dict[tuple[str, Limit], Counter[str]]


def admit(manager: JobManager, jobs: list[Job], ready: JobQuerySet, limit: int,
          now: datetime) -> list[Job]:
    """The candidates ``jobs`` (selected from ``ready``) this claim may take; see the module."""
    rules = limited_types()
    if not any(job.type in rules for job in jobs):
        return jobs
    db = manager.db
    engine = engine_for(db)
    row_locks = engine.row_locks
    scopes = {scope(lim.name(j.type), value_of(j.payload, lim.key))
              for j in jobs for lim in rules.get(j.type, ())}
    _lock(db, sorted(scopes), now, row_locks)
    touched = {(j.type, lim) for j in jobs for lim in rules.get(j.type, ())}
    usage: Usage = {key: _usage(manager, *key, now) for key in touched}
    admitted, refused = _admit(jobs, rules, usage, scopes, limit)
    if refused and len(admitted) < limit:
        more = ready.exclude(pk__in=[j.pk for j in jobs])
        for condition in _shut_out(refused, rules, usage):
            more = more.exclude(condition)
        room = limit - len(admitted)
        candidates = (engine.lock_candidates(more, room) if isinstance(engine, RowLockEngine)
                      else list(more[:room]))
        extra, _ = _admit(candidates, rules, usage, scopes, room)
        admitted += extra
    _record_starts(db, admitted, rules, touched, now)
    return admitted


def _usage(manager: JobManager, type: str, lim: Limit, now: datetime) -> Counter[str]:
    """Per key value: jobs running (concurrency) or starts within the period (rate)."""
    if isinstance(lim, RateLimit):
        rows = (LimitStart.objects.using(manager.db)
                .filter(limit=lim.name(type), at__gt=now - lim.period)
                .values_list("value").annotate(n=Count("id")))
        return Counter(dict(rows))
    running = (manager.filter(status=JobStatus.PROCESSING, type=type)
               .values_list("payload", flat=True))
    return Counter(value_of(payload, lim.key) for payload in running)


def _lock(db: str, scopes: list[str], now: datetime, row_locks: bool) -> None:
    LimitLock.objects.using(db).bulk_create(
        [LimitLock(scope=s, touched_at=now) for s in scopes], ignore_conflicts=True
    )
    if row_locks:  # PostgreSQL locks rows in the order it returns them: sorted
        list(LimitLock.objects.using(db).filter(scope__in=scopes).order_by("scope")
             .select_for_update().values_list("scope"))
    # SQLite: the claim's transaction already holds the database write lock.


def _admit(jobs: list[Job], rules: dict[str, tuple[Limit, ...]], usage: Usage,
           locked: set[str], limit: int) -> tuple[list[Job], list[Job]]:
    admitted: list[Job] = []
    refused: list[Job] = []
    for job in jobs:
        if len(admitted) == limit:
            break
        lims = rules.get(job.type, ())
        values = [value_of(job.payload, lim.key) for lim in lims]
        fits = all(
            (job.type, lim) in usage and scope(lim.name(job.type), v) in locked
            and usage[(job.type, lim)][v] < lim.limit
            for lim, v in zip(lims, values, strict=True)
        )
        if not fits:
            refused.append(job)
            continue
        for lim, v in zip(lims, values, strict=True):
            usage[(job.type, lim)][v] += 1
        admitted.append(job)
    return admitted, refused


def _shut_out(refused: list[Job], rules: dict[str, tuple[Limit, ...]], usage: Usage) -> list[Q]:
    """Conditions matching the jobs that full limits shut out (to skip in the second pass)."""
    conditions = []
    for job in refused:
        for lim in rules.get(job.type, ()):
            value = value_of(job.payload, lim.key)
            if usage.get((job.type, lim), Counter())[value] < lim.limit:
                continue
            if lim.key is None:
                conditions.append(Q(type=job.type))
            elif value == MISSING:
                conditions.append(Q(type=job.type) & ~Q(payload__has_key=lim.key))
            elif not value.startswith(HASHED):
                conditions.append(Q(type=job.type, **{f"payload__{lim.key}": json.loads(value)}))
    return conditions


def _record_starts(db: str, admitted: list[Job], rules: dict[str, tuple[Limit, ...]],
                   touched: set[tuple[str, Limit]], now: datetime) -> None:
    starts = [LimitStart(limit=lim.name(job.type), value=value_of(job.payload, lim.key), at=now)
              for job in admitted for lim in rules.get(job.type, ())
              if isinstance(lim, RateLimit)]
    if starts:
        LimitStart.objects.using(db).bulk_create(starts)
    for t, lim in touched:  # forget starts older than their window
        if isinstance(lim, RateLimit):
            LimitStart.objects.using(db).filter(limit=lim.name(t), at__lte=now - lim.period) \
                .delete()


def claim_without_row_locks(manager: JobManager, ready: JobQuerySet, claim: ClaimFields, limit: int,
                            now: datetime) -> list[Job] | None:
    """SQLite's claim when limits are registered (None when none are: use the plain claim).

    SQLite has no row locks: take the database write lock first, then select, admit and mark
    in one transaction, so no other claimer reads between our count and our write.
    """
    from django.db import transaction

    if not limited_types():
        return None
    with transaction.atomic(using=manager.db):
        LimitLock.objects.using(manager.db).filter(scope="").update(touched_at=now)
        jobs = admit(manager, list(ready[:limit]), ready, limit, now)
        if not jobs:
            return []
        engine_for(manager.db).mark_claimed(jobs, claim)
    return jobs


class Limits(Feature):
    """The claim-admission hooks: candidates of limited types are admitted under the limits."""

    name = "limits"

    configured_by = ("handler.limits",)  # the limits of the registered types

    def limits_claims(self) -> bool:
        return True  # asked only while a registered type has limits (``configured_by``)

    def admit(self, manager: JobManager, jobs: list[Job], ready: JobQuerySet, limit: int,
              now: datetime) -> list[Job]:
        return admit(manager, jobs, ready, limit, now)

    def claim_without_row_locks(self, manager: JobManager, ready: JobQuerySet, claim: ClaimFields,
                                limit: int, now: datetime) -> list[Job] | None:
        return claim_without_row_locks(manager, ready, claim, limit, now)
