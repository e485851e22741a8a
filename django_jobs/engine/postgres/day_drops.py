"""Dropping a day of the partitioned jobs and attempts tables on PostgreSQL, and the workers'
pass that makes days ahead and drops those whose day has come (``partitions.py`` for the
layout and the making; ``docs/explanation-history-partitions.md``).

A day's partitions are dropped once the day has come (``prune_day``): the dead or canceled
jobs in it that a waiting job still depends on are moved to the next day, the links and rows
that point at the day's jobs are updated as Django's delete would do it (``prune.plan``), the
two partitions are detached, and the detached tables are read once more, for a dependent
enqueued meanwhile, and dropped (``settle``). One worker does this at a time (an advisory
lock). Where the connection's session is its own the detach is ``CONCURRENTLY`` (``SHARE UPDATE
EXCLUSIVE`` on the parent); through a transaction pooler, where a session setting or lock
would reach other clients, it is a plain one in a transaction (``upkeep``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import date, timedelta
from typing import Any

from django.db import DatabaseError, connections, transaction
from django.db.models import Exists, Q

from django_jobs.core.db_errors import lock_conflict
from django_jobs.core.shelves import KEPT_SHELF
from django_jobs.engine.postgres import pooler
from django_jobs.engine.postgres.partitions import (
    ATTEMPTS,
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

# The advisory lock one worker holds while it makes and drops partitions (``exclusive``).
LOCK_KEY = 7_100_028
# A worker's pass tries each catalog change once, and a detach waits at most this long for the
# transactions that began before it: a pass runs inside the worker's heartbeat, which must not
# wait on a long transaction (a report, a session idle in its transaction).
HEARTBEAT_LOCK_WAIT = "1s"


def session_kept(using: str) -> bool:
    """Whether a setting of the session of ``using``'s connection stays with that connection
    (``pooler.keeps_session``): reached directly or through a session pooler, not through a
    transaction pooler, which hands the server session on to other clients."""
    connection = connections[using]
    connection.ensure_connection()
    return pooler.keeps_session(connection, connection.connection)


def detach(using: str, day: date, concurrently: bool) -> bool:
    """Detach ``day``'s partitions; True once neither is attached (detached, or gone).

    ``concurrently``: ``DETACH ... CONCURRENTLY`` (``SHARE UPDATE EXCLUSIVE`` on the parent:
    claims go on), on a connection whose session is its own (``detach_concurrently``). It
    waits for every transaction that holds the parent and began before it, ``HEARTBEAT_LOCK_WAIT``
    at most: past that the detach stays pending (the partition is hidden from later queries)
    and a later pass finalizes it (``FINALIZE`` waits the same way). Else, and inside a
    transaction block, a plain detach in a transaction (``ACCESS EXCLUSIVE`` on the parent, for
    a catalog change) under ``SET LOCAL lock_timeout``: nothing outlives the transaction."""
    connection = connections[using]
    for table in TABLES:
        name = day_name(table, day)
        try:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT i.inhdetachpending FROM pg_inherits i WHERE i.inhparent = "
                    "%s::regclass AND i.inhrelid = to_regclass(%s)", [table, name])
                row = cursor.fetchone()
            if row is None:
                continue
            if row[0] or not concurrently or connection.in_atomic_block:
                how = "FINALIZE" if row[0] else ""
                in_transaction(using, [f"ALTER TABLE {table} DETACH PARTITION {name} {how}"],
                               tries=1, wait=HEARTBEAT_LOCK_WAIT)
            else:
                detach_concurrently(using, table, name)
        except DatabaseError as exc:
            if not lock_conflict(exc):
                raise
            logger.info("partitions: the detach of %s waits for transactions older than it on "
                        "%s; a later pass goes on with it", name, table)
            return False
    return True


def detach_and_drop(using: str, day: date) -> bool:
    """Detach and drop ``day``'s partitions, whatever their rows; True once both are gone."""
    if not detach(using, day, session_kept(using)):
        return False
    in_transaction(using, [f"DROP TABLE IF EXISTS {day_name(table, day)}" for table in TABLES],
                   tries=1, wait=HEARTBEAT_LOCK_WAIT)
    return True


