"""The claim's locking read on MariaDB and MySQL: candidates' ids first, then only those locked."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import connections

if TYPE_CHECKING:
    from django_jobs.models import Job
    from django_jobs.models.managers import JobQuerySet

# Candidates read per locking round: a few claims' worth, so that workers starting together
# each find some rows the others have not locked.
CANDIDATES_PER_SLOT = 4


def lock_ready(ready: JobQuerySet, limit: int) -> list[Job]:
    """Lock up to ``limit`` rows of ``ready`` (a claim-ordered queryset), skipping locked ones.

    The claim's ``ORDER BY priority DESC, run_at, id`` has no index to follow here, so MariaDB
    sorts the ready rows, and a plain ``SELECT ... FOR UPDATE SKIP LOCKED LIMIT n`` would lock
    every ready row it read before the sort: one worker would hold them all and the others find
    nothing to claim. So the ids of the first candidates are read without locks, then only
    those are locked, skipping any another worker holds. When every candidate was taken, the
    next ones are tried; an empty result means no ready row was left unlocked.
    """
    seen: list[int] = []
    while True:
        candidates = list(ready.exclude(pk__in=seen).values_list("pk", flat=True)
                          [:limit * CANDIDATES_PER_SLOT])
        if not candidates:
            return []
        jobs = list(ready.filter(pk__in=candidates).select_for_update(skip_locked=True)[:limit])
        if jobs:
            return jobs
        seen += candidates


def lock_shared(jobs: JobQuerySet) -> None:
    """Lock the rows of ``jobs`` in share mode until commit (the ORM has only ``FOR UPDATE``):
    a delete of them waits, readers and other share locks do not."""
    select, params = jobs.order_by("pk").values_list("pk").query.get_compiler(
        using=jobs.db).as_sql()
    with connections[jobs.db].cursor() as cursor:
        cursor.execute(f"{select} LOCK IN SHARE MODE", params)
