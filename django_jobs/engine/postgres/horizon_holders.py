"""What holds back PostgreSQL's xmin horizon: the oldest snapshot, prepared transaction or
replication slot that keeps vacuum from removing dead rows.

The jobs table is updated on every claim and finish, so its dead rows pile up quickly; vacuum
may remove a dead row only once no transaction could still see it. A session idle in a
transaction for an hour, a forgotten ``PREPARE TRANSACTION`` or an abandoned replication slot
holds every dead row made since, and the claim's index scans slow down with them. ``HOLDERS``
reads the three catalogs at once; it is a cheap read of shared memory, safe to run on every
heartbeat and on every metrics scrape.

Ages are by the database's clock, never the host's: ``statement_timestamp()``, which is
``now()`` outside a transaction and stays current inside one (a request's, a test's). A
replication slot keeps no time: its age is only in transactions (``xid_age``), and
``age_seconds`` is None. The backend running the read is left out. Without the
``pg_read_all_stats`` role (in ``pg_monitor``), PostgreSQL hides the query, client address and
snapshot of other users' sessions.
"""

from __future__ import annotations

from django.db import connections

from django_jobs.core.vacuum_horizon import Holder, Horizon, oldest_timed

# Sessions of this database (or of none: a walsender's hot_standby_feedback) holding a
# snapshot or a transaction id; prepared transactions of this database; slots holding xmin, or
# catalog_xmin of this database. The oldest xmin first: it is the one vacuum waits for.
HOLDERS = """
SELECT kind, pid, application_name, client, state, age_seconds, xid_age, detail, started
FROM (
    SELECT 'snapshot' AS kind, pid, application_name, host(client_addr) AS client, state,
           EXTRACT(EPOCH FROM statement_timestamp() - xact_start)::float8 AS age_seconds,
           greatest(age(backend_xmin), age(backend_xid)) AS xid_age,
           left(query, 80) AS detail, xact_start AS started
    FROM pg_stat_activity
    WHERE (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL)
      AND pid <> pg_backend_pid()
      AND (datname = current_database() OR datname IS NULL)
    UNION ALL
    SELECT 'prepared transaction', NULL, NULL, NULL, NULL,
           EXTRACT(EPOCH FROM statement_timestamp() - prepared)::float8, age(transaction),
           gid, prepared
    FROM pg_prepared_xacts
    WHERE database = current_database()
    UNION ALL
    SELECT 'replication slot', active_pid, NULL, NULL,
           CASE WHEN active THEN 'active' ELSE 'inactive' END, NULL,
           greatest(age(xmin), age(catalog_xmin)), slot_name, NULL
    FROM pg_replication_slots
    WHERE xmin IS NOT NULL
       OR (catalog_xmin IS NOT NULL AND (database IS NULL OR database = current_database()))
) AS holders
ORDER BY xid_age DESC NULLS LAST, age_seconds DESC NULLS LAST
"""


def available(using: str) -> bool:
    """Whether database ``using`` has a horizon to read (PostgreSQL)."""
    return bool(connections[using].vendor == "postgresql")


def holders(using: str) -> list[Holder]:
    """Everything holding the horizon of database ``using`` back, the oldest xmin first."""
    with connections[using].cursor() as cursor:
        cursor.execute(HOLDERS)
        rows = cursor.fetchall()
    return [Holder(kind, pid, app, client, state, age, xid_age or 0, detail or "", started)
            for kind, pid, app, client, state, age, xid_age, detail, started in rows]


def read(using: str) -> Horizon | None:
    """The horizon of database ``using``, or None where there is none to read (not
    PostgreSQL)."""
    if not available(using):
        return None
    found = holders(using)
    timed = oldest_timed(found)
    return Horizon(
        age_seconds=max(round(timed.age_seconds or 0.0, 3), 0.0) if timed else 0.0,
        xid_age=max((h.xid_age for h in found), default=0),
        holder=timed or (found[0] if found else None),
    )
