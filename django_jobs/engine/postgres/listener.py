"""PostgreSQL LISTEN/NOTIFY: wakes an idle worker the moment a job is enqueued.

A trigger (migration 0002) sends ``NOTIFY django_jobs`` when jobs are inserted or become
pending again; notifications are delivered only when the enqueuing transaction commits.

A transaction pooler (PgBouncer's ``pool_mode = transaction``) runs the ``LISTEN`` on a server
connection it then hands to other clients, so notifications never reach the listener. On its
first connection the listener therefore sends itself a test notification from a second
connection; if that does not arrive within PROBE_SECONDS, it stops, and the worker finds jobs by
polling every ``POLL_INTERVAL`` seconds, which it does in any case. The result also tells
``pooler`` whether the pooler keeps sessions (and so prepared statements).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import TYPE_CHECKING

from django_jobs.engine.postgres.pooler import note_notifications

if TYPE_CHECKING:
    import psycopg
    from django.db.backends.base.base import BaseDatabaseWrapper
    from psycopg.rows import TupleRow

logger = logging.getLogger("django_jobs.worker")

CHANNEL = "django_jobs"
# How long the test notification may take. It travels one local round trip; the margin is for
# a loaded host.
PROBE_SECONDS = 3.0


class Listener(threading.Thread):
    def __init__(self, db_wrapper: BaseDatabaseWrapper, wake: threading.Event,
                 poll_interval: float) -> None:
        super().__init__(name="django-jobs-listener", daemon=True)
        self.db_wrapper, self.wake, self.poll_interval = db_wrapper, wake, poll_interval
        self.stopped = threading.Event()
        self.probed = False

    @classmethod
    def start_for(
        cls, db_wrapper: BaseDatabaseWrapper, wake: threading.Event, poll_interval: float
    ) -> Listener | None:
        if db_wrapper.vendor != "postgresql":
            return None
        listener = cls(db_wrapper, wake, poll_interval)
        listener.start()
        return listener

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                self._listen()
            except Exception:
                logger.debug("LISTEN connection failed; polling meanwhile", exc_info=True)
                self.stopped.wait(5.0)

    def _listen(self) -> None:
        params = self.db_wrapper.get_connection_params()
        conn = self._connect(params)
        try:
            conn.autocommit = True
            conn.execute(f"LISTEN {CHANNEL}")
            if not self.probed:
                arrived = self._probe(conn, params)
                if self.stopped.is_set():
                    return
                self.probed = True
                note_notifications(self.db_wrapper, arrived)
                if not arrived:
                    self._give_up(conn)
                    return
            while not self.stopped.is_set():
                for _ in conn.notifies(timeout=1.0, stop_after=1):
                    self.wake.set()
        finally:
            conn.close()

    def _probe(self, conn: psycopg.Connection[TupleRow], params: dict) -> bool:
        """Send a test notification from another connection; True if it reaches ``conn``."""
        token = f"probe {uuid.uuid4().hex}"
        sender = self._connect(params)
        try:
            sender.autocommit = True
            sender.execute("SELECT pg_notify(%s, %s)", (CHANNEL, token))
        finally:
            sender.close()
        deadline = time.monotonic() + PROBE_SECONDS
        while (left := deadline - time.monotonic()) > 0 and not self.stopped.is_set():
            for note in conn.notifies(timeout=min(left, 1.0), stop_after=1):
                self.wake.set()
                if note.payload == token:
                    return True
        return False

    def _connect(self, params: dict) -> psycopg.Connection[TupleRow]:
        """A connection of its own, outside Django's connection pool (``OPTIONS["pool"]``): it
        listens for as long as the worker runs, and LISTEN must not follow it into a pool."""
        # Database: the backend's DB-API module (psycopg), which the stubs leave out.
        return self.db_wrapper.Database.connect(**params)  # type: ignore[attr-defined]

    def _give_up(self, conn: psycopg.Connection[TupleRow]) -> None:
        logger.info(
            "notifications do not arrive (a transaction pooler between worker and database?): "
            "looking for jobs every %.2g s (POLL_INTERVAL) instead", self.poll_interval,
        )
        conn.execute(f"UNLISTEN {CHANNEL}")  # the server connection the pooler lent us
        self.stopped.set()

    def stop(self) -> None:
        self.stopped.set()