def detach_concurrently(using: str, table: str, name: str) -> None:
    """``DETACH PARTITION ... CONCURRENTLY``, which runs outside a transaction block: under the
    session's ``lock_timeout`` set to ``HEARTBEAT_LOCK_WAIT`` for this statement alone. Only on
    a connection whose session is its own (``session_kept``): through a transaction pooler the
    setting and the statement would reach different server sessions."""
    with connections[using].cursor() as cursor:
        cursor.execute("SELECT current_setting('lock_timeout'), "
                       "set_config('lock_timeout', %s, false)", [HEARTBEAT_LOCK_WAIT])
        before = cursor.fetchone()[0]
        try:
            cursor.execute(f"ALTER TABLE {table} DETACH PARTITION {name} CONCURRENTLY")
        finally:
            cursor.execute("SELECT set_config('lock_timeout', %s, false)", [before])


def older_holders(using: str, table: str) -> bool:
    """Whether another session holds a lock on ``table`` in a transaction open for longer than
    ``HEARTBEAT_LOCK_WAIT``: a plain detach would only queue every query of the table behind
    its lock request until its lock timeout."""
    with connections[using].cursor() as cursor:
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE l.locktype = 'relation' AND l.relation = %s::regclass AND l.granted "
            "AND l.pid <> pg_backend_pid() "
            "AND a.xact_start < clock_timestamp() - %s::interval)", [table, HEARTBEAT_LOCK_WAIT])
        return bool(cursor.fetchone()[0])


def kept_here(alias: str) -> tuple[str, list[str]]:
    """The condition, on the rows of a day table named ``alias``, of the jobs a drop keeps,
    and its parameters, read from the day table itself, which queries through the
    parent no longer see once its detach is pending: a dead or canceled job a waiting job
    depends on, a completed one whose result a dependent not yet finished may read."""
    from django_jobs.core.states import CANCELED, COMPLETED, DEAD, WAITING
    from django_jobs.engine.postgres.prune import quote
    from django_jobs.models import JobDependency

    job, depends_on = (quote(relation.field.column or "")
                       for relation in (JobDependency.job, JobDependency.depends_on))
    # ``has_dependents`` is set in the transaction that adds a job's first link: the rows
    # without it, nearly all, need no look at the links.
    return (f"{alias}.has_dependents AND EXISTS (SELECT 1 FROM "  # noqa: S608
            f"{quote(JobDependency._meta.db_table)} l "
            f"JOIN {JOBS} w ON w.id = l.{job} WHERE l.{depends_on} = {alias}.id "
            f"AND ({alias}.status IN (%s, %s) AND w.status = %s "
            f"OR {alias}.status = %s AND w.status NOT IN (%s, %s, %s)))",
            [DEAD, CANCELED, WAITING, COMPLETED, COMPLETED, DEAD, CANCELED])


def kept_jobs(using: str, day: date, kept: Q | Exists) -> list[int]:
    """The jobs of ``day`` a drop keeps, moved to the next day: those of ``kept_here``, and
    the dead or canceled ones matched by ``kept`` (``retention.prunable``'s rule)."""
    from django_jobs.core.states import CANCELED, DEAD
    from django_jobs.models import Job

    with connections[using].cursor() as cursor:
        name = day_name(JOBS, day)
        ids = needed(cursor, name) if exists(cursor, name) else []
    return sorted(set(ids) | set(Job.objects.using(using).filter(
        shelf=day, status__in=(DEAD, CANCELED), has_dependents=True).filter(
        kept).values_list("pk", flat=True)))


def needed(cursor: Any, jobs_table: str) -> list[int]:
    """The jobs of ``jobs_table`` (a day table, attached, pending or detached) that a drop
    keeps (``kept_here``)."""
    condition, params = kept_here("d")
    cursor.execute(f"SELECT d.id FROM {jobs_table} d WHERE {condition} ORDER BY d.id", params)  # noqa: S608
    return [pk for (pk,) in cursor.fetchall()]


