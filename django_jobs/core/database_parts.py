"""What the worker, the admin, the API and retention need of a database beyond the engine's
verbs (``JobEngine`` in ``core/contract.py``): ``DatabaseParts``, one per database alias.

- ``session``: the worker loop's connection setup and its wake-ups (``Session``, ``WakeUps``).
- ``partitions``: the history kept in day partitions, and their pruning (``HistoryPartitions``).
- ``horizon``: what holds back vacuum (``VacuumHorizon``).
- ``replay``: how far a read replica is behind (``Replay``).

``parts(using)`` gives them, through ``parts_for`` of ``engine/__init__.py``, the factory the
app's ``ready()`` installs (``provide``), as ``core/contract.py`` does for the verbs: the
engine's own modules (the writes, the moved rows, the replica's reads) use them too, and cannot
import the package that picks their engine. The factory gives PostgreSQL's
(``engine/postgres/parts.py``), or ``NO_PARTS`` (MariaDB, SQLite), whose each part keeps its
promise by doing nothing: no wake-ups (the worker polls), no partitions (every day can be
stored, prunes delete rows), no horizon to read, no lag. Nothing outside ``engine/postgres/``
and ``engine/mariadb/`` but that factory imports their modules: the code of one database stays
in its folder.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from django.core.exceptions import ImproperlyConfigured

if TYPE_CHECKING:
    from django.db.models import Exists, Q

    from django_jobs.core.vacuum_horizon import Holder, Horizon


class Wakes(Protocol):
    """What wake-ups wake the worker's loop with (``worker/wake.py``, or an Event)."""

    def set(self) -> None: ...


class WakeUps(Protocol):
    """One worker's wake-ups on an enqueue, as its loop and turn use them (PostgreSQL's
    ``Listener``). ``pid``: the session its claims register as waiting (None: never waiting);
    ``overlooked``: jobs its last ``look`` found, which its next claim takes."""

    pid: int | None
    overlooked: int

    def fileno(self) -> int | None:
        """The socket the loop waits on beside its wake pipe (None: none now)."""
        ...

    def hear(self) -> None:
        """Read the notifications that arrived, at once."""
        ...

    def heard_so_far(self) -> tuple[int, int]:
        """Notifications heard: for this worker alone, and for every worker of its queues."""
        ...

    def claim_sent(self, heard: tuple[int, int], waiting: bool, took: int = 0) -> None:
        """A claim was sent after ``heard`` and took ``took`` jobs; ``waiting``: it left the
        worker registered as waiting."""
        ...

    def look_in(self, now: float) -> float | None:
        """Seconds until the worker looks for overlooked jobs; None while it does not wait."""
        ...

    def look(self, skips: Sequence[str] = ()) -> int:
        """Count the due jobs of its queues (but ``skips``) no worker took; kept in
        ``overlooked``."""
        ...

    def allowance(self) -> int | None:
        """How many jobs a waiting worker's claim may take (None: no bound)."""
        ...

    def forget_gone(self) -> None:
        """Drop the waiting registrations of workers whose sessions ended."""
        ...

    def stop(self) -> None:
        """Stop listening; the worker polls from now on."""
        ...


class Session(Protocol):
    """The worker loop's connection to the jobs database."""

    def keep_generic_plans(self, keep: bool = True) -> None:
        """Ask the loop's connection to run the engine's prepared statements on their generic
        plans (``keep=False``: stop asking)."""
        ...

    def start_wakeups(self, wake: Wakes, poll_interval: float, queues: Sequence[str] = ()
                      ) -> WakeUps | None:
        """Start waking the worker (``wake.set()``) when a job is enqueued for it; None where
        the database sends no wake-ups (the worker polls every ``poll_interval``)."""
        ...


class HistoryPartitions(Protocol):
    """The finished jobs kept in day partitions by shelf (``core/shelves.py``), dropped once
    their day has come."""

    def partitioned(self) -> bool:
        """Whether the jobs table is partitioned by shelf (a finish may move a row)."""
        ...

    def last_day(self) -> date | None:
        """The last day a partition exists for (None: no partitions, any day can be stored)."""
        ...

    def upkeep(self, today: date, ages: Iterable[timedelta | None], kept: Q | Exists,
               batch_size: int, drop_through: date | None = None) -> dict[str, Any] | None:
        """Make the days ahead and drop those through ``drop_through``, the jobs ``kept``
        selects moved on instead; the days made, dropped and the jobs dropped by status, or
        None (another session does it, or no partitions)."""
        ...

    def dropped_jobs(self, through: date, kept: Q | Exists) -> dict[str, int]:
        """The jobs by status that dropping the days through ``through`` would take."""
        ...

    def dropped_soon(self, today: date) -> tuple[date, date] | None:
        """The shelves whose partitions go by tomorrow (None: none), left to the drop."""
        ...


class VacuumHorizon(Protocol):
    """What holds back vacuum's horizon (``core/vacuum_horizon.py``)."""

    def available(self) -> bool:
        """Whether the database has a horizon to read."""
        ...

    def holders(self) -> list[Holder]:
        """Everything holding the horizon back, the oldest first (none: an empty list)."""
        ...

    def read(self) -> Horizon | None:
        """The horizon's figures; None where there is none to read."""
        ...


class Replay(Protocol):
    """A read replica's replay of its primary."""

    def lag_seconds(self) -> float | None:
        """Seconds the replica is behind (0: applied all it received); None where it is no
        standby or cannot tell."""
        ...


@dataclass(frozen=True)
class DatabaseParts:
    """One database's parts beyond the verbs."""

    session: Session
    partitions: HistoryPartitions
    horizon: VacuumHorizon
    replay: Replay


class NoSession:
    """No generic plans to ask for, and no wake-ups: the worker polls."""

    def keep_generic_plans(self, keep: bool = True) -> None:
        return None

    def start_wakeups(self, wake: Wakes, poll_interval: float, queues: Sequence[str] = ()
                      ) -> WakeUps | None:
        return None


class NoPartitions:
    """Plain tables: every shelf is stored as it is, and the prune deletes rows."""

    def partitioned(self) -> bool:
        return False

    def last_day(self) -> date | None:
        return None

    def upkeep(self, today: date, ages: Iterable[timedelta | None], kept: Q | Exists,
               batch_size: int, drop_through: date | None = None) -> dict[str, Any] | None:
        return None

    def dropped_jobs(self, through: date, kept: Q | Exists) -> dict[str, int]:
        return {}

    def dropped_soon(self, today: date) -> tuple[date, date] | None:
        return None


class NoHorizon:
    """No horizon to read."""

    def available(self) -> bool:
        return False

    def holders(self) -> list[Holder]:
        return []

    def read(self) -> Horizon | None:
        return None


class NoReplay:
    """No lag to read."""

    def lag_seconds(self) -> float | None:
        return None


NO_PARTS = DatabaseParts(NoSession(), NoPartitions(), NoHorizon(), NoReplay())


_parts_for: Callable[[str], DatabaseParts] | None = None


def provide(parts_for: Callable[[str], DatabaseParts]) -> None:
    """Install ``parts_for(using)``, the function that gives a database's parts."""
    global _parts_for
    _parts_for = parts_for


def parts(using: str) -> DatabaseParts:
    """The parts of database ``using`` beyond the verbs."""
    if _parts_for is None:
        raise ImproperlyConfigured(
            "django_jobs has no engine: add 'django_jobs' to INSTALLED_APPS and call "
            "django.setup() before using it"
        )
    return _parts_for(using)
