"""The finished jobs counted (``models/stats.py``, ``JobStat``): kept in the process that
writes the outcomes, and written in one statement at its worker's heartbeat.

A finish adds its written outcomes (completed, failed and to be retried, dead, canceled; a
snooze is no end) to the counts this process keeps, once its transaction commits: the counts
hold exactly the outcomes that committed. They are kept by the minute the finish ran in, by the
database's clock (the finish's ``now``), and per worker, queue, type and outcome. ``flush``
adds them to their rows of that minute and of its hour in one ``INSERT ... ON CONFLICT`` (``ON
DUPLICATE KEY UPDATE`` on MariaDB and MySQL), a worker only to its own rows, so that workers
never wait on each other's row locks: the worker's heartbeat calls it (``worker/heartbeat.py``),
and so does its shutdown; a process with no heartbeat (jobs run inline) writes its counts at
its first finish ``KEEP_SECONDS`` after the oldest it keeps. The ends a feature's write could
not follow (``record_failures``), rare, are written at once. So a job's life writes no row here:
a worker writes its rows once per heartbeat, however many jobs it ran meanwhile.

The counts read are therefore up to one heartbeat behind (``HEARTBEAT_SECONDS``). A worker that
stops writes them first; a worker killed (SIGKILL, out of memory, its host gone) loses those of
its last heartbeat at most, which are not rebuilt: the attempts (``JobAttempt``) keep every
attempt exactly. A flush that fails keeps the counts for the next one.

The ``STATS`` setting turns it off.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from bisect import bisect_left
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import connections, transaction

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

logger = logging.getLogger("django_jobs.worker")

# A process that keeps counts this long (seconds) writes them at its next finish: one with no
# worker's heartbeat to write them.
KEEP_SECONDS = 60.0
# At most this many rows in one statement of a flush (SQLite's bound on parameters).
ROWS_PER_STATEMENT = 40

# The counts kept in this process: by database, then by (minute, key), sums in the columns of
# ``SUMMED``; and when the oldest of them was kept (``time.monotonic()``).
_lock = threading.Lock()
_kept: dict[str, dict[tuple[datetime, Key], list[int]]] = {}
_since: dict[str, float] = {}


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
    """Count the written outcomes in ``now``'s minute once the caller's transaction commits
    (at once outside one)."""
    rows = tally(done, waited)
    if rows:
        keep(using, rows, now)


def record_failures(using: str, jobs: Sequence[Job], now: datetime) -> None:
    """Count ``jobs`` as ends a feature's write could not follow (``engine/feature_writes.py``):
    the outcome ``feature_failed`` of their rows of ``now``'s minute and hour, its count alone,
    written at once in the caller's transaction: rare, and also a staff's action in a web
    process, which has no heartbeat to write kept counts."""
    rows: dict[tuple[datetime, Key], list[int]] = {}
    for job in jobs:
        key = (job.worker_id or "", job.queue, job.type, FEATURE_FAILED)
        rows.setdefault((bucket(now), key), [0] * len(SUMMED))[0] += 1
    write(using, rows)


def keep(using: str, rows: dict[Key, list[int]], now: datetime) -> None:
    """Add ``rows`` (sums in the columns of ``SUMMED``) to the counts of ``now``'s minute this
    process keeps, once the caller's transaction commits."""
    transaction.on_commit(functools.partial(_keep, using, rows, bucket(now)), using=using)


def _keep(using: str, rows: dict[Key, list[int]], minute: datetime) -> None:
    with _lock:
        kept = _kept.setdefault(using, {})
        for key, sums in rows.items():
            _add_to(kept, (minute, key), sums)
        since = _since.setdefault(using, time.monotonic())
    if time.monotonic() - since >= KEEP_SECONDS:
        try:
            flush(using)
        except Exception:  # the outcomes are written; the counts wait for the next flush
            logger.warning("could not write the counts of finished jobs; kept for the next "
                           "try", exc_info=True)


def _add_to(kept: dict[Any, list[int]], at: Any, sums: list[int]) -> None:
    row = kept.get(at)
    if row is None:
        kept[at] = list(sums)
    else:
        for i, value in enumerate(sums):
            row[i] += value


def flush(using: str | None = None) -> None:
    """Write the counts this process keeps for ``using`` (None: every database) to their rows
    of their minute and hour; counts a failed write leaves are kept for the next flush."""
    with _lock:
        aliases = [using] if using is not None else list(_kept)
        taken = {alias: _kept.pop(alias, None) for alias in aliases}
        for alias in aliases:
            _since.pop(alias, None)
    left = [(alias, kept) for alias, kept in taken.items() if kept]
    while left:
        alias, kept = left[0]
        try:
            write(alias, kept)
        except BaseException:
            with _lock:  # this database's counts and those not tried yet, for the next flush
                for back_alias, back_kept in left:
                    back = _kept.setdefault(back_alias, {})
                    for at, sums in back_kept.items():
                        _add_to(back, at, sums)
                    _since.setdefault(back_alias, time.monotonic())
            raise
        left.pop(0)


def forget() -> None:
    """Drop every count this process keeps, unwritten (a test's clean start)."""
    with _lock:
        _kept.clear()
        _since.clear()


def write(using: str, kept: dict[tuple[datetime, Key], list[int]]) -> None:
    """Add ``kept`` to their minute rows and to the rows of those minutes' hours, in key order,
    in one transaction (one statement unless there are more than ``ROWS_PER_STATEMENT``)."""
    rows: dict[tuple[str, int, datetime, str, str, str], list[int]] = {}
    for (minute, (worker, queue, type, outcome)), sums in kept.items():
        for span, start in ((MINUTE, minute), (HOUR, hour(minute))):
            _add_to(rows, (worker, span, start, queue, type, outcome), sums)
    connection = connections[using]
    adapt = connection.ops.adapt_datetimefield_value
    ordered = sorted(rows.items())
    with transaction.atomic(using=using), connection.cursor() as cursor:
        for first in range(0, len(ordered), ROWS_PER_STATEMENT):
            chunk = ordered[first:first + ROWS_PER_STATEMENT]
            params: list[Any] = []
            for (worker, span, start, queue, type, outcome), sums in chunk:
                params += [worker, span, adapt(start), queue, type, outcome, *sums]
            cursor.execute(upsert_sql(connection.vendor, len(chunk)), params)


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