def move_back(cursor: Any, day: date, ids: list[int], shelf: date) -> None:
    """Move the jobs ``ids`` of ``day``'s jobs table, and their attempts in its attempts table,
    into the parents on ``shelf``: whether the day tables are attached, pending or detached."""
    from django_jobs.models import Job, JobAttempt

    for model, table, key in ((Job, JOBS, "id"), (JobAttempt, ATTEMPTS, "job_id")):
        name = day_name(table, day)
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [name])
        if not cursor.fetchone()[0]:
            continue
        columns = [field.column for field in model._meta.concrete_fields]
        names = ", ".join(f'"{column}"' for column in columns)
        values = ", ".join("%s" if column == "shelf" else f'"{column}"' for column in columns)
        cursor.execute(f"WITH gone AS (DELETE FROM {name} WHERE {key} = ANY(%s) RETURNING *) "  # noqa: S608
                       f"INSERT INTO {table} ({names}) SELECT {values} FROM gone", [ids, shelf])


def keep_needed(using: str, day: date, shelf: date) -> int:
    """While ``day``'s detach is pending: the jobs of its tables a drop keeps (``needed``)
    move to ``shelf``, found and retried there. Under ``EXCLUSIVE`` locks on the
    day tables, which wait for a transaction that locked a row of theirs (the enqueue of a
    dependent marks its dependencies); a transaction begun since the detach does not see the
    day. Returns how many moved; none where a lock is not granted in ``HEARTBEAT_LOCK_WAIT``
    (the next pass tries again)."""
    names = [day_name(table, day) for table in TABLES]
    try:
        with transaction.atomic(using=using), connections[using].cursor() as cursor:
            cursor.execute(f"SET LOCAL lock_timeout = '{HEARTBEAT_LOCK_WAIT}'")
            present = [name for name in names if exists(cursor, name)]
            if names[0] not in present:
                return 0
            cursor.execute(f"LOCK TABLE {', '.join(present)} IN EXCLUSIVE MODE")
            ids = needed(cursor, names[0])
            if ids:
                move_back(cursor, day, ids, shelf)
            return len(ids)
    except DatabaseError as exc:
        if not lock_conflict(exc):
            raise
        return 0


def exists(cursor: Any, name: str) -> bool:
    cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [name])
    return bool(cursor.fetchone()[0])


def run_steps(cursor: Any, jobs_table: str, steps: list) -> None:
    """What Django's delete does for the relations of the jobs of ``jobs_table`` (a day table)
    that point at them (``prune.plan``), in one statement, but for the jobs a drop keeps
    (``kept_here``)."""
    from django_jobs.engine.postgres.prune import part, quote
    from django_jobs.models import Job, JobAttempt

    parts = ",\n".join(f" s{n} AS ({part(step, jobs_table, quote(Job._meta.pk.column or 'id'))})"
                        for n, step in enumerate(steps) if step.model is not JobAttempt)
    if parts:
        # Not the jobs a drop keeps, as this statement sees them: a dependent committed since
        # they were moved out keeps its link to the job for ``settle`` to find.
        condition, params = kept_here("d")
        cursor.execute(f"WITH batch(id) AS NOT MATERIALIZED (SELECT d.id FROM {jobs_table} d "  # noqa: S608
                       f"WHERE NOT ({condition})),\n{parts}\nSELECT 1", params)


def settle(using: str, day: date, shelf: date, steps: list | None) -> dict[str, int] | None:
    """``day``'s detached tables dropped, in one transaction: first the jobs in them a drop
    keeps (``needed``) move to ``shelf``, and the links and rows that point at the
    others are updated again (``run_steps``), for a dependent whose enqueue committed while
    the day was being detached: no transaction sees the day tables any more, so what is read
    here is final. Returns the jobs dropped, by status; None where a lock is not granted."""
    names = [day_name(table, day) for table in TABLES]
    counts: dict[str, int] = {}
    try:
        with transaction.atomic(using=using), connections[using].cursor() as cursor:
            cursor.execute(f"SET LOCAL lock_timeout = '{HEARTBEAT_LOCK_WAIT}'")
            present = [name for name in names if exists(cursor, name)]
            if not present:
                return counts
            cursor.execute(f"LOCK TABLE {', '.join(present)} IN ACCESS EXCLUSIVE MODE")
            if names[0] in present:
                ids = needed(cursor, names[0])
                if ids:
                    move_back(cursor, day, ids, shelf)
                if steps:
                    run_steps(cursor, names[0], steps)
                cursor.execute(f"SELECT status, count(*) FROM {names[0]} GROUP BY status")  # noqa: S608
                counts = {status: int(n) for status, n in cursor.fetchall()}
            cursor.execute(f"DROP TABLE {', '.join(present)}")
    except DatabaseError as exc:
        if not lock_conflict(exc):
            raise
        logger.info("partitions: the drop of %s waits for a lock; a later pass goes on with it",
                    names[0])
        return None
    return counts


