"""On PostgreSQL, the notifications that wake the processes waiting for jobs to end
(``Job.wait``, ``engine/waiting.py``).

The waiting side, ``NotifiedWakeups``: one listener thread per process and database, started by
the first waiter, with a connection of its own named ``APPLICATION_NAME`` that LISTENs on
``CHANNEL``. Each notification's payload is the ids of jobs a worker just finished (empty: any
job), and the listener wakes their waiters, who read their job again. On its first connection
it sends itself a test notification from a second connection; if that does not arrive within
``PROBE_SECONDS`` (a transaction pooler, whose LISTEN lands on a server connection handed to
other clients) it gives up for the life of the process and the waiters poll. A lost
connection is tried again after ``RETRY_SECONDS`` while anyone waits; with no waiter for
``IDLE_SECONDS`` the thread closes its connection and ends, and the next waiter starts another.

The finishing side, ``announce`` in ``engine/postgres/engine.py``: a worker's finish sends the
notification only while some listener is connected, which the worker's heartbeat reads from
``pg_stat_activity`` (the sessions named ``APPLICATION_NAME``) in the statement it already
sends (``waiters.FORGET_GONE_AND_LOOK``). So where nobody waits a finish sends nothing more;
while someone waits, each finish batch sends one ``pg_notify`` after its commit. A waiter that
begins before the workers' next heartbeat is found by its own reads meanwhile.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import TYPE_CHECKING

from django.db import connections

from django_jobs.engine.postgres import waiters
from django_jobs.engine.waiting import Wakeups

if TYPE_CHECKING:
    import psycopg
    from psycopg.rows import TupleRow

logger = logging.getLogger("django_jobs.wait")

CHANNEL, APPLICATION_NAME = waiters.FINISHED_CHANNEL, waiters.WAIT_LISTENER
PROBE_SECONDS = 3.0
RETRY_SECONDS = 5.0
IDLE_SECONDS = 30.0


class NotifiedWakeups(Wakeups):
    """The waiters of one database, woken by a listener thread (see the module's docstring)."""

    def __init__(self, using: str) -> None:
        super().__init__()
        self.using = using
        self._thread: threading.Thread | None = None
        self._start = threading.Lock()
        self._listening = False
        self.gave_up = False  # notifications never arrived: poll for the life of the process
        self.heard = 0  # notifications of finished jobs received so far
        self._stop = threading.Event()

    @property
    def listening(self) -> bool:
        return self._listening

    def started(self) -> None:
        if self.gave_up:
            return
        with self._start:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="django-jobs-wait-listener", daemon=True)
                self._thread.start()

    def stop(self) -> None:
        """End the listener thread and close its connection (the next waiter starts it again):
        for a process about to drop its database, as a test run does."""
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=PROBE_SECONDS + 2.0)
        self._stop.clear()

    def _run(self) -> None:
        while not self.gave_up and not self._stop.is_set():
            try:
                self._listen()
                return  # idle: the next waiter starts another thread
            except Exception:
                self._listening = False
                logger.info("the wait listener lost its connection; waiters poll until it "
                            "connects again", exc_info=True)
                if self._stop.wait(RETRY_SECONDS) or not self.watched():
                    return

    def _listen(self) -> None:
        params = connections[self.using].get_connection_params()
        params["application_name"] = APPLICATION_NAME
        conn = self._connect(params)
        try:
            conn.autocommit = True
            conn.execute(f"LISTEN {CHANNEL}")
            if not self._probe(conn, params):
                self.gave_up = True
                logger.info("finish notifications do not arrive (a transaction pooler?): "
                            "Job.wait polls the job's row instead")
                return
            self.poke(None)  # finishes before the probe went unheard: read again
            self._listening = True
            idle_since = None
            while not self._stop.is_set():
                for note in conn.notifies(timeout=1.0):
                    self.heard += 1
                    self.poke(_ids(note.payload))
                if self.watched():
                    idle_since = None
                elif idle_since is None:
                    idle_since = time.monotonic()
                elif time.monotonic() - idle_since >= IDLE_SECONDS:
                    return
        finally:
            self._listening = False
            conn.close()

    def _probe(self, conn: psycopg.Connection[TupleRow], params: dict) -> bool:
        token = f"probe {uuid.uuid4().hex}"
        sender = self._connect({**params, "application_name": "django_jobs_probe"})
        try:
            sender.autocommit = True
            sender.execute("SELECT pg_notify(%s, %s)", (CHANNEL, token))
        finally:
            sender.close()
        deadline = time.monotonic() + PROBE_SECONDS
        while (left := deadline - time.monotonic()) > 0:
            for note in conn.notifies(timeout=min(left, 1.0), stop_after=1):
                if note.payload == token:
                    return True
        return False

    def _connect(self, params: dict) -> psycopg.Connection[TupleRow]:
        """A connection outside Django's (and its pool): LISTEN must not follow it into one."""
        # Database: the backend's DB-API module (psycopg), which the stubs leave out.
        return connections[self.using].Database.connect(**params)  # type: ignore[attr-defined]


def _ids(payload: str) -> list[int] | None:
    """The job ids of a notification; None (wake every waiter) for an empty or foreign one."""
    if not payload or payload.startswith("probe "):
        return None
    try:
        return [int(part) for part in payload.split(",")]
    except ValueError:
        return None
