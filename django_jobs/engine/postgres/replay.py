"""How far a PostgreSQL standby is behind its primary, read on the standby.

A standby's lag is how long ago the last transaction it applied was committed on the primary
(``now() - pg_last_xact_replay_timestamp()``), counted only while it holds WAL it has received
and not yet applied (its replay position short of its receive position). A standby that has
applied all it received is not behind, however old its last transaction: an idle primary
sends nothing to apply. A standby whose replay is paused (``pg_wal_replay_pause()``), or that a
long query on it holds back (``max_standby_streaming_delay``), falls behind by the time since
the last transaction it applied.

The read is a few functions of shared memory, cheap enough for every few seconds. Times are
the standby's clock (``now()``) against the primary's commit timestamps.
"""

from __future__ import annotations

from django.db import connections

LAG = """
SELECT pg_is_in_recovery(),
       COALESCE(pg_last_wal_receive_lsn() > pg_last_wal_replay_lsn(), false),
       EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp())::float8
"""


def lag_seconds(using: str) -> float | None:
    """Seconds the standby ``using`` is behind (0 when it applied all it received); None where
    ``using`` is no standby, or has applied no transaction since it started."""
    with connections[using].cursor() as cursor:
        cursor.execute(LAG)
        standby, behind, age = cursor.fetchone()
    if not standby or age is None:
        return None
    return max(0.0, float(age)) if behind else 0.0
