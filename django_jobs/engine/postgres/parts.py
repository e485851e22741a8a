"""PostgreSQL's parts beyond the verbs (``DatabaseParts`` of ``core/database_parts.py``), for one
database alias: the loop's generic plans (``cursor``) and LISTEN/NOTIFY wake-ups
(``listener``), the day partitions (``partitions``, ``day_drops``), the vacuum horizon
(``horizon``) and a standby's replay (``replay``). Each reads ``connections[using]`` when
called, so that it works on the calling thread's connection.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import date, timedelta
from typing import TYPE_CHECKING, Any

from django.db import connections

from django_jobs.core.database_parts import DatabaseParts, Wakes, WakeUps
from django_jobs.engine.postgres import partitions
from django_jobs.engine.postgres.cursor import keep_generic_plans

if TYPE_CHECKING:
    from django.db.models import Exists, Q

    from django_jobs.core.vacuum_horizon import Holder, Horizon


class PostgresSession:
    def __init__(self, using: str) -> None:
        self.using = using

    def keep_generic_plans(self, keep: bool = True) -> None:
        keep_generic_plans(connections[self.using], keep=keep)

    def start_wakeups(self, wake: Wakes, poll_interval: float, queues: Sequence[str] = ()
                      ) -> WakeUps | None:
        from django_jobs.engine.postgres.listener import Listener  # a waiting worker's only

        return Listener.start_for(connections[self.using], wake, poll_interval, queues)


class PostgresPartitions:
    def __init__(self, using: str) -> None:
        self.using = using

    def partitioned(self) -> bool:
        return partitions.partitioned(self.using)

    def last_day(self) -> date | None:
        return partitions.last_day(self.using)

    def upkeep(self, today: date, ages: Iterable[timedelta | None], kept: Q | Exists,
               batch_size: int, drop_through: date | None = None) -> dict[str, Any] | None:
        from django_jobs.engine.postgres import day_drops  # a pruning worker's only

        return day_drops.upkeep(self.using, today, ages, kept, batch_size,
                                drop_through=drop_through)

    def dropped_jobs(self, through: date, kept: Q | Exists) -> dict[str, int]:
        from django_jobs.engine.postgres import day_drops

        return day_drops.dropped_jobs(self.using, through, kept)

    def dropped_soon(self, today: date) -> tuple[date, date] | None:
        from django_jobs.engine.postgres import day_drops

        return day_drops.dropped_soon(self.using, today)


class PostgresHorizon:
    def __init__(self, using: str) -> None:
        self.using = using

    def available(self) -> bool:
        from django_jobs.engine.postgres import horizon_holders

        return horizon_holders.available(self.using)

    def holders(self) -> list[Holder]:
        from django_jobs.engine.postgres import horizon_holders

        return horizon_holders.holders(self.using)

    def read(self) -> Horizon | None:
        from django_jobs.engine.postgres import horizon_holders

        return horizon_holders.read(self.using)


class PostgresReplay:
    def __init__(self, using: str) -> None:
        self.using = using

    def lag_seconds(self) -> float | None:
        from django_jobs.engine.postgres import replay  # read by the admin and the API only

        return replay.lag_seconds(self.using)


def parts(using: str) -> DatabaseParts:
    """The parts of PostgreSQL database ``using``."""
    return DatabaseParts(PostgresSession(using), PostgresPartitions(using),
                         PostgresHorizon(using), PostgresReplay(using))
