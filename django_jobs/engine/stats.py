"""The finished jobs counted as the engine writes them (``models/stats.py``, ``JobStat``).

A finish adds its written outcomes (completed, failed and to be retried, dead, canceled; a
snooze is no end) to the rows of the minute and of the hour it runs in, by the database's
clock (the finish's ``now``), in the finish's own transaction: the counts hold exactly the
outcomes that committed. One row per worker, span (minute or hour), queue, type and outcome:
a worker adds only to its own rows, so workers never wait on each other's row locks. On
PostgreSQL the statement path adds them in the finish's statement (``COUNTED`` in
``engine/postgres/statements.py``, a data-modifying CTE); every other path calls ``record``
with the outcomes it wrote, one ``INSERT ... ON CONFLICT`` (``ON DUPLICATE KEY UPDATE`` on
MariaDB and MySQL) for the batch.

The ``STATS`` setting turns it off.
"""

from __future__ import annotations

import functools
from bisect import bisect_left
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import connections

from django_jobs.core.outcomes import micros
from django_jobs.core.settings import jobs_settings
from django_jobs.core.states import Outcome
from django_jobs.models.stats import HOUR, KEY, MINUTE, SUMMED, WAIT_BOUNDS_US, JobStat

if TYPE_CHECKING:
    from django_jobs.core.outcomes import AttemptOutcome
    from django_jobs.models import Job

# The outcomes counted: the ends of an attempt (a snoozed attempt is given back).
COUNTED = frozenset((Outcome.COMPLETED, Outcome.FAILED, Outcome.DEAD, Outcome.CANCELED))

# Not an attempt's outcome: the ends a feature's write could not follow, counted by job
# (``record_failures``); the charts and the outcome figures do not read it.
FEATURE_FAILED = "feature_failed"

Key = tuple[str, str, str, str]  # worker id, queue, type, outcome


def enabled() -> bool:
    return bool(jobs_settings.STATS)


def bucket(now: datetime) -> datetime:
    """The minute ``now`` (the database's time) falls in."""
    return now.replace(second=0, microsecond=0)


def hour(now: datetime) -> datetime:
    """The hour ``now`` falls in."""
    return now.replace(minute=0, second=0, microsecond=0)


def wait_us(job: Job) -> int:
    """Microseconds from the job's ``run_at`` to its attempt's start (both the database's
    time, written by the enqueue and the claim); read before the finish changes ``run_at``."""
    if job.started_at is None or job.run_at is None:
        return 0
    return max(0, micros(job.started_at) - micros(job.run_at))


def wait_bucket(us: int) -> int:
    """The histogram bucket of a wait: the first bound it does not exceed, or the last."""
    return bisect_left(WAIT_BOUNDS_US, us)


def waits(outcomes: Sequence[AttemptOutcome]) -> dict[int, int]:
    """Each outcome's wait by job id, read before a write applies its transition."""
    return {outcome.job.id: wait_us(outcome.job) for outcome in outcomes}


def tally(done: Sequence[AttemptOutcome], waited: dict[int, int]) -> dict[Key, list[int]]:
    """The written outcomes (their kind what the attempt came to) summed per key, in the
    columns of ``SUMMED``."""
    rows: dict[Key, list[int]] = {}
    for outcome in done:
        if outcome.kind not in COUNTED:
            continue
        job = outcome.job
        key = (job.worker_id or "", job.queue, job.type, str(outcome.kind))
        row = rows.get(key)
        if row is None:
            row = rows[key] = [0] * len(SUMMED)
        wait = waited.get(job.id, 0)
        row[0] += 1
        row[1] += wait
        row[2] += max(0, outcome.finished - outcome.started)
        row[3 + wait_bucket(wait)] += 1
    return rows


def record(using: str, done: Sequence[AttemptOutcome], now: datetime,
           waited: dict[int, int]) -> None:
    """Add the written outcomes to their rows of ``now``'s minute and hour, in the caller's
    transaction: one statement for the batch, its rows in key order."""
    rows = tally(done, waited)
    if rows:
        add(using, rows, now)


def record_failures(using: str, jobs: Sequence[Job], now: datetime) -> None:
    """Count ``jobs`` as ends a feature's write could not follow (``engine/feature_writes.py``):
    the outcome ``feature_failed`` of their rows of ``now``'s minute and hour, its count alone."""
    rows: dict[Key, list[int]] = {}
    for job in jobs:
        key = (job.worker_id or "", job.queue, job.type, FEATURE_FAILED)
        rows.setdefault(key, [0] * len(SUMMED))[0] += 1
    add(using, rows, now)


def add(using: str, rows: dict[Key, list[int]], now: datetime) -> None:
    """Add ``rows`` (sums in the columns of ``SUMMED``) to ``now``'s minute and hour rows."""
    connection = connections[using]
    adapt = connection.ops.adapt_datetimefield_value
    spans = ((MINUTE, adapt(bucket(now))), (HOUR, adapt(hour(now))))
    params: list[Any] = []
    for (worker, queue, type, outcome), sums in sorted(rows.items()):
        for span, start in spans:
            params += [worker, span, start, queue, type, outcome, *sums]
    with connection.cursor() as cursor:
        cursor.execute(upsert_sql(connection.vendor, 2 * len(rows)), params)


def quote(vendor: str, name: str) -> str:
    return f"`{name}`" if vendor == "mysql" else f'"{name}"'


@functools.lru_cache(maxsize=64)
def upsert_sql(vendor: str, count: int) -> str:
    """The INSERT of ``count`` rows (the key's columns, then those of ``SUMMED``) that adds
    to a row already there."""
    q = functools.partial(quote, vendor)
    table = q(JobStat._meta.db_table)
    columns = ", ".join(q(name) for name in (*KEY, *SUMMED))
    one = f"({', '.join(['%s'] * (len(KEY) + len(SUMMED)))})"
    head = f"INSERT INTO {table} ({columns}) VALUES {', '.join([one] * count)} "  # noqa: S608
    if vendor == "mysql":
        return head + "ON DUPLICATE KEY UPDATE " + ", ".join(
            f"{q(name)} = {q(name)} + VALUES({q(name)})" for name in SUMMED)
    return head + f"ON CONFLICT ({', '.join(q(n) for n in KEY)}) DO UPDATE SET " + ", ".join(
        f"{q(name)} = {table}.{q(name)} + excluded.{q(name)}" for name in SUMMED)
