"""A job's shelf: the day its row may be pruned, or one of two sentinel days.

Every job and attempt row has a ``shelf`` (a date), written by the engine in the same
statement that changes the job's status:

- ``OPEN_SHELF`` while the job is open (waiting, pending, processing, failed), and for every
  attempt of an open job. It is the column's database default, so an INSERT that leaves the
  column out (a raw one, or one of the engine's) makes an open row.
- once the job is finished (completed, dead, canceled): the first day boundary, in UTC, at or
  after its ``finished_at`` plus the ``RETENTION`` age of its status (``prune_day``). The time
  is the finish's own ``finished_at``, the database's clock (``core/clock.py``), never the
  worker host's; a job is then pruned between its age and its age plus a day. The job's
  attempts take the same day.
- ``KEPT_SHELF`` for a status whose ``RETENTION`` is None (kept for ever), or whose prune day
  would fall in the kept range (``KEPT_FROM`` on).

The sentinels are dates every database and driver stores and reads back as a Python ``date``:
PostgreSQL's ``-infinity`` would sort first, but psycopg cannot load it into a ``date``
(``DataError: date too small``), so every ORM read of a job would fail. ``1000-01-01`` is the
first day of MariaDB's and MySQL's documented ``DATE`` range and below ``2000-01-01``, which
bounds the open partition of the partitioned layout
(``docs/explanation-history-partitions.md``); ``9999-12-31`` is the last day of every range.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable
from datetime import date, datetime, timedelta

from django.utils import timezone

from django_jobs.core.settings import jobs_settings
from django_jobs.core.states import CANCELED, COMPLETED, DEAD

OPEN_SHELF = date(1000, 1, 1)
KEPT_SHELF = date(9999, 12, 31)
# The first day of the kept range: a prune day from here on is kept for ever instead.
KEPT_FROM = date(9999, 1, 1)
# Below this day every shelf is open (the open partition's upper bound).
OPEN_BEFORE = date(2000, 1, 1)

# The statuses that have a prune day; every other status is open.
FINISHED = (COMPLETED, DEAD, CANCELED)


def as_age(value: object, name: str = "age") -> timedelta | None:
    """A retention age from seconds, a timedelta or None (keep for ever)."""
    if value is None:
        return None
    if isinstance(value, timedelta):
        age = value
    elif isinstance(value, int | float) and not isinstance(value, bool):
        age = timedelta(seconds=value)
    else:
        raise ValueError(f"{name} must be seconds, a timedelta or None, not {value!r}")
    if age < timedelta(0):
        raise ValueError(f"{name} must not be negative")
    return age


# The last ``RETENTION`` setting read (a copy) and its ages: the finish asks for a prune day
# for every job it writes, and the setting seldom changes.
_read: tuple[object, dict[str, timedelta | None]] = (object(), {})


def ages() -> dict[str, timedelta | None]:
    """The ``RETENTION`` age of each finished status (None: kept for ever); a status the
    setting leaves out is kept for ever, as retention does not prune it."""
    global _read
    setting = jobs_settings.RETENTION or {}
    held, known = _read
    if held != setting:
        known = {status: as_age(setting.get(status), f"RETENTION[{str(status)!r}]")
                 for status in FINISHED}
        _read = (dict(setting), known)
    return known


def prune_day(status: str, finished_at: datetime) -> date:
    """The shelf of a job that reaches ``status`` at ``finished_at``: ``OPEN_SHELF`` for an
    open status, else the first UTC day boundary at or after ``finished_at`` plus the
    status's ``RETENTION`` age, or ``KEPT_SHELF`` if it is kept for ever."""
    if status not in FINISHED:
        return OPEN_SHELF
    age = ages().get(status)
    if age is None:
        return KEPT_SHELF
    return _day_at_or_after(finished_at, age)


@functools.lru_cache(maxsize=64)
def _day_at_or_after(finished_at: datetime, age: timedelta) -> date:
    if timezone.is_naive(finished_at):  # USE_TZ = False: local time of TIME_ZONE
        finished_at = timezone.make_aware(finished_at)
    try:
        due = finished_at.astimezone(dt.UTC) + age
    except OverflowError:
        return KEPT_SHELF
    day = due.date()
    if due.time() != dt.time(0):
        if day >= KEPT_FROM:
            return KEPT_SHELF
        day += timedelta(days=1)
    return KEPT_SHELF if day >= KEPT_FROM else day


def clamp(shelf: date, last_day: Callable[[], date | None]) -> date:
    """``shelf`` as a write may store it where the history is kept in day partitions made
    through ``last_day()`` (None: no partitions, every day can be stored): a prune day beyond
    it becomes the kept shelf, pruned by ``finished_at`` instead. Open and kept shelves are left
    as they are, and ``last_day`` is not asked for them."""
    if shelf == OPEN_SHELF or shelf >= KEPT_FROM:
        return shelf
    last = last_day()
    if last is not None and shelf > last:
        return KEPT_SHELF
    return shelf
