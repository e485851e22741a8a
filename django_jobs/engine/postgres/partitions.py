"""The partitioned jobs and attempts tables on PostgreSQL: their day partitions, made ahead and
dropped once their day has come (``docs/explanation-history-partitions.md``).

Migration ``0028_partitions`` makes ``django_jobs_job`` and ``django_jobs_jobattempt``
partitioned by range of ``shelf`` (``core/shelves.py``): the old table as the first partition
(``..._open``, every shelf below a day ``D``: the open jobs and the history from before),
one partition per prune day from ``D`` on (``..._YYYYMMDD``), and the kept one (``..._kept``,
from ``9999-01-01``). MariaDB and SQLite keep the plain tables; nothing here runs there.

Day partitions are made ahead, through ``LAST_DAY`` (the longest finite ``RETENTION`` age plus a
week from today), each as ``CREATE TABLE ... (LIKE ...)`` then ``ATTACH PARTITION``, which
takes ``SHARE UPDATE EXCLUSIVE`` on the parent: claims and finishes go on. The last day made is
kept in the one-row table ``django_jobs_shelf_days``, written after both tables' partitions of
the day are attached. A write that finishes a job reads it (``last_day``, cached for a while:
it only grows, so an old value is a safe one) and puts a job whose prune day lies beyond it on
the kept shelf (``clamp`` of ``core/shelves.py``): a finish never fails for want of a
partition, and such a job is pruned later by ``finished_at``, with the old table's history.

A day's partitions are dropped once the day has come (``day_drops.py``, which also runs the
workers' pass over both).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from datetime import date, timedelta
from typing import Any

from django.db import DatabaseError, connections, transaction

logger = logging.getLogger("django_jobs.worker")

JOBS = "django_jobs_job"
ATTEMPTS = "django_jobs_jobattempt"
TABLES = (JOBS, ATTEMPTS)
DAYS = "django_jobs_shelf_days"
# Days made ahead beyond the longest finite retention age.
AHEAD = timedelta(days=7)
# How long a process trusts the last day made it read.
CACHE_SECONDS = 30.0
# Each catalog change's wait for its lock: past it the statement is tried again.
LOCK_TIMEOUT = "3s"

_cache: dict[str, tuple[float, date | None]] = {}


def day_name(table: str, day: date) -> str:
    return f"{table}_{day:%Y%m%d}"


def partitioned(using: str) -> bool:
    """Whether the jobs table of ``using`` is the partitioned parent."""
    connection = connections[using]
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", [JOBS])
        row = cursor.fetchone()
    return bool(row and row[0] == "p")


def read_last_day(using: str) -> date | None:
    """The last day partitions exist for, from ``django_jobs_shelf_days``; None where there is
    no such table (a plain table, or another database)."""
    connection = connections[using]
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [DAYS])
        if not cursor.fetchone()[0]:
            return None
        cursor.execute(f"SELECT max(last_day) FROM {DAYS}")  # noqa: S608 (a constant)
        row = cursor.fetchone()
    return row[0] if row else None


def last_day(using: str) -> date | None:
    """``read_last_day``, cached for ``CACHE_SECONDS`` per database alias."""
    if connections[using].vendor != "postgresql":
        return None
    now = time.monotonic()
    held = _cache.get(using)
    if held is not None and now - held[0] < CACHE_SECONDS:
        return held[1]
    day = read_last_day(using)
    if day is not None:  # none yet (a plain table): asked again, so the first one counts
        _cache[using] = (now, day)
    return day


def forget(using: str | None = None) -> None:
    """Drop the cached last day (of ``using``, or of every database)."""
    if using is None:
        _cache.clear()
    else:
        _cache.pop(using, None)


def wanted_last_day(today: date, ages: Iterable[timedelta | None]) -> date:
    """The last day to have partitions for: the longest finite age, plus a day for the
    rounding up to a day boundary, plus ``AHEAD``, from ``today``."""
    finite = [age for age in ages if age is not None]
    longest = max(finite, default=timedelta(0))
    return today + timedelta(days=longest.days + 2) + AHEAD


def day_of(suffix: str) -> date:
    """The day a partition's ``YYYYMMDD`` suffix names (``day_name``)."""
    return date(int(suffix[:4]), int(suffix[4:6]), int(suffix[6:]))


def attached_days(cursor: Any, table: str) -> dict[date, str]:
    """The day partitions of ``table`` by their day (detach-pending ones included)."""
    cursor.execute(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = %s::regclass", [table])
    days = {}
    for (name,) in cursor.fetchall():
        suffix = name[len(table) + 1:]
        if len(suffix) == 8 and suffix.isdigit():
            days[day_of(suffix)] = name
    return days


def in_transaction(using: str, statements: list[str], params: list | None = None,
                   tries: int = 20, wait: str = LOCK_TIMEOUT) -> None:
    """``statements`` in one transaction, each lock waited for at most ``wait``; the whole
    tried again after a lock timeout (a long transaction on the table), rather than left
    queuing claims behind it, up to ``tries`` times; the last timeout is raised."""
    from psycopg import errors

    for attempt in range(tries):
        try:
            with transaction.atomic(using=using), connections[using].cursor() as cursor:
                cursor.execute(f"SET LOCAL lock_timeout = '{wait}'")
                for sql in statements:
                    cursor.execute(sql, params)
            return
        except DatabaseError as exc:
            if not isinstance(exc.__cause__, errors.LockNotAvailable) or attempt == tries - 1:
                raise
            logger.info("partitions: lock not granted, trying again (%s)", statements[0])
            time.sleep(min(0.5 * (attempt + 1), 5.0))


def make_day(using: str, day: date, tries: int = 20, wait: str = LOCK_TIMEOUT) -> None:
    """The partitions of ``day`` for jobs and attempts, each made alone and then attached
    (``SHARE UPDATE EXCLUSIVE`` on the parent); a table made and not attached by an interrupted
    run is attached now. Each table's statements are tried ``tries`` times (``in_transaction``)."""
    upper = day + timedelta(days=1)
    for table in TABLES:
        name = day_name(table, day)
        with connections[using].cursor() as cursor:
            if day in attached_days(cursor, table):
                continue
        in_transaction(using, tries=tries, wait=wait, statements=[
            f"CREATE TABLE IF NOT EXISTS {name} (LIKE {table} INCLUDING DEFAULTS)",
            f"ALTER TABLE {table} ATTACH PARTITION {name} "
            f"FOR VALUES FROM ('{day.isoformat()}') TO ('{upper.isoformat()}')",
            # Empty and analyzed: the planner counts it as empty, where a table never analyzed
            # is taken for ten pages of rows, and a month of them would swell every estimate
            # of the parent (the API's and the admin's counts).
            f"ANALYZE {name}"])


def set_last_day(using: str, day: date) -> None:
    with transaction.atomic(using=using), connections[using].cursor() as cursor:
        cursor.execute(f"UPDATE {DAYS} SET last_day = %s WHERE last_day < %s",  # noqa: S608
                       [day, day])
    forget(using)


def make_ahead(using: str, today: date, ages: Iterable[timedelta | None], tries: int = 20,
               wait: str = LOCK_TIMEOUT) -> int:
    """Day partitions from the last day made through ``wanted_last_day``; returns how many
    days were made. The last day made moves up after each day, both tables attached."""
    last = read_last_day(using)
    if last is None:
        return 0
    wanted = wanted_last_day(today, ages)
    made = 0
    day = last + timedelta(days=1)
    while day <= wanted:
        make_day(using, day, tries, wait)
        set_last_day(using, day)
        day += timedelta(days=1)
        made += 1
    return made
