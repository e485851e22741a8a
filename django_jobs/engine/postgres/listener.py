"""PostgreSQL LISTEN/NOTIFY: wakes an idle worker the moment a job is enqueued for it.

The listener has a connection of its own, and listens on two channels: ``django_jobs_<pid>``
(``pid``: its session's server process id), where the enqueue's trigger tells this worker alone
of a job it gives it (migration 0018, ``engine/postgres/waiters.py``), and ``django_jobs``,
where the trigger tells every worker of a queue when it found fewer workers than jobs (the
payload is the queue; a worker of other queues lets it pass). Once its
own channel is known to work, ``pid`` is set, and the worker's claims register it as waiting
when they come back short. Notifications are delivered only when the enqueuing transaction
commits.

Its thread connects, listens and probes; then it hands the connection to the worker's loop,
which waits on the connection's socket and its own wake pipe in one ``poll()``
(``worker/wake.py``) and reads the notifications itself as they arrive (``hear``): a
notification wakes the loop with no other thread to be scheduled first. When the connection
fails, the loop gives it back, and the thread connects again after RETRY_SECONDS.

A transaction pooler (PgBouncer's ``pool_mode = transaction``) runs the ``LISTEN`` on a server
connection it then hands to other clients, so notifications never reach the listener. On its
first connection the listener therefore sends itself a test notification from a second
connection, on its own channel; if that does not arrive within PROBE_SECONDS, it stops, ``pid``
stays None (the worker is never registered as waiting, so enqueues wake it by ``django_jobs``, and
no notification is spent on it) and the worker finds jobs by polling every ``POLL_INTERVAL``
seconds, which it does in any case: a notification lost on the way is caught by that poll. The
result also tells ``pooler`` whether the pooler keeps sessions (and so prepared statements).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from django_jobs.engine import hooks
from django_jobs.engine.postgres import waiters
from django_jobs.engine.postgres.pooler import note_notifications

if TYPE_CHECKING:
    import psycopg
    from django.db.backends.base.base import BaseDatabaseWrapper
    from psycopg.rows import TupleRow

logger = logging.getLogger("django_jobs.worker")

CHANNEL = waiters.BROADCAST
LOOK_EVERY = waiters.LOOK_EVERY
# How long the test notification may take. It travels one local round trip; the margin is for
# a loaded host.
PROBE_SECONDS = 3.0
# How long after a failed LISTEN connection the next one is tried (the poll finds jobs meanwhile).
RETRY_SECONDS = 5.0
# A waiting worker claims at its poll whatever it heard: from this share of POLL_INTERVAL after
# its last claim (the loop's wait ends at about the whole interval; a little early is enough).
POLL_SLACK = 0.9


class Wakes(Protocol):
    """What the listener wakes the worker's loop with (``worker/wake.py``, or an Event)."""

    def set(self) -> None: ...


