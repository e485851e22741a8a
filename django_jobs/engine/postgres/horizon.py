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

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connections

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


@dataclass(frozen=True)
class Holder:
    """One thing holding the horizon back, as the database saw it."""

    kind: str  # "snapshot", "prepared transaction" or "replication slot"
    pid: int | None  # the session's backend (a slot's: its walsender, if active)
    application_name: str | None
    client: str | None  # the client's address; None for a local socket or hidden
    state: str | None  # a session's state ("idle in transaction"); a slot's active/inactive
    age_seconds: float | None  # since its transaction began; None for a slot
    xid_age: int  # transactions since the oldest it holds
    detail: str  # a snapshot's query (first 80 characters), a prepared gid, a slot's name
    started: datetime | None

    @property
    def key(self) -> tuple[Any, ...]:
        """The same holder on the next read: a session's one transaction, a gid, a slot."""
        if self.kind == "snapshot":
            return (self.kind, self.pid, self.started)
        return (self.kind, self.detail)

    def describe(self, age_seconds: float | None = None) -> str:
        """One line for the log and the admin: what it is, who, how old, and what it runs."""
        age = self.age_seconds if age_seconds is None else age_seconds
        if self.kind == "snapshot":
            what = (f"snapshot of pid {self.pid} (application_name {self.application_name!r}, "
                    f"client {self.client or 'local or hidden'}, {self.state or 'state hidden'})"
                    f", query {self.detail!r}")
        elif self.kind == "prepared transaction":
            what = f"prepared transaction {self.detail!r}"
        else:
            what = f"replication slot {self.detail!r} ({self.state})"
        held = (f"held for {age:.0f} s, {self.xid_age} transactions" if age is not None
                else f"held for {self.xid_age} transactions (a slot keeps no start time)")
        return f"{what}, {held}"


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


def oldest_timed(found: list[Holder]) -> Holder | None:
    """The holder whose transaction began the longest ago (a slot keeps no time)."""
    timed = [h for h in found if h.age_seconds is not None]
    return max(timed, key=lambda h: h.age_seconds or 0.0, default=None)


@dataclass(frozen=True)
class Horizon:
    """The figures the metrics and the admin show: how long and how many transactions the
    horizon is held back, and by what."""

    age_seconds: float  # the oldest timed holder's age; 0.0 when nothing holds it
    xid_age: int  # transactions since the oldest xmin held (a slot's too); 0 when nothing
    holder: Holder | None  # the oldest timed holder, else the oldest slot

    def past(self, bound: float | None) -> bool:
        """Whether the age is past ``bound`` (``HORIZON_WARNING_SECONDS``; 0 or None: never)."""
        return bool(bound) and self.holder is not None and self.age_seconds > float(bound or 0)


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
