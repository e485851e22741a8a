"""Database errors that repeat on every turn of the worker's loop: back off, and say so once.

The database restarting, a pooler refusing logins, a statement the server refuses each time:
each is an episode. Its first error is logged as one warning (the error's first line, no
traceback; the traceback goes to DEBUG once), and its end as one line saying how long it lasted.
Meanwhile the failing step runs again only after a delay that doubles from RETRY_BASE_SECONDS
up to RETRY_CAP_SECONDS, with jitter, so a fleet of workers neither floods its logs nor hammers
a database that is coming back.

An outage (a lost connection, a server shutting down or read-only, a timeout) is one episode
for every step: the next step that works ends it. A refusal belongs to the step that raised it,
and ends when that step works again; meanwhile the other steps (heartbeats above all) carry on.

Whether an error is an outage at all is ``classify``'s answer (``core/db_errors.py``): it
tells an outage (the database away, busy or read-only: the same statement works once it is
back) from a refusal (the database will not take this statement, ever: ``worker/isolation.py``)
and from a timeout (an outage a smaller statement may get past: ``worker/turn.py`` splits the
batch).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.db import DatabaseError, InterfaceError, connections

from django_jobs.core.db_errors import REFUSAL, classify
from django_jobs.models.schema import jobs_database

logger = logging.getLogger("django_jobs.worker")

RETRY_BASE_SECONDS = 0.5
# Well under the default LEASE_SECONDS (30): a worker is back within this of its database, in
# time to renew its leases after a short outage.
RETRY_CAP_SECONDS = 10.0
CONNECTION = "connection"  # the episode of a lost connection, shared by every step

T = TypeVar("T")

@dataclass
class Episode:
    started: float
    failures: int = 0
    not_before: float = 0.0


@dataclass
class Outages:
    """The open episodes of one worker, by step name (or CONNECTION). ``connections_lost`` is
    called as an outage starts and as it ends: the database may have ended any connection of
    the process meanwhile, the job threads' idle ones too (``execution.connections_lost``)."""

    worker_id: str
    episodes: dict[str, Episode] = field(default_factory=dict)
    connections_lost: Callable[[], None] = lambda: None

    def attempt(self, step: str, func: Callable[..., T], *args: Any) -> T | None:
        """Run one database step unless its episode's delay is still running; None if skipped
        or failed (the connection to the jobs' database is then closed, to be opened afresh)."""
        now = time.monotonic()
        if now < self._not_before(step):
            return None
        try:
            result = func(*args)
        except (DatabaseError, InterfaceError) as exc:
            self.failed(step, exc, time.monotonic())
            connections[jobs_database()].close()
            return None
        if self.episodes:
            self.worked(step, time.monotonic())
        return result

    def failed(self, step: str, exc: BaseException, now: float) -> None:
        key = step if classify(exc) is REFUSAL else CONNECTION
        episode = self.episodes.get(key)
        if episode is None:
            episode = self.episodes[key] = Episode(started=now)
            summary = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            what = "database unavailable" if key == CONNECTION else f"database error in {step}"
            logger.warning("worker %s: %s: %s: %s; retrying with backoff", self.worker_id, what,
                           type(exc).__name__, summary)
            logger.debug("worker %s: first error of the episode", self.worker_id, exc_info=exc)
            if key == CONNECTION:
                self.connections_lost()
        episode.failures += 1
        delay = min(RETRY_CAP_SECONDS, RETRY_BASE_SECONDS * 2 ** (episode.failures - 1))
        # Jitter spreads many workers' reconnects; it needs no cryptographic randomness.
        episode.not_before = now + delay * random.uniform(0.5, 1.0)  # noqa: S311

    def worked(self, step: str, now: float) -> None:
        for key in (CONNECTION, step):
            episode = self.episodes.pop(key, None)
            if episode is None:
                continue
            what = "database available again" if key == CONNECTION else f"{step} works again"
            if key == CONNECTION:
                self.connections_lost()
            logger.info("worker %s: %s after %.1f s (%d failed tries)", self.worker_id, what,
                        now - episode.started, episode.failures)

    def retry_now(self) -> None:
        """Let every step run at once (a stopping worker's last try)."""
        for episode in self.episodes.values():
            episode.not_before = 0.0

    @property
    def active(self) -> bool:
        return bool(self.episodes)

    def wait(self, now: float, default: float) -> float:
        """Seconds until the next step may be tried again; ``default`` if no episode is open."""
        if not self.episodes:
            return default
        return max(min(e.not_before for e in self.episodes.values()) - now, 0.0)

    def _not_before(self, step: str) -> float:
        if not self.episodes:
            return 0.0
        found = [self.episodes[k].not_before for k in (CONNECTION, step) if k in self.episodes]
        return max(found, default=0.0)