class Listener(threading.Thread):
    def __init__(self, db_wrapper: BaseDatabaseWrapper, wake: Wakes,
                 poll_interval: float, queues: Sequence[str] = ()) -> None:
        super().__init__(name="django-jobs-listener", daemon=True)
        self.db_wrapper, self.wake, self.poll_interval = db_wrapper, wake, poll_interval
        self.queues = frozenset(queues)  # empty: every queue
        self.stopped = threading.Event()
        self.probed = False
        # The listening session's process id while its channel works (see the module's
        # docstring); the loop reads it for each claim.
        self.pid: int | None = None
        self.heard = 0  # notifications on its own channel so far, each one job
        self.heard_all = 0  # notifications to every worker of its queues so far
        # The listening connection while the loop reads it (``hear``), and its own channel;
        # set when the loop gives the connection back to the thread.
        self._conn: psycopg.Connection[TupleRow] | None = None
        self._own, self._encoding = "", "utf-8"
        self._returned = threading.Event()
        # (heard, heard_all) before the claim that left the worker waiting; when it was sent.
        self.waiting_since: tuple[int, int] | None = None
        self.claimed_at = 0.0
        # While it waits: when it next looks for jobs other workers were told of and did not
        # take (``waiters.overlooked``), and how many its last look found (its next claim
        # takes them too).
        self.look_at = 0.0
        self.overlooked = 0
        self.look_every = LOOK_EVERY  # by its rank among the waiting workers (waiters.look_every)

    @classmethod
    def start_for(
        cls, db_wrapper: BaseDatabaseWrapper, wake: Wakes, poll_interval: float,
        queues: Sequence[str] = (),
    ) -> Listener | None:
        if db_wrapper.vendor != "postgresql":
            return None
        listener = cls(db_wrapper, wake, poll_interval, queues)
        listener.start()
        return listener

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                self._listen()
            except Exception:
                logger.debug("LISTEN connection failed; polling meanwhile", exc_info=True)
            if not self.stopped.is_set():
                self.stopped.wait(RETRY_SECONDS)

    def _listen(self) -> None:
        """Connect, LISTEN and probe; then hand the connection to the loop, which reads it,
        and wait until the loop gives it back (it failed, or the worker stops)."""
        params = self.db_wrapper.get_connection_params()
        conn = self._connect(params)
        try:
            conn.autocommit = True
            row = conn.execute("SELECT pg_backend_pid()").fetchone()
            pid = int(row[0]) if row else 0
            own = waiters.channel(pid)
            conn.execute(f"LISTEN {own}")
            if not self.probed:
                arrived = self._probe(conn, params, own)
                if self.stopped.is_set():
                    return
                self.probed = True
                note_notifications(self.db_wrapper, arrived)
                if not arrived:
                    self._give_up(conn, own)
                    return
            conn.execute(f"LISTEN {CHANNEL}")
            self._own, self._encoding = own, conn.info.encoding
            self._returned.clear()
            if self.stopped.is_set():  # stop() came before the clear
                return
            self._conn, self.pid = conn, pid
            self.wake.set()  # the loop now waits on the connection too; a claim registers it
            self._returned.wait()
        finally:
            self._conn = None
            self.pid = None
            self.waiting_since = None
            conn.close()

    # The loop's side of the connection.

    def fileno(self) -> int | None:
        """The socket the loop waits on with its wake pipe (``worker/wake.py``), while the
        connection is the loop's; None meanwhile (connecting, probing, waiting to retry)."""
        conn = self._conn
        if conn is None:
            return None
        try:
            return conn.pgconn.socket
        except Exception:  # closed under us: give it back
            self._give_back()
            return None

    def hear(self) -> None:
        """Read what has arrived on the connection, without waiting, and count each
        notification for this worker (the loop's next claim takes its jobs). A connection that
        failed goes back to the thread, which connects again after RETRY_SECONDS (the poll
        finds the jobs meanwhile). The loop's thread alone calls it, and alone reads the
        connection."""
        conn = self._conn
        if conn is None:
            return
        pgconn = conn.pgconn
        try:
            pgconn.consume_input()
            while (note := pgconn.notifies()) is not None:
                channel = note.relname.decode(self._encoding)
                if channel == self._own:
                    self.heard += 1
                elif self._serves(note.extra.decode(self._encoding)):
                    self.heard_all += 1
        except Exception:
            logger.debug("LISTEN connection lost; polling until it is back", exc_info=True)
            self._give_back()

    def _give_back(self) -> None:
        self._conn, self.pid, self.waiting_since, self.overlooked = None, None, None, 0
        self._returned.set()

    # What the loop asks between its claims: how many jobs it was told of.

    def heard_so_far(self) -> tuple[int, int]:
        self.hear()
        return self.heard, self.heard_all

    def claim_sent(self, heard: tuple[int, int], waiting: bool, took: int = 0) -> None:
        """A claim was sent after ``heard`` (``heard_so_far``) and took ``took`` jobs;
        ``waiting``: fewer than the worker has room for, and it registered the worker as
        waiting. A claim sent for overlooked jobs that took none (a limit refuses them, or
        another worker was quicker) puts the next look off until the poll."""
        self.claimed_at = time.monotonic()
        self.waiting_since = heard if waiting and self.pid is not None else None
        wait = POLL_SLACK * self.poll_interval if self.overlooked and not took else 0.0
        self.look_at = self.claimed_at + max(wait, self.look_every)
        self.overlooked = 0

    def look_in(self, now: float) -> float | None:
        """Seconds until this worker looks for overlooked jobs (``look``); None while it does
        not wait (busy, not listening): then it is not one to take them."""
        if self.pid is None or self.waiting_since is None:
            return None
        return max(self.look_at - now, 0.0)

    def look(self, skips: Sequence[str] = ()) -> int:
        """Count the jobs of its queues (but ``skips``, its paused queues) that came due more
        than ``waiters.LOOK_AFTER`` seconds ago and that no worker has claimed, over the
        caller's own connection: the worker its enqueue told did not act on them (frozen,
        dead, or the notification lost). Its next claim takes them (``allowance``). The next
        look is due after ``waiters.look_every`` of its rank."""
        pid, looked = self.pid, time.monotonic()
        self.look_at = looked + self.look_every  # also if the read fails
        if pid is None:
            return 0
        with self.db_wrapper.cursor() as cursor:
            self.overlooked, rank = waiters.overlooked(
                cursor, pid, sorted(self.queues) or None, skips)
        self.look_every = waiters.look_every(rank)
        self.look_at = looked + self.look_every
        return self.overlooked

    def allowance(self) -> int | None:
        """How many jobs a claim should take now: while the worker waits (its last claim left
        it waiting), one per notification on its own channel since that claim, 0 if none came;
        None (as many as it has room for) if it does not wait, if a notification to every
        worker came, or if the poll is due; and as many more as its last look found
        overlooked (``look``). Every job that became ready since the last claim was given by
        the trigger to one waiting worker, or to another worker of its queue, or announced to every
        worker;
        so a claim of more would take another worker's job from under it, and a job due later
        is the poll's.

        Also None while concurrency or rate limits are registered (``hooks.limits_claims``): a
        finish frees a limit's room with no enqueue to tell of it, and a claim of one job reads
        one candidate, which may be a job its limit refuses, so the job it was told of would
        wait for the poll behind it."""
        if self.pid is None or self.waiting_since is None or hooks.limits_claims():
            return None
        if time.monotonic() - self.claimed_at >= POLL_SLACK * self.poll_interval:
            return None
        heard, heard_all = self.waiting_since
        if self.heard_all != heard_all:
            return None
        return self.heard - heard + self.overlooked

    def _serves(self, queue: str) -> bool:
        """Whether a notification to every worker (its payload a queue, or empty) is ours."""
        return not queue or not self.queues or queue in self.queues

    def _probe(self, conn: psycopg.Connection[TupleRow], params: dict, own: str) -> bool:
        """Send a test notification from another connection to ``conn``'s own channel; True if
        it arrives. The sender also removes the waiters of sessions that are gone."""
        token = f"probe {uuid.uuid4().hex}"
        sender = self._connect(params)
        try:
            sender.autocommit = True
            sender.execute("SELECT pg_notify(%s, %s)", (own, token))
            waiters.forget_gone(sender)
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

    def _give_up(self, conn: psycopg.Connection[TupleRow], own: str) -> None:
        logger.info(
            "notifications do not arrive (a transaction pooler between worker and database?): "
            "looking for jobs every %.2g s (POLL_INTERVAL) instead", self.poll_interval,
        )
        conn.execute(f"UNLISTEN {own}")  # the server connection the pooler lent us
        self.stopped.set()

    def forget_gone(self) -> None:
        """Remove the waiting rows of sessions that are gone (a worker killed leaves its row;
        enqueues pass over it already, migration 0024), over the caller's own connection: the
        worker's heartbeat calls it. The same statement reads whether a process waits for jobs
        to end (``waiters.result_waiters``)."""
        if self.pid is None:  # not listening: the rows are not this worker's business
            return
        with self.db_wrapper.cursor() as cursor:
            cursor.execute(waiters.FORGET_GONE_AND_LOOK, [waiters.WAIT_LISTENER])
            waiters.result_waiters[self.db_wrapper.alias] = bool(cursor.fetchone()[0])

    def stop(self) -> None:
        """Stop listening; the worker's claims no longer register it as waiting. Its row is
        removed, over the caller's own connection to the database (best effort: the row of a
        session that is gone is removed by the next listener to start, and meanwhile costs at
        most one notification, which the poll makes up for)."""
        pid, self.pid = self.pid, None
        self.stopped.set()
        self._give_back()
        if pid is not None:
            try:
                with self.db_wrapper.cursor() as cursor:
                    cursor.execute(waiters.LEAVE, [pid])
            except Exception:
                logger.debug("could not remove the worker's waiting row", exc_info=True)
