"""One clock for every worker and web process: the database server's.

Leases, rescue, readiness (``run_at``), backoff, schedules, limits and retention compare
times written by different hosts, so they are all judged by the time of the one host they
share, the database server. ``now(using)`` is the local ``timezone.now()`` plus this
process's offset to the clock of database ``using``: the statements keep taking ``now`` as a
parameter, and the hot path (claim, finish, the turn) gains no round trip.

The offset is measured with one cheap query (PostgreSQL ``clock_timestamp()``, MariaDB and
MySQL ``UTC_TIMESTAMP(6)``, both read as microseconds since the epoch, so that no time zone
comes into it), against the midpoint of the query's round trip on the local clock; it is 0
when the database's reading falls within the round trip (``estimate``). It is
measured on first use in a process and again when it is older than ``REMEASURE_SECONDS``;
the worker measures it on every heartbeat (``measure``), so a clock step on its host is
caught within one heartbeat. SQLite is a file on the host itself: its offset is 0, without a
query.

When the offset is larger than the ``CLOCK_SKEW_WARNING_SECONDS`` setting the process logs one
warning (``django_jobs.clock``), and one line when it is back within bounds: the queue keeps
working, but the host's clock needs NTP.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timedelta

from django.db import connections
from django.utils import timezone

from django_jobs.core.settings import jobs_settings

logger = logging.getLogger("django_jobs.clock")

# How old a measured offset may be before ``now`` measures it again (outside the worker's
# heartbeat, which measures it every time): a web process's clock may be stepped too.
REMEASURE_SECONDS = 60.0

# The database server's time, in microseconds since the epoch, by vendor.
QUERIES = {
    "postgresql": "SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::bigint",
    "mysql": "SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))",
}

ZERO = timedelta(0)


class _Offset:
    """One database's offset and when (``time.monotonic()``) it was measured."""

    __slots__ = ("measured", "value", "warned")

    def __init__(self, value: timedelta, measured: float) -> None:
        self.value = value
        self.measured = measured
        self.warned = False


_offsets: dict[str, _Offset] = {}
_lock = threading.Lock()


def now(using: str = "default") -> datetime:
    """The current time by database ``using``'s clock, as ``timezone.now()`` gives it (aware
    in UTC, or naive local time with ``USE_TZ = False``)."""
    known = _offsets.get(using)
    if known is None or time.monotonic() - known.measured > REMEASURE_SECONDS:
        return timezone.now() + measure(using)
    return timezone.now() + known.value


def offset(using: str = "default") -> timedelta:
    """The last measured offset of database ``using``'s clock to this host's (measured now
    if there is none yet): how far ahead the database is."""
    known = _offsets.get(using)
    return known.value if known is not None else measure(using)


def measure(using: str = "default") -> timedelta:
    """Measure the offset of database ``using``'s clock to this host's, keep it, warn if it is
    past ``CLOCK_SKEW_WARNING_SECONDS``, and return it."""
    connection = connections[using]
    query = QUERIES.get(connection.vendor)
    if query is None:  # SQLite: the database is on this host
        value = ZERO
    else:
        with connection.cursor() as cursor:
            before = time.time_ns() // 1000
            cursor.execute(query)
            after = time.time_ns() // 1000
            (server,) = cursor.fetchone()
        value = timedelta(microseconds=estimate(int(server), before, after))
    return _keep(using, value)


def estimate(server: int, before: int, after: int) -> int:
    """The offset, in microseconds, from the database's reading ``server`` taken during a
    round trip from ``before`` to ``after`` on the local clock (all microseconds since the
    epoch). The reading was taken between the two, so the offset lies in
    [server - after, server - before], give or take a microsecond of rounding. When 0 lies in
    it, the clocks agree as closely as one round trip can tell (the database on this host):
    0. Otherwise the midpoint, off by half the round trip at most."""
    if server - after - 1 <= 0 <= server - before + 1:
        return 0
    return server - (before + after) // 2


def _keep(using: str, value: timedelta) -> timedelta:
    with _lock:
        known = _offsets.get(using)
        warned = known.warned if known is not None else False
        fresh = _offsets[using] = _Offset(value, time.monotonic())
        fresh.warned = _warn(using, value, warned)
    return value


def _warn(using: str, value: timedelta, warned: bool) -> bool:
    """Log once when the offset goes past the bound and once when it comes back; returns
    whether it is past the bound."""
    bound = jobs_settings.CLOCK_SKEW_WARNING_SECONDS
    past = bound is not None and abs(value.total_seconds()) > bound
    if past and not warned:
        logger.warning(
            "this host's clock is %.3f s %s the clock of database %r (more than "
            "CLOCK_SKEW_WARNING_SECONDS = %s): django-jobs uses the database's time, but "
            "the host needs NTP", abs(value.total_seconds()),
            "behind" if value > ZERO else "ahead of", using, bound,
        )
    elif warned and not past:
        logger.info(
            "this host's clock is back within %s s of the clock of database %r (%.3f s)",
            bound, using, value.total_seconds(),
        )
    return past


def forget(using: str | None = None) -> None:
    """Drop the measured offsets (of ``using``, or all): the next ``now`` measures again."""
    with _lock:
        if using is None:
            _offsets.clear()
        else:
            _offsets.pop(using, None)
