"""Dropping a day of the partitioned jobs and attempts tables on PostgreSQL, and the workers'
pass that makes days ahead and drops those whose day has come (``partitions.py`` for the
layout and the making; ``docs/explanation-history-partitions.md``).

A day's partitions are dropped once the day has come (``prune_day``): the dead or canceled
jobs in it that a waiting job still depends on are moved to the next day, the links and rows
that point at the day's jobs are updated as Django's delete would do it (``prune.plan``), and
the two partitions are detached ``CONCURRENTLY`` (``SHARE UPDATE EXCLUSIVE`` on the parent)
and dropped. One worker does this at a time (a session advisory lock).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import date, timedelta
from typing import Any

from django.db import DatabaseError, connections, transaction
from django.db.models import Exists, Q

from django_jobs.core.db_errors import lock_conflict
from django_jobs.core.shelves import KEPT_SHELF
from django_jobs.engine.postgres.partitions import (
    JOBS,
    LOCK_TIMEOUT,
    TABLES,
    attached_days,
    day_name,
    day_of,
    in_transaction,
    make_ahead,
    partitioned,
)

logger = logging.getLogger("django_jobs.worker")

# The session advisory lock one worker holds while it makes and drops partitions.
LOCK_KEY = 7_100_028
# A worker's pass tries each catalog change once, and a detach waits at most this long for the
# transactions that began before it: a pass runs inside the worker's heartbeat, which must not
# wait on a long transaction (a report, a session idle in its transaction).
HEARTBEAT_LOCK_WAIT = "1s"


def detach_and_drop(using: str, day: date) -> bool:
    """Detach ``day``'s partitions ``CONCURRENTLY`` (claims go on) and drop them; True once both
    are gone.

    A concurrent detach waits for every transaction that holds the parent and began before it.
    It waits ``HEARTBEAT_LOCK_WAIT`` at most: past that the detach stays pending (the partition
    is hidden from later queries), this returns False and a later pass finalizes it
    (``FINALIZE`` waits the same way). So a long transaction on the jobs table holds a day's
    drop back but never the worker whose heartbeat runs the pass. Inside a transaction block
    the detach is a plain one (``ACCESS EXCLUSIVE`` on the parent, for a catalog change)."""
    connection = connections[using]
    for table in TABLES:
        name = day_name(table, day)
        try:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT i.inhdetachpending FROM pg_inherits i WHERE i.inhparent = "
                    "%s::regclass AND i.inhrelid = to_regclass(%s)", [table, name])
                row = cursor.fetchone()
            if row is not None and (row[0] or connection.in_atomic_block):
                how = "FINALIZE" if row[0] else ""
                in_transaction(using, [f"ALTER TABLE {table} DETACH PARTITION {name} {how}"],
                               tries=1, wait=HEARTBEAT_LOCK_WAIT)
            elif row is not None:
                detach_concurrently(using, table, name)
            in_transaction(using, [f"DROP TABLE IF EXISTS {name}"], tries=1,
                           wait=HEARTBEAT_LOCK_WAIT)
        except DatabaseError as exc:
            if not lock_conflict(exc):
                raise
            logger.info("partitions: the drop of %s waits for transactions older than it on "
                        "%s; a later pass goes on with it", name, table)
            return False
    return True


def detach_concurrently(using: str, table: str, name: str) -> None:
    """``DETACH PARTITION ... CONCURRENTLY``, which runs outside a transaction block: under the
    session's ``lock_timeout`` set to ``HEARTBEAT_LOCK_WAIT`` for this statement alone."""
    with connections[using].cursor() as cursor:
        cursor.execute("SELECT current_setting('lock_timeout'), "
                       "set_config('lock_timeout', %s, false)", [HEARTBEAT_LOCK_WAIT])
        before = cursor.fetchone()[0]
        try:
            cursor.execute(f"ALTER TABLE {table} DETACH PARTITION {name} CONCURRENTLY")
        finally:
            cursor.execute("SELECT set_config('lock_timeout', %s, false)", [before])


def prune_day(using: str, day: date, kept: Q | Exists,
              batch_size: int) -> dict[str, int] | None:
    """Drop ``day``'s partitions of jobs and attempts; returns the jobs that went, by status,
    or None where the detach waits for older transactions (``detach_and_drop``).

    First the dead or canceled jobs of the day matched by ``kept`` (a waiting job depends on
    them) move to the next day's partition, their attempts with them: a retry can still release
    their dependents. Then what Django's delete does for the relations of the day's jobs
    (``prune.plan``: links kept with ``deleted_status``, references set to NULL, dependent
    rows deleted), in one statement; where the site's own relations or receivers need Django's
    collector, the day's jobs are deleted through it in batches instead. Last, the partitions
    are detached and dropped."""
    from django_jobs.core.states import CANCELED, DEAD
    from django_jobs.engine.postgres.prune import part, plan, quote
    from django_jobs.models import Job, JobAttempt

    nextday = day + timedelta(days=1)
    with connections[using].cursor() as cursor:
        if nextday not in attached_days(cursor, JOBS):
            nextday = KEPT_SHELF
    jobs = Job.objects.using(using)
    with transaction.atomic(using=using):
        held = jobs.filter(shelf=day, status__in=(DEAD, CANCELED), has_dependents=True).filter(
            kept)
        ids = list(held.select_for_update().values_list("pk", flat=True))
        if ids:
            JobAttempt.objects.using(using).filter(job_id__in=ids, shelf=day).update(
                shelf=nextday)
            jobs.filter(pk__in=ids, shelf=day).update(shelf=nextday)
    name = day_name(JOBS, day)
    steps = plan(Job)
    counts: dict[str, int] = {}
    with connections[using].cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [name])
        if cursor.fetchone()[0]:  # else dropped by a pass that left the attempts' day behind
            cursor.execute(f"SELECT status, count(*) FROM {quote(name)} GROUP BY status")  # noqa: S608
            counts = {status: int(n) for status, n in cursor.fetchall()}
    count = sum(counts.values())
    if steps is None:
        while jobs.filter(shelf=day).delete_batch(batch_size) >= batch_size:
            pass
    elif count and any(step.model is not JobAttempt for step in steps):
        meta = Job._meta
        jobs_table, pk = quote(name), quote(meta.pk.column or "id")
        parts = ",\n".join(f" s{n} AS ({part(step, jobs_table, pk)})"
                            for n, step in enumerate(steps) if step.model is not JobAttempt)
        with transaction.atomic(using=using), connections[using].cursor() as cursor:
            cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
            cursor.execute(f"WITH batch(id) AS NOT MATERIALIZED (SELECT {pk} FROM {jobs_table}),\n"  # noqa: S608
                           f"{parts}\nSELECT 1")
    return counts if detach_and_drop(using, day) else None