def next_shelf(using: str, day: date) -> date:
    """Where the jobs of ``day`` that are kept go: the next day, or the kept shelf where the
    next day has no partition."""
    nextday = day + timedelta(days=1)
    with connections[using].cursor() as cursor:
        if nextday not in attached_days(cursor, JOBS):
            return KEPT_SHELF
    return nextday


def prune_day(using: str, day: date, kept: Q | Exists, batch_size: int,
              concurrently: bool = True) -> dict[str, int] | None:
    """Drop ``day``'s partitions of jobs and attempts; returns the jobs that went, by status,
    or None where the detach waits for older transactions (``detach``).

    First the jobs of the day a drop keeps (``kept_jobs``: the dead or canceled ones matched by
    ``kept``, the completed ones a dependent not yet finished depends on) move to the next
    day's partition, their attempts with them. Then what Django's delete does for the
    relations of the day's jobs (``prune.plan``: links kept with ``deleted_status``,
    references set to NULL, dependent rows deleted), in one statement; where the site's own
    relations or receivers need Django's collector, the day's jobs are deleted through it in
    batches instead. Then the partitions are detached (``detach``); while the detach is
    pending, the jobs a drop keeps move out of the day (``keep_needed``). Last, the detached
    tables are checked once more and dropped (``settle``): a dependent enqueued while all
    this ran keeps its dependency."""
    from django_jobs.engine.postgres.prune import plan, quote
    from django_jobs.models import Job, JobAttempt

    nextday = next_shelf(using, day)
    jobs = Job.objects.using(using)
    with transaction.atomic(using=using):
        ids = list(jobs.filter(pk__in=kept_jobs(using, day, kept), shelf=day).select_for_update(
        ).values_list("pk", flat=True))
        if ids:
            JobAttempt.objects.using(using).filter(job_id__in=ids, shelf=day).update(
                shelf=nextday)
            jobs.filter(pk__in=ids, shelf=day).update(shelf=nextday)
    name = day_name(JOBS, day)
    steps = plan(Job)
    counts: dict[str, int] = {}
    if steps is None:
        with connections[using].cursor() as cursor:
            if exists(cursor, name):  # else dropped by a pass that left the attempts' day behind
                cursor.execute(f"SELECT status, count(*) FROM {quote(name)} GROUP BY status")  # noqa: S608
                counts = {status: int(n) for status, n in cursor.fetchall()}
        while jobs.filter(shelf=day).delete_batch(batch_size) >= batch_size:
            pass
    else:
        with transaction.atomic(using=using), connections[using].cursor() as cursor:
            cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
            if exists(cursor, name):
                run_steps(cursor, quote(name), steps)
    if not detach(using, day, concurrently):
        if concurrently:
            keep_needed(using, day, nextday)
        return None
    settled = settle(using, day, nextday, steps)
    if settled is None:
        return None
    return counts if steps is None else settled


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
    (``prune_day``), counted; those it keeps (``kept_jobs``) move instead. An empty count where
    the table is not partitioned."""
    from django.db.models import Count

    from django_jobs.models import Job

    if not partitioned(using):
        return {}
    days = passed_days(using, through)
    counts: dict[str, int] = {}
    with connections[using].cursor() as cursor:
        hidden = hidden_days(cursor, JOBS)
        for day in days:
            if day in hidden:  # read from the table: the parent no longer sees it
                condition, params = kept_here("d")
                cursor.execute(f"SELECT status, count(*) FROM {hidden[day]} d "  # noqa: S608
                               f"WHERE NOT ({condition}) GROUP BY status", params)
                for status, n in cursor.fetchall():
                    counts[status] = counts.get(status, 0) + int(n)
    shown = [day for day in days if day not in hidden]
    if shown:
        jobs = Job.objects.using(using).filter(shelf__in=shown)
        kept_ids = [pk for day in shown for pk in kept_jobs(using, day, kept)]
        rows = jobs.exclude(pk__in=kept_ids)
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


@contextmanager
def exclusive(using: str, session: bool) -> Iterator[bool]:
    """Whether this session is the one that makes and drops partitions (the advisory lock
    ``LOCK_KEY``). ``session``: a session lock, held until the block ends, on a connection
    whose session is its own; else a transaction lock, in a transaction that the block is: a
    session lock taken through a transaction pooler would stay on a server session that other
    clients go on to use, and be released on another."""
    if not session:
        with transaction.atomic(using=using):
            with connections[using].cursor() as cursor:
                cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [LOCK_KEY])
                held = bool(cursor.fetchone()[0])
            yield held
        return
    with connections[using].cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [LOCK_KEY])
        held = bool(cursor.fetchone()[0])
    try:
        yield held
    finally:
        if held:
            with connections[using].cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [LOCK_KEY])


def make(using: str, today: date, ages: list[timedelta | None]) -> int:
    """The days made ahead (``make_ahead``), each catalog change tried once."""
    try:
        return make_ahead(using, today, ages, tries=1, wait=HEARTBEAT_LOCK_WAIT)
    except DatabaseError as exc:
        if not lock_conflict(exc):
            raise
        logger.info("partitions: a day made ahead waits for a lock on the table; a later "
                    "pass makes it")
        return 0


def upkeep(using: str, today: date, ages: Iterable[timedelta | None], kept: Q | Exists,
           batch_size: int, drop_through: date | None = None) -> dict[str, Any] | None:
    """Make the day partitions ahead of ``today`` and drop those of the days through
    ``drop_through`` (``today`` unless given), in the one session that holds the advisory lock
    (``exclusive``); None where another session holds it or the tables are not partitioned.
    Returns the days made and dropped and the jobs dropped with them.

    On a connection whose session is its own (``session_kept``) the pass holds a session lock
    and detaches ``CONCURRENTLY``. Through a transaction pooler nothing is set on a server
    session: the days made are one transaction and each day dropped another, each under a
    transaction lock, the detach a plain one under ``SET LOCAL lock_timeout``, and a day is
    left for later while a transaction older than that wait holds the table
    (``older_holders``)."""
    if not partitioned(using):
        return None
    ages = list(ages)
    through = today if drop_through is None else drop_through
    dropped = 0
    jobs: dict[str, int] = {}

    def count(counts: dict[str, int]) -> None:
        nonlocal dropped
        for status, n in counts.items():
            jobs[status] = jobs.get(status, 0) + n
        dropped += 1

    if session_kept(using):
        with exclusive(using, session=True) as held:
            if not held:
                return None
            made = make(using, today, ages)
            for day in passed_days(using, through):
                counts = prune_day(using, day, kept, batch_size)
                if counts is None:  # the days after it wait with it: one detach may be pending
                    break
                count(counts)
        return {"made": made, "dropped": dropped, "jobs": jobs}
    with exclusive(using, session=False) as held:
        if not held:
            return None
        made = make(using, today, ages)
    for day in passed_days(using, through):
        if older_holders(using, JOBS):
            logger.info("partitions: a transaction older than %s holds %s; the drop of %s "
                        "waits for a later pass", HEARTBEAT_LOCK_WAIT, JOBS, day)
            break
        with exclusive(using, session=False) as held:
            counts = prune_day(using, day, kept, batch_size, concurrently=False) if held else None
        if counts is None:
            break
        count(counts)
    return {"made": made, "dropped": dropped, "jobs": jobs}
