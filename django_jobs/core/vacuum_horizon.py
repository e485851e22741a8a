"""What holds back a database's vacuum horizon, as the worker's warning, the admin and the
metrics show it: ``Holder`` (one snapshot, prepared transaction or replication slot) and
``Horizon`` (the figures). They know no database: PostgreSQL's read fills them
(``engine/postgres/horizon_holders.py``, through ``VacuumHorizon`` of ``core/database_parts.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any


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