def passed_days(using: str, today: date) -> list[date]:
    """The days whose partitions may be dropped: every day partition up to ``today``, and a
    day table detached whose drop did not get its lock."""
    days: set[date] = set()
    with connections[using].cursor() as cursor:
        for table in TABLES:
            days |= set(attached_days(cursor, table)) | set(hidden_days(cursor, table))
    return sorted(day for day in days if day <= today)


def dropped_jobs(using: str, through: date, kept: Q | Exists) -> dict[str, int]:
    """The jobs, by status, that dropping the day partitions through ``through`` would take
    (``prune_day``), counted; the dead or canceled ones matched by ``kept`` move instead. An
    empty count where the table is not partitioned."""
    from django.db.models import Count

    from django_jobs.core.states import CANCELED, DEAD
    from django_jobs.models import Job

    if not partitioned(using):
        return {}
    days = passed_days(using, through)
    counts: dict[str, int] = {}
    with connections[using].cursor() as cursor:
        hidden = hidden_days(cursor, JOBS)
        for day in days:
            if day in hidden:  # every row of it goes: the move reads through the parent
                cursor.execute(f"SELECT status, count(*) FROM {hidden[day]} GROUP BY status")  # noqa: S608
                for status, n in cursor.fetchall():
                    counts[status] = counts.get(status, 0) + int(n)
    shown = [day for day in days if day not in hidden]
    if shown:
        jobs = Job.objects.using(using).filter(shelf__in=shown)
        moved = jobs.filter(status__in=(DEAD, CANCELED), has_dependents=True).filter(kept)
        rows = jobs.exclude(pk__in=moved.values("pk"))
        for row in rows.values("status").annotate(n=Count("pk")):
            counts[row["status"]] = counts.get(row["status"], 0) + row["n"]
    return counts


def hidden_days(cursor: Any, table: str) -> dict[date, str]:
    """The day tables of ``table`` that queries through the parent do not see, by their day: a
    detach left pending, and a table detached whose drop did not get its lock."""
    cursor.execute(
        "SELECT c.relname FROM pg_class c LEFT JOIN pg_inherits i ON i.inhrelid = c.oid "
        "WHERE c.relkind = 'r' AND c.relnamespace = current_schema()::regnamespace "
        "AND c.relname ~ %s AND (NOT c.relispartition OR i.inhdetachpending)",
        [f"^{table}_[0-9]{{8}}$"])
    return {day_of(name[-8:]): name for (name,) in cursor.fetchall()}


def dropped_soon(using: str, today: date) -> tuple[date, date] | None:
    """The shelves whose day partitions a pass drops by tomorrow: from the first day partition
    attached through tomorrow; None where the jobs table is not partitioned or has no day
    partition. The batched prune leaves their jobs to the drop: deleting them one by one a
    few hours earlier would leave the dead rows and the work the drop is there to save."""
    if not partitioned(using):
        return None
    with connections[using].cursor() as cursor:
        days = attached_days(cursor, JOBS)
    if not days:
        return None
    return min(days), today + timedelta(days=1)


def upkeep(using: str, today: date, ages: Iterable[timedelta | None], kept: Q | Exists,
           batch_size: int, drop_through: date | None = None) -> dict[str, Any] | None:
    """Make the day partitions ahead of ``today`` and drop those of the days through
    ``drop_through`` (``today`` unless given), in the one session that holds the advisory lock;
    None where another session holds it or the tables are not partitioned. Returns the days
    made and dropped and the jobs dropped with them."""
    if not partitioned(using):
        return None
    connection = connections[using]
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [LOCK_KEY])
        if not cursor.fetchone()[0]:
            return None
    try:
        try:
            made = make_ahead(using, today, list(ages), tries=1, wait=HEARTBEAT_LOCK_WAIT)
        except DatabaseError as exc:
            if not lock_conflict(exc):
                raise
            logger.info("partitions: a day made ahead waits for a lock on the table; a later "
                        "pass makes it")
            made = 0
        dropped = 0
        jobs: dict[str, int] = {}
        for day in passed_days(using, today if drop_through is None else drop_through):
            counts = prune_day(using, day, kept, batch_size)
            if counts is None:  # the days after it wait with it: one detach may be pending
                break
            for status, n in counts.items():
                jobs[status] = jobs.get(status, 0) + n
            dropped += 1
        return {"made": made, "dropped": dropped, "jobs": jobs}
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [LOCK_KEY])
