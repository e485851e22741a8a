"""Where the admin's and the API's lists and counts read: a replica, when the site names one
and it answers in time.

``READ_REPLICA`` names an alias of ``DATABASES`` that replicates the jobs' database. The pages
that only look (the admin's job list with its filters, search and counts, the overview, the
API's ``GET /jobs`` and its metrics) read there, so their scans and counts cost the primary
nothing. A replica lags behind the primary: a job just enqueued or just finished may show there
a moment later.

Everything that acts reads the primary (``schema.jobs_database()``): the workers, every write
and the reads that decide one (the admin's buttons and actions, the job page that leads to
them, the API's one-job page a client polls after submitting).

A replica that fails costs freshness, not pages. When a read on it raises a database error
(it is down, refuses connections, cancels a query in a conflict with recovery), or when it is
behind by more than ``READ_REPLICA_MAX_LAG_SECONDS`` (PostgreSQL: ``engine/postgres/replay``,
read at most every ``LAG_CHECK_SECONDS``), the pages read the primary for
``READ_REPLICA_FALLBACK_SECONDS``, then try the replica again. Each switch to the primary logs
one WARNING and each return one INFO line on ``django_jobs.reads``; ``fallback()`` says why the
pages read the primary now, for the note on the admin's pages and the metrics. The state is
the process's own: each web process finds out for itself. Its timers are intervals of the
process's monotonic clock, not times the database decides.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from django.db import DatabaseError, connections

from django_jobs.core.database_parts import parts
from django_jobs.core.settings import jobs_settings
from django_jobs.models.schema import jobs_database

logger = logging.getLogger("django_jobs.reads")

T = TypeVar("T")

# A replica's lag is read at most this often, by the first page read after it is due.
LAG_CHECK_SECONDS = 5.0


@dataclass(frozen=True)
class Fallback:
    """The pages read the primary in place of ``replica``, because of ``reason``, until
    ``until`` (the process's monotonic clock)."""

    replica: str
    reason: str
    until: float

    def remaining(self) -> float:
        return max(0.0, self.until - time.monotonic())


class _Replica:
    """What this process knows of the replica: why it reads the primary now, when its lag was
    last read and what it was."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.fallback: Fallback | None = None
        self.checked_at: float | None = None
        self.lag: float | None = None


_replica = _Replica()


def replica_alias() -> str | None:
    """The alias ``READ_REPLICA`` names, unless it is none or the jobs' database itself."""
    replica = jobs_settings.READ_REPLICA
    if not replica or replica == jobs_database():
        return None
    return str(replica)


def read_database() -> str:
    """The alias the looking pages read: the replica (``READ_REPLICA``) unless it failed or
    fell behind lately, else the jobs' database."""
    replica = replica_alias()
    if replica is None:
        return jobs_database()
    if fallback() is not None or _behind(replica):
        return jobs_database()
    return replica


def fallback() -> Fallback | None:
    """Why the pages read the primary in place of the replica now; None while they read the
    replica (or the site names none)."""
    with _replica.lock:
        current = _replica.fallback
        if current is None or current.remaining() > 0:
            return current
        _replica.fallback, _replica.checked_at = None, None
    logger.info("Reading the replica %r again after %s s on the primary.", current.replica,
                _seconds(jobs_settings.READ_REPLICA_FALLBACK_SECONDS))
    return None


def fall_back(replica: str, reason: str) -> Fallback:
    """Send the looking pages to the primary for ``READ_REPLICA_FALLBACK_SECONDS``; one WARNING
    for the switch (none while they already read the primary)."""
    cool_down = float(jobs_settings.READ_REPLICA_FALLBACK_SECONDS)
    with _replica.lock:
        switched = _replica.fallback is None or _replica.fallback.remaining() <= 0
        _replica.fallback = Fallback(replica, reason, time.monotonic() + cool_down)
        current = _replica.fallback
    if switched:
        logger.warning("The replica %r %s: the admin's lists and the API's reads use the jobs' "
                       "database %r for %s s.", replica, reason, jobs_database(),
                       _seconds(cool_down))
    return current


def last_lag() -> float | None:
    """The replica's lag as last read (seconds), None if never read or not measurable."""
    return _replica.lag


def read(using: str, query: Callable[[str], T]) -> T:
    """``query(using)``; if ``using`` is the replica and it raises a database error, the
    replica is set aside (``fall_back``) and the query is run again on the jobs' database."""
    replica = replica_alias()
    if replica is None or using != replica:
        return query(using)
    try:
        return query(using)
    except DatabaseError as exc:
        failed(replica, exc)
        return query(jobs_database())


def failed(replica: str, exc: DatabaseError) -> Fallback:
    """The replica raised ``exc``: close its connection (a broken one is of no more use) and
    fall back to the primary."""
    try:
        connections[replica].close()
    except DatabaseError:
        pass
    return fall_back(replica, f"failed ({_first_line(exc)})")


def forget() -> None:
    """Forget what this process learned of the replica (tests, or after repointing it)."""
    with _replica.lock:
        _replica.fallback, _replica.checked_at, _replica.lag = None, None, None


def _behind(replica: str) -> bool:
    """Read the replica's lag if it is due; True if it failed or lags past the bound (then
    the pages read the primary)."""
    bound = jobs_settings.READ_REPLICA_MAX_LAG_SECONDS
    if bound is None:
        return False
    now = time.monotonic()
    with _replica.lock:
        if _replica.checked_at is not None and now - _replica.checked_at < LAG_CHECK_SECONDS:
            return False
        _replica.checked_at = now  # one reader checks; the others read meanwhile
    try:
        lag = parts(replica).replay.lag_seconds()
    except DatabaseError as exc:
        failed(replica, exc)
        return True
    _replica.lag = lag
    if lag is not None and lag > bound:
        fall_back(replica, f"is {lag:.1f} s behind (more than READ_REPLICA_MAX_LAG_SECONDS = "
                           f"{_seconds(bound)})")
        return True
    return False


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _seconds(value: float) -> str:
    return f"{value:g}"
